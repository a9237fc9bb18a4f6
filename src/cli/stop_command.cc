// gpuherd stop: asks the daemon to stop and waits until it has.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cli/command.h"
#include "cli/daemon_client.h"

namespace gpuherd::cli {

namespace {

// How long `stop --cancel-jobs` waits for cancelled jobs to end (their grace
// periods: SIGTERM, a checkpoint, SIGKILL at the latest).
constexpr int kCancelWaitSeconds = 300;

// Cancels every job in one request and waits until none runs; false (with
// the failure recorded) when that fails or takes too long.
bool CancelJobsAndWait(CommandContext* ctx, DaemonClient& client) {
  auto cancelled = client.Post("/v1/jobs/cancel", nlohmann::json{{"all", true}});
  if (!cancelled.ok()) {
    ctx->Fail(cancelled.status().Annotate("cannot cancel the jobs"));
    return false;
  }
  bool told = false;
  for (int i = 0; i < kCancelWaitSeconds * 5; ++i) {
    auto queue = client.Get("/v1/jobs");
    if (!queue.ok()) {
      ctx->Fail(queue.status());
      return false;
    }
    size_t running = 0;
    for (const auto& job : queue->value("jobs", nlohmann::json::array())) {
      const std::string state = job.value("state", std::string());
      running += state == "running" || state == "stopping";
    }
    if (running == 0) return true;
    if (!told) std::fprintf(stderr, "gpuherd: waiting for %zu job(s) to end after their grace period\n", running);
    told = true;
    ::usleep(200'000);
  }
  ctx->Fail(Unavailable("jobs still run " + std::to_string(kCancelWaitSeconds) +
                        " s after they were cancelled; the daemon was not stopped"));
  return false;
}

}  // namespace

void AddStopCommand(CLI::App& app, CommandContext* ctx) {
  CLI::App* cmd = app.add_subcommand("stop", "Stop the running daemon (its jobs run on unless --cancel-jobs)");
  auto cancel_jobs = std::make_shared<bool>(false);
  cmd->add_flag("--cancel-jobs", *cancel_jobs,
                "Cancel every job first (SIGTERM, SIGKILL after its grace), wait until they have ended, then stop: "
                "for a personal daemon whose jobs should not outlive it");
  cmd->callback([ctx, cancel_jobs] {
    DaemonClient client(ctx->dir());
    if (*cancel_jobs && !CancelJobsAndWait(ctx, client)) return;
    auto reply = client.Post("/v1/shutdown", nlohmann::json::object());
    if (!reply.ok()) return ctx->Fail(reply.status());
    for (int i = 0; i < 100 && client.Reachable(); ++i) ::usleep(100'000);
    if (client.Reachable()) return ctx->Fail(Unavailable("the daemon was asked to stop but still answers after 10 s"));
    // The socket closes before the daemon has written its last records and
    // exited: it is gone once its lock on <home>/daemon.lock is free, so
    // `gpuherd stop && gpuherd daemon` works.
    const std::string lock = ctx->dir().root + "/daemon.lock";
    const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd >= 0) {
      bool released = false;
      for (int i = 0; i < 300 && !released; ++i) {
        released = ::flock(fd, LOCK_SH | LOCK_NB) == 0;
        if (!released) ::usleep(100'000);
      }
      ::close(fd);
      if (!released) return ctx->Fail(Unavailable("the daemon stopped answering but still holds " + lock + " after 30 s"));
    }
    std::printf("daemon stopped\n");
  });
}

}  // namespace gpuherd::cli
