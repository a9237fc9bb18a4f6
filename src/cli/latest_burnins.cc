#include "cli/latest_burnins.h"

#include "cli/burnin_history.h"

namespace gpuherd::cli {

LatestBurnIns ReadLatestBurnIns(const CommandContext& ctx) {
  LatestBurnIns result;
  auto opened = BurnInHistory::ForReading(ctx.dir(), 10000);
  if (!opened.ok()) {
    result.unavailable = "no burn-in history (" + opened.status().message() + ")";
    return result;
  }
  std::unique_ptr<BurnInHistory> history = std::move(opened).value();
  auto latest = history->LatestPerGpu();
  if (!latest.ok()) {
    result.unavailable = "cannot read the burn-in history from " + history->where() + ": " + latest.status().message();
    return result;
  }
  for (const burnin::BurnInRun& run : *latest) {
    result.verdicts[run.gpu_uuid] = burnin::VerdictName(run.health.verdict);
    for (const burnin::Check& check : run.checks) {
      // "gen" is only recorded when the link was read under load (level 2 and 3).
      auto gen = check.values.find("gen");
      auto width = check.values.find("width");
      if (check.name == "pcie_link" && gen != check.values.end() && width != check.values.end()) {
        result.pcie_under_load[run.gpu_uuid] = {static_cast<int>(gen->second), static_cast<int>(width->second)};
      }
    }
  }
  return result;
}

}  // namespace gpuherd::cli
