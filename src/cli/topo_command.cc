// gpuherd topo: how the GPUs reach each other, as `nvidia-smi topo -m` shows it.
#include <cstdio>

#include "cli/command.h"
#include "cli/fleet_source.h"
#include "cli/no_driver.h"
#include "cli/topo_matrix.h"

namespace gpuherd::cli {

void AddTopoCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    DriverFlags driver;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("topo", "The GPU topology matrix (NVLink, PCIe, NUMA) and CPU affinity");
  flags->driver.AddTo(cmd);
  cmd->add_flag("--json", flags->json, "Print JSON: codes, link names and affinities");
  cmd->callback([ctx, flags] {
    auto clock = host::NewRealClock();
    auto source = FleetSource::Open(*ctx, flags->driver, clock.get());
    if (!source.ok()) return FailMaybeNoDriver(ctx, source.status());
    auto fleet = (*source)->Fleet();
    if (!fleet.ok()) return ctx->Fail(fleet.status());
    if (flags->json) {
      std::printf("%s\n", TopoJson(*fleet).dump(2).c_str());
      return;
    }
    std::fputs(RenderTopoMatrix(*fleet, ctx->color()).c_str(), stdout);
  });
}

}  // namespace gpuherd::cli
