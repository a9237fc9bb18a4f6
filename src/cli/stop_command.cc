// gpuherd stop: asks the daemon to stop and waits until it has.
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
    std::printf("daemon stopped\n");
  });
}

}  // namespace gpuherd::cli
