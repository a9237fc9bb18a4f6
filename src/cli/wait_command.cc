// gpuherd wait [--any] ID...: waits for jobs to end, like `tsp -w`. Exits
// with the first non-zero exit status among them, in the order given (0 when
// all completed); with --any, returns when one ends, with its status.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "sched/job.h"

namespace gpuherd::cli {
namespace {

volatile std::sig_atomic_t g_wait_interrupted = 0;
void OnWaitInterrupt(int) { g_wait_interrupted = 1; }

// A finished job's exit status as a shell reports it: its exit code, 128 +
// the signal that killed it, or 1 when it failed or was cancelled without
// either (it never started, or its launch failed).
int ExitStatusOf(const nlohmann::json& job) {
  const std::string state = job.value("state", std::string());
  if (state == "completed") return 0;
  if (auto code = job.find("exit_code"); code != job.end() && code->is_number_integer() && code->get<int>() != 0) {
    return std::clamp(code->get<int>(), 1, 255);
  }
  if (auto sig = job.find("exit_signal"); sig != job.end() && sig->is_number_integer() && sig->get<int>() > 0) {
    return std::min(128 + sig->get<int>(), 255);
  }
  return 1;
}

}  // namespace

void AddWaitCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::vector<std::string> ids;
    bool any = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "wait", "Wait for jobs to end; exit with the first non-zero exit status among them (0: all completed)");
  cmd->add_option("ids", f->ids, "Job ids, array ids (all its tasks) or tasks such as 12_3")
      ->required()
      ->check(JobRef());
  cmd->add_flag("--any", f->any, "Return as soon as one of them ends, with its exit status");
  cmd->callback([ctx, f] {
    DaemonClient client(ctx->dir());
    std::vector<std::string> ids = f->ids;
    std::vector<std::optional<int>> status(ids.size());  // per id, once it ended
    std::vector<bool> looked(ids.size(), false);         // whether an array was expanded
    struct sigaction action = {};
    action.sa_handler = OnWaitInterrupt;  // no SA_RESTART: a sleep ends at once
    sigemptyset(&action.sa_mask);
    struct sigaction previous = {};
    ::sigaction(SIGINT, &action, &previous);
    // Polls unfinished jobs only, every 50 ms at first (short jobs return
    // quickly), backing off to 1 s (a long wait costs the daemon little).
    useconds_t pause = 50'000;
    while (!g_wait_interrupted) {
      bool all_done = true;
      for (size_t i = 0; i < ids.size(); ++i) {
        if (status[i]) continue;
        auto job = client.Get("/v1/jobs/" + ids[i]);
        if (!job.ok()) {
          ::sigaction(SIGINT, &previous, nullptr);
          // An id that names no job is the caller's mistake.
          return ctx->Fail(job.status().code() == Code::kNotFound ? InvalidArgument(job.status().message())
                                                                   : job.status());
        }
        // An array's id stands for its tasks, in order; the reply is its
        // first task's, so that task is judged by it at once.
        if (!looked[i]) {
          looked[i] = true;
          if (auto array = job->find("array"); array != job->end() && array->is_object()) {
            const std::string id = ids[i];
            const int size = array->value("size", 0);
            std::vector<std::string> tasks;
            for (int t = 0; t < size; ++t) tasks.push_back(id + "_" + std::to_string(t));
            if (!tasks.empty()) {
              ids[i] = tasks[0];
              ids.insert(ids.begin() + static_cast<std::ptrdiff_t>(i) + 1, tasks.begin() + 1, tasks.end());
              status.insert(status.begin() + static_cast<std::ptrdiff_t>(i) + 1, tasks.size() - 1, std::nullopt);
              looked.insert(looked.begin() + static_cast<std::ptrdiff_t>(i) + 1, tasks.size() - 1, true);
            }
          }
        }
        auto state = sched::ParseJobState(job->value("state", std::string()));
        if (state && sched::IsFinal(*state)) {
          status[i] = ExitStatusOf(*job);
          if (f->any) {
            ::sigaction(SIGINT, &previous, nullptr);
            ctx->exit_code = *status[i];
            return;
          }
        } else {
          all_done = false;
        }
      }
      if (all_done) break;
      ::usleep(pause);
      pause = std::min<useconds_t>(pause * 2, 1'000'000);
    }
    ::sigaction(SIGINT, &previous, nullptr);
    if (g_wait_interrupted) {
      std::fprintf(stderr, "gpuherd: interrupted; the jobs keep running\n");
      ctx->exit_code = 130;
      return;
    }
    for (const auto& s : status) {
      if (*s != 0) {
        ctx->exit_code = *s;
        return;
      }
    }
    ctx->exit_code = 0;
  });
}

}  // namespace gpuherd::cli
