// gpuherd topo: how the GPUs reach each other, as `nvidia-smi topo -m` shows it.
#include <cstdio>

#include "cli/command.h"
#include "cli/fleet_source.h"
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
    auto reading = ReadFleetOnce(ctx, flags->driver);
    if (!reading) return;
    if (flags->json) {
      std::printf("%s\n", TopoJson(reading->fleet).dump(2).c_str());
      return;
    }
    std::fputs(RenderTopoMatrix(reading->fleet, ctx->color()).c_str(), stdout);
  });
}

}  // namespace gpuherd::cli
