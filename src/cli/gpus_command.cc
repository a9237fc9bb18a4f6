// gpuherd gpus: the fleet table (or its JSON).
#include <cstdio>

#include "cli/command.h"
#include "cli/fleet_source.h"
#include "cli/no_driver.h"
#include "cli/fleet_table.h"

namespace gpuherd::cli {

void AddGpusCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    DriverFlags driver;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("gpus", "List the GPUs with their latest readings");
  flags->driver.AddTo(cmd);
  cmd->add_flag("--json", flags->json, "Print JSON (the API's /v1/gpus)");
  cmd->callback([ctx, flags] {
    auto clock = host::NewRealClock();
    auto source = FleetSource::Open(*ctx, flags->driver, clock.get());
    if (!source.ok()) return FailMaybeNoDriver(ctx, source.status());
    auto fleet = (*source)->Fleet();
    if (!fleet.ok()) return ctx->Fail(fleet.status());
    if (flags->json) {
      std::printf("%s\n", nlohmann::json(*fleet).dump(2).c_str());
      return;
    }
    if (!(*source)->direct_reason().empty() && !flags->driver.asked_for_sim()) {
      std::fprintf(stderr, "note: %s\n", (*source)->direct_reason().c_str());
    }
    std::fputs(RenderFleetTable(*fleet, ctx->color()).c_str(), stdout);
  });
}

}  // namespace gpuherd::cli
