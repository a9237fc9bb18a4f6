// gpuherd report ID [--format html|md|csv] [-o FILE]: the results of a
// pipeline run. HTML goes to <run folder>/report.html; md and csv to stdout.
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "pipeline/report.h"

namespace gpuherd::cli {
namespace {

// GPU-hours count a node's share of a GPU (0.1 for a tenth), which the
// node's job knows; a job that cannot be read counts its assigned GPUs.
void AddGpuShares(DaemonClient& client, nlohmann::json* pipeline) {
  if (!pipeline->contains("nodes") || !(*pipeline)["nodes"].is_array()) return;
  for (nlohmann::json& node : (*pipeline)["nodes"]) {
    int64_t job_id = node.value("job_id", int64_t{0});
    if (job_id <= 0 || node.contains("gpu_tenths")) continue;
    if (auto job = client.Get("/v1/jobs/" + std::to_string(job_id)); job.ok() && job->contains("gpu_tenths")) {
      node["gpu_tenths"] = (*job)["gpu_tenths"];
    }
  }
}

}  // namespace

void AddReportCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    int64_t id = 0;
    std::string format = "html";
    std::string output;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("report", "Write a pipeline run's report: sweep table, curves, GPU-hours");
  cmd->add_option("id", f->id, "Pipeline id")->required()->check(CLI::PositiveNumber);
  cmd->add_option("--format", f->format, "html (a self-contained page), md or csv")
      ->check(CLI::IsMember({"html", "md", "csv"}));
  cmd->add_option("-o,--output", f->output, "Write here (default: html to <run folder>/report.html, others to stdout)");
  cmd->callback([ctx, f] {
    DaemonClient client(ctx->dir());
    const std::string target = "/v1/pipelines/" + std::to_string(f->id);
    auto pipeline = client.Get(target);
    if (!pipeline.ok()) return ctx->Fail(pipeline.status());
    auto metrics = client.Get(target + "/metrics");
    if (!metrics.ok()) return ctx->Fail(metrics.status());
    pipeline::ReportData data;
    data.pipeline = *pipeline;
    AddGpuShares(client, &data.pipeline);
    data.metrics = metrics->value("metrics", nlohmann::json::array());
    data.now = pipeline->value(
        "now", std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count());
    auto report = pipeline::Summarize(data);
    if (!report.ok()) return ctx->Fail(report.status());
    std::string text;
    if (f->format == "html") text = pipeline::RenderHtml(*report, pipeline::EmbeddedChartLibrary());
    else if (f->format == "md") text = pipeline::RenderMarkdown(*report);
    else text = pipeline::RenderCsv(*report);

    std::string path = f->output;
    if (path.empty() && f->format == "html") {
      if (report->run_dir.empty()) {
        return ctx->Fail(FailedPrecondition("the daemon reported no run folder for pipeline " + std::to_string(f->id) +
                                            "; choose where the report goes with -o FILE"));
      }
      path = report->run_dir + "/report.html";
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
