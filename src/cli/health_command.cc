// gpuherd health [GPU]: the burn-in verdicts. Without a GPU, one line per GPU
// with its latest finished run; with one, its history and the latest run's
// checks and score factors. From the daemon when it runs, else from the state
// database opened read-only.
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "burnin/report.h"
#include "cli/burnin_format.h"
#include "cli/burnin_history.h"
#include "cli/command.h"
#include "cli/table.h"

namespace gpuherd::cli {
namespace {

struct HealthFlags {
  std::string gpu;
  int limit = 20;
  bool json = false;
  std::string report;
};

nlohmann::json RunsJson(const std::vector<burnin::BurnInRun>& runs) {
  nlohmann::json out = nlohmann::json::array();
  for (const burnin::BurnInRun& run : runs) {
    nlohmann::json j = burnin::ToJson(run);
    j["id"] = run.id;
    out.push_back(std::move(j));
  }
  return out;
}

Status Show(const CommandContext& ctx, const HealthFlags& flags) {
  auto opened = BurnInHistory::ForReading(ctx.dir(), 10000);
  if (!opened.ok()) {
    return Unavailable("no daemon answers on " + ctx.dir().socket_path() + " and no burn-in history can be read (" +
                       opened.status().message() + "); run `gpuherd burnin` first");
  }
  std::unique_ptr<BurnInHistory> history = std::move(opened).value();

  std::vector<burnin::BurnInRun> shown;
  if (flags.gpu.empty()) {
    auto latest = history->LatestPerGpu();
    if (!latest.ok()) return latest.status();
    auto untested = history->Untested(*latest);
    if (!untested.ok()) return untested.status();
    shown = *latest;
    std::stable_sort(shown.begin(), shown.end(), [](const burnin::BurnInRun& a, const burnin::BurnInRun& b) {
      return a.gpu_index < b.gpu_index;
    });
    if (flags.json) {
      nlohmann::json out = {{"runs", RunsJson(shown)}, {"untested", nlohmann::json::array()}};
      for (const UntestedGpu& g : *untested) {
        out["untested"].push_back({{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}});
      }
      std::printf("%s\n", out.dump(2).c_str());
    } else if (shown.empty() && untested->empty()) {
      std::printf("No burn-in recorded yet; run `gpuherd burnin --level 1`.\n");
    } else {
      std::fputs(RenderFleetHealth(shown, *untested, ctx.color()).c_str(), stdout);
    }
  } else {
    auto runs = history->RunsOfGpu(flags.gpu, flags.limit);
    if (!runs.ok()) return runs.status();
    shown = *runs;
    if (flags.json) {
      std::printf("%s\n", nlohmann::json{{"runs", RunsJson(shown)}}.dump(2).c_str());
    } else if (shown.empty()) {
      std::printf("No burn-in of GPU %s recorded yet.\n", Printable(flags.gpu).c_str());
    } else {
      const burnin::BurnInRun& newest = shown.front();
      std::printf("GPU %d  %s  %s%s\n\n", newest.gpu_index, Printable(newest.gpu_name).c_str(),
                  Printable(newest.gpu_uuid).c_str(),
                  newest.simulated ? "  [simulated]" : "");
      std::fputs(RenderHistoryTable(shown, ctx.color()).c_str(), stdout);
      std::printf("\n");
      std::fputs(RenderRunDetail(newest, ctx.color()).c_str(), stdout);
    }
  }
  if (!flags.report.empty()) {
    GPUHERD_RETURN_IF_ERROR(
        WriteFileAtomically(flags.report, burnin::RenderHtmlReport(shown), 0644, /*sync=*/false)
            .Annotate("cannot write the report"));
  }
  return Status::Ok();
}

}  // namespace

void AddHealthCommand(CLI::App& app, CommandContext* ctx) {
  auto flags = std::make_shared<HealthFlags>();
  CLI::App* cmd = app.add_subcommand("health", "Show the burn-in verdicts, or one GPU's burn-in history");
  cmd->add_option("gpu", flags->gpu, "A GPU (index or UUID): its history and latest checks");
  cmd->add_option("--limit", flags->limit, "At most this many runs of the GPU (the newest)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->add_option("--report", flags->report, "Also write the shown runs as an HTML report to this file");
  cmd->callback([ctx, flags] {
    Status s = Show(*ctx, *flags);
    if (!s.ok()) ctx->Fail(s);
  });
}

}  // namespace gpuherd::cli
