// gpuherd report ID [ID2] [--format html|md|csv] [-o FILE]: the results of a
// pipeline run. HTML goes to <run folder>/report.html; md and csv to stdout.
// With two ids, the runs side by side (html to <first run folder>/compare-A-B.html).
#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "api/decode.h"
#include "api/jobs.h"
#include "api/pipelines.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"
#include "pipeline/report.h"

namespace gpuherd::cli {
namespace {

// The report of one run, as the daemon has it now: the run, its metric
// lines, and its nodes' jobs (GPU-hours count a node's share of a GPU, 0.25
// for a quarter, which the job knows; a job that cannot be read counts its
// assigned GPUs).
Result<pipeline::Report> Fetch(DaemonClient& client, int64_t id) {
  const std::string target = "/v1/pipelines/" + std::to_string(id);
  const std::string what = "pipeline " + std::to_string(id);
  auto reply = client.Get(target);
  if (!reply.ok()) return reply.status();
  auto run = api::Decode<api::PipelineDetail>(*reply, what);
  if (!run.ok()) return run.status();
  auto metrics = client.Get(target + "/metrics");
  if (!metrics.ok()) return metrics.status();
  auto lines = api::Decode<std::vector<api::PipelineMetricLine>>(
      metrics->is_object() ? metrics->value("metrics", nlohmann::json::array()) : nlohmann::json(),
      "the metric lines of " + what);
  if (!lines.ok()) return lines.status();
  pipeline::ReportData data;
  data.pipeline = std::move(run).value();
  data.metrics = std::move(lines).value();
  for (const api::PipelineNodeView& node : data.pipeline.nodes) {
    if (node.job_id <= 0 || data.jobs.count(node.job_id)) continue;
    auto job = client.Get("/v1/jobs/" + std::to_string(node.job_id));
    if (!job.ok()) continue;
    if (auto view = api::Decode<api::JobView>(*job, "job " + std::to_string(node.job_id)); view.ok()) {
      data.jobs[node.job_id] = std::move(view).value();
    }
  }
  data.now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
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
    std::printf("%s\n", Printable(path).c_str());  // the run folder is the submitter's choice
  });
}

}  // namespace gpuherd::cli
