// gpuherd status: whether a daemon runs on this state directory. Exit 0 when
// it answers, 3 when it does not (as `systemctl status` does), for scripts.
// It says which daemon it reached and how it was found (daemon_locator.h).
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"
#include "core/time.h"

namespace gpuherd::cli {

void AddStatusCommand(CLI::App& app, CommandContext* ctx) {
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("status", "Say whether the daemon runs (exit 0) or not (exit 3)");
  cmd->add_flag("--json", *json, "Print the daemon's /v1/health as JSON");
  cmd->callback([ctx, json] {
    DaemonClient client(ctx->dir(), 3000);
    auto health = client.Get("/v1/health");
    if (!health.ok()) {
      std::fprintf(stderr, "gpuherd: %s\n", PrintableLines(health.status().message()).c_str());
      ctx->exit_code = 3;
      return;
    }
    const DaemonLocation& where = ctx->location();
    if (*json) {
      (*health)["socket"] = where.dir.socket_path();
      (*health)["home"] = where.dir.root;
      (*health)["found_by"] = where.found_by;
      std::printf("%s\n", health->dump(2).c_str());
      return;
    }
    std::printf("daemon %s: %d GPUs (%d lost)%s, sampling every %s, state in %s\n",
                Printable(health->value("status", std::string("?"))).c_str(), health->value("gpus", 0),
                health->value("gpus_lost", 0),
                health->value("simulated", false)
                    ? (", SIMULATED: " + Printable(health->value("sim_reason", std::string()))).c_str()
                    : "",
                FormatDuration(health->value("sample_interval_ms", int64_t{0})).c_str(), Printable(where.dir.root).c_str());
    std::printf("talking to %s on %s\n", Printable(where.Describe()).c_str(), Printable(where.dir.socket_path()).c_str());
  });
}

}  // namespace gpuherd::cli
