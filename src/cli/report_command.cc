// gpuherd report ID [ID2] [--format html|md|csv] [-o FILE]: the results of a
// pipeline run. HTML goes to <run folder>/report.html; md and csv to stdout.
// With two ids, the runs side by side (html to <first run folder>/compare-A-B.html).
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "pipeline/report.h"

namespace gpuherd::cli {
namespace {

// GPU-hours count a node's share of a GPU (0.25 for a quarter), which the
// node's job knows; a job that cannot be read counts its assigned GPUs.
void AddGpuShares(DaemonClient& client, nlohmann::json* pipeline) {
  if (!pipeline->contains("nodes") || !(*pipeline)["nodes"].is_array()) return;
  for (nlohmann::json& node : (*pipeline)["nodes"]) {
    int64_t job_id = node.value("job_id", int64_t{0});
    if (job_id <= 0 || node.contains("gpu_twentieths")) continue;
    if (auto job = client.Get("/v1/jobs/" + std::to_string(job_id)); job.ok() && job->contains("gpu_twentieths")) {
      node["gpu_twentieths"] = (*job)["gpu_twentieths"];
    }
  }
}

// The report of one run, as the daemon has it now.
Result<pipeline::Report> Fetch(DaemonClient& client, int64_t id) {
  const std::string target = "/v1/pipelines/" + std::to_string(id);
  auto pipeline = client.Get(target);
  if (!pipeline.ok()) return pipeline.status();
  auto metrics = client.Get(target + "/metrics");
  if (!metrics.ok()) return metrics.status();
  pipeline::ReportData data;
  data.pipeline = *pipeline;
  AddGpuShares(client, &data.pipeline);
  data.metrics = metrics->value("metrics", nlohmann::json::array());
  data.now = pipeline->value(
      "now", std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count());
  return pipeline::Summarize(data);
}

}  // namespace

void AddReportCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::vector<int64_t> ids;
    std::string format = "html";
    std::string output;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Write a pipeline run's report (the best point, ranked points, plots, GPU-hours), or compare two runs");
  cmd->add_option("ids", f->ids, "Pipeline id; a second id compares the two runs side by side")
      ->required()
      ->expected(1, 2)
      ->check(PositiveWhole());
  cmd->add_option("--format", f->format, "html (a self-contained page), md or csv (one run only)")
      ->check(CLI::IsMember({"html", "md", "csv"}));
  cmd->add_option("-o,--output", f->output, "Write here (default: html to <run folder>/report.html, others to stdout)");
  cmd->callback([ctx, f] {
    if (f->ids.size() == 2 && f->format == "csv") {
      throw CLI::ValidationError("--format", "csv is for one run; compare two runs with --format html or md");
    }
    DaemonClient client(ctx->dir());
    auto report = Fetch(client, f->ids[0]);
    if (!report.ok()) return ctx->Fail(report.status());
    std::optional<pipeline::Report> other;
    if (f->ids.size() == 2) {
      auto second = Fetch(client, f->ids[1]);
      if (!second.ok()) return ctx->Fail(second.status());
      other = std::move(second).value();
    }
    std::string text;
    if (other) {
      text = f->format == "html" ? pipeline::RenderComparisonHtml(*report, *other)
                                 : pipeline::RenderComparisonMarkdown(*report, *other);
    } else if (f->format == "html") {
      text = pipeline::RenderHtml(*report, pipeline::EmbeddedChartLibrary());
    } else if (f->format == "md") {
      text = pipeline::RenderMarkdown(*report);
    } else {
      text = pipeline::RenderCsv(*report);
    }

    std::string path = f->output;
    if (path.empty() && f->format == "html") {
      if (report->run_dir.empty()) {
        return ctx->Fail(FailedPrecondition("the daemon reported no run folder for pipeline " +
                                            std::to_string(f->ids[0]) + "; choose where the report goes with -o FILE"));
      }
      path = report->run_dir + (other ? "/compare-" + std::to_string(f->ids[0]) + "-" + std::to_string(f->ids[1]) + ".html"
                                      : std::string("/report.html"));
    }
    if (path.empty() || path == "-") {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return;
    }
    if (Status s = WriteFileAtomically(path, text, 0644, /*sync=*/false); !s.ok()) return ctx->Fail(s);
    std::printf("%s\n", path.c_str());
  });
}

}  // namespace gpuherd::cli
