// gpuherd stop: asks the daemon to stop and waits until it has.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"

namespace gpuherd::cli {

void AddStopCommand(CLI::App& app, CommandContext* ctx) {
  CLI::App* cmd = app.add_subcommand("stop", "Stop the running daemon");
  cmd->callback([ctx] {
    DaemonClient client(ctx->dir());
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
