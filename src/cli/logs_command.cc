// gpuherd logs ID [-f] [--attempt N | --all-attempts]: a job's output, by
// attempt (the latest by default); -f follows it until the job ends. An
// array's id prints every task's output, each under a header.
#include <unistd.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"

namespace gpuherd::cli {

namespace {

struct LogsFlags {
  std::string id;   // "12", or "12_3" for a task of an array
  int attempt = 0;  // 0: the latest
  bool follow = false, stderr_only = false, all_attempts = false;
};

// Prints one attempt's output (0: the latest) of job `ref` to its end, or
// with -f until the job ends. With `expand`, a reply that says `ref` is an
// array's id prints nothing and returns the array's size; otherwise 0.
int PrintAttempt(CommandContext* ctx, const LogsFlags& f, const std::string& ref, int attempt, bool expand) {
  DaemonClient client(ctx->dir());
  int64_t offset = 0;
  std::string stream = f.stderr_only ? "stderr" : "stdout";
  bool told_waiting = false;
  while (true) {
    auto reply = client.Get("/v1/jobs/" + ref + "/logs?stream=" + stream + "&offset=" + std::to_string(offset) +
                            "&attempt=" + std::to_string(attempt));
    if (!reply.ok()) {
      ctx->Fail(reply.status());
      return 0;
    }
    if (auto array = reply->find("array"); expand && array != reply->end() && array->is_object()) {
      return array->value("size", 0);
    }
    // Attempt 0: the job has never started, so it has no output yet.
    if (reply->value("attempt", 1) == 0 && !reply->value("final", false)) {
      std::string state = reply->value("state", std::string("pending"));
      std::string reason = reply->value("reason", std::string());
      std::string what = "job " + ref + " is " + Printable(state) + " and has not started yet" +
                         (reason.empty() ? "" : " (" + Printable(reason) + ")");
      if (!f.follow) {
        ctx->Fail(FailedPrecondition(what + "; `gpuherd logs -f " + ref + "` waits for it and follows its output"));
        return 0;
      }
      if (!told_waiting) std::fprintf(stderr, "gpuherd: %s; waiting for it to start\n", PrintableLines(what).c_str());
      told_waiting = true;
      ::usleep(300'000);
      continue;
    }
    // The output itself is the job's, printed raw as cat would (docs/security.md,
    // "Terminal output"): the reader asked for it by the job's id.
    std::string data = reply->value("data", std::string());
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    offset = reply->value("next_offset", offset);
    bool more = reply->value("truncated", false);
    if (more) continue;
    if (!f.follow || reply->value("final", true)) return 0;
    ::usleep(300'000);
  }
}

// One job's output as the flags ask: one attempt, or every attempt under a
// header. Returns the array's size instead when `expand` and `ref` is an
// array's id.
int PrintJob(CommandContext* ctx, const LogsFlags& f, const std::string& ref, bool expand) {
  if (!f.all_attempts) return PrintAttempt(ctx, f, ref, f.attempt, expand);
  // The latest attempt's reply tells how many there are; a job that has
  // not started is answered as for its latest attempt.
  auto first = DaemonClient(ctx->dir()).Get("/v1/jobs/" + ref + "/logs?offset=0&attempt=0");
  if (!first.ok()) {
    ctx->Fail(first.status());
    return 0;
  }
  if (auto array = first->find("array"); expand && array != first->end() && array->is_object()) {
    return array->value("size", 0);
  }
  const int attempts = first->value("attempts", 0);
  if (attempts == 0) return PrintAttempt(ctx, f, ref, 0, false);
  for (int a = 1; a <= attempts; ++a) {
    std::printf("%s==> job %s, attempt %d of %d <==\n", a == 1 ? "" : "\n", ref.c_str(), a, attempts);
    std::fflush(stdout);
    // Only the last attempt is followed; an earlier one has ended.
    LogsFlags one = f;
    one.follow = f.follow && a == attempts;
    PrintAttempt(ctx, one, ref, a, false);
    if (ctx->exit_code != 0) return 0;
  }
  return 0;
}

}  // namespace

void AddLogsCommand(CLI::App& app, CommandContext* ctx) {
  auto f = std::make_shared<LogsFlags>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a job's output (its latest attempt's unless told)");
  cmd->add_option("id", f->id, "Job id, array id (every task's output) or a task such as 12_3")
      ->required()
      ->check(JobRef());
  cmd->add_flag("-f,--follow", f->follow, "Keep printing until the job ends");
  cmd->add_flag("--stderr", f->stderr_only, "Print the job's stderr instead of its stdout");
  auto* attempt = cmd->add_option("--attempt", f->attempt, "Print this attempt's output (1 is the first; default: the latest)")
                      ->check(PositiveWhole());
  cmd->add_flag("--all-attempts", f->all_attempts, "Print every attempt's output, each under a header")
      ->excludes(attempt);
  cmd->callback([ctx, f] {
    const bool task = f->id.find('_') != std::string::npos;
    const int size = PrintJob(ctx, *f, f->id, !task);
    // An array's id: every task's output in order, each under a header; a
    // task that has not started says so and the others still print.
    int failed = 0;
    for (int t = 0; t < size; ++t) {
      const std::string ref = f->id + "_" + std::to_string(t);
      std::printf("%s==> job %s <==\n", t == 0 ? "" : "\n", ref.c_str());
      std::fflush(stdout);
      ctx->exit_code = 0;
      PrintJob(ctx, *f, ref, false);
      if (ctx->exit_code != 0) failed = ctx->exit_code;
    }
    if (failed != 0) ctx->exit_code = failed;
  });
}

}  // namespace gpuherd::cli
