// gpuherd gpus: the fleet table (or its JSON, or CSV for scripts).
#include <cstdio>

#include "cli/command.h"
#include "cli/fleet_source.h"
#include "cli/fleet_table.h"
#include "cli/table.h"

namespace gpuherd::cli {

void AddGpusCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    DriverFlags driver;
    bool json = false;
    std::string format = "table";
    std::string gpus;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("gpus", "List the GPUs with their latest readings, health and jobs");
  flags->driver.AddTo(cmd);
  cmd->add_flag("--json", flags->json, "Print JSON (the API's /v1/gpus)");
  cmd->add_option("--format", flags->format, "table, csv or json")->check(CLI::IsMember({"table", "csv", "json"}));
  cmd->add_option("-i,--gpu", flags->gpus, "Only these GPUs: indexes or UUIDs, comma-separated (0,2)");
  cmd->callback([ctx, flags] {
    auto reading = ReadFleetOnce(ctx, flags->driver);
    if (!reading) return;
    api::Fleet* fleet = &reading->fleet;
    if (!flags->gpus.empty()) {
      if (Status s = SelectGpus(flags->gpus, fleet); !s.ok()) {
        ctx->Fail(s);
        ctx->exit_code = 2;  // a usage error
        return;
      }
    }
    if (flags->json || flags->format == "json") {
      std::printf("%s\n", nlohmann::json(*fleet).dump(2).c_str());
      return;
    }
    if (flags->format == "csv") {
      std::fputs(RenderFleetCsv(*fleet).c_str(), stdout);
      return;
    }
    if (!reading->source->direct_reason().empty() && !flags->driver.asked_for_sim()) {
      std::fprintf(stderr, "note: %s\n", Printable(reading->source->direct_reason()).c_str());
    }
    std::fputs(RenderFleetTable(*fleet, ctx->color()).c_str(), stdout);
  });
}

}  // namespace gpuherd::cli
