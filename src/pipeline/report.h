// The results report of a pipeline run: a comparison of its sweep points,
// learning curves, step timings with GPU-hours, and failures, as HTML,
// Markdown or CSV. Pure: it renders the API's typed views of a run (what
// GET /v1/pipelines/{id}, its /metrics and the nodes' jobs answer) and reads
// nothing else; the daemon passes them as its services return them, the CLI
// as it decodes them from the daemon's replies.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/jobs.h"
#include "api/pipelines.h"
#include "core/time.h"
#include "pipeline/early_stop.h"

namespace gpuherd::pipeline {

struct ReportData {
  api::PipelineDetail pipeline;                  // GET /v1/pipelines/{id}
  std::vector<api::PipelineMetricLine> metrics;  // GET /v1/pipelines/{id}/metrics
  // The nodes' jobs by id, those the caller could read: a job's
  // gpu_twentieths is the share of a GPU its node held (0.25 for a quarter).
  std::map<int64_t, api::JobView> jobs;
  TimeMs now = 0;  // the end of the elapsed time of nodes still running
};

struct MetricSummary {
  double final_value = 0;  // from the last line logged, in time order
  double best_value = 0;   // lowest for loss-like names (see LowerIsBetter), else highest
  double best_at = 0;      // the training step of the best value
  int count = 0;           // finite values seen
};

struct CurvePoint {
  double step = 0;
  double value = 0;
};

struct NodeReport {
  std::string id;    // "train[lr=0.1,seed=1]"
  std::string key;   // "train/3"
  std::string step;  // the pipeline step's name
  std::vector<std::pair<std::string, std::string>> matrix;
  std::string state;
  int attempts = 0;
  std::string reason;
  double gpus = 0;              // GPUs held: its job's gpu_twentieths / 20, else the number assigned
  double elapsed_seconds = 0;   // started → ended (or the report's `now` while running)
  double gpu_hours = 0;         // the GPU time the daemon kept, else gpus × elapsed
  std::map<std::string, MetricSummary> metrics;
  // Metric name → its values by training step; a step logged again after a
  // resume keeps the later value, so a restarted point draws one curve.
  std::map<std::string, std::vector<CurvePoint>> curves;
  int64_t job_id = 0;        // the queue's job of the last attempt; 0 when none
  // The step's objective, where it declares one: the best value by its mode,
  // the training step of that value, and the point's rank in its step (1 =
  // best; 0 = no value yet).
  std::optional<double> objective_value;
  double objective_at = 0;
  int rank = 0;
  std::vector<std::string> attempt_history;  // why each earlier attempt ended, oldest first
};

struct StepTiming {
  std::string step;
  int nodes = 0;
  double elapsed_seconds = 0;  // summed over the step's nodes
  double longest_seconds = 0;
  double gpu_hours = 0;
};

struct Report {
  int64_t id = 0;
  std::string name, state, outcome, run_dir;
  TimeMs created = 0, finished = 0;
  std::map<std::string, std::string> params;
  std::vector<NodeReport> nodes;          // in the pipeline's node order
  std::vector<std::string> matrix_names;  // every point's parameter names, first seen first
  std::vector<std::string> metric_names;  // sorted
  std::vector<StepTiming> steps;          // in order of first node
  double gpu_hours = 0;
  int failed_attempts = 0;                // attempts beyond the first, over all nodes
  // Step name → its objective (the pipeline's "objectives" object), and the
  // position in `nodes` of each such step's best point.
  std::map<std::string, Objective> objectives;
  std::map<std::string, size_t> best;
  // Step name → e.g. "objective 'accuracy' not logged; seen: acc, loss".
  std::map<std::string, std::string> objective_warnings;
  int stopped = 0;                        // points stopped early
};

// True for metrics where lower is better: names containing "loss", "err",
// "perplexity" or "ppl", or ending in "mse", "mae" or "rmse".
bool LowerIsBetter(std::string_view metric);

// Gathers the numbers every format shows. The pipeline's "objectives"
// ({step: {"metric", "mode": "min"|"max"}}) rank each such step's points by
// the best value of the metric each reached (lowest for min); points without
// a value rank last. Metric lines are matched to nodes
// by the node's id or key; their training step is the line's step when it
// has one, else values.step, else the line's position. The fields step,
// epoch, time and timestamp are axes, not metrics; non-numeric and
// non-finite values are left out. A node's matrix is in name order.
Report Summarize(const ReportData& data);

// One sentence per step with an objective: "Best of step train by acc
// (max): train[lr=0.1] with acc = 0.97 at step 300 (lr=0.1)."
std::vector<std::string> BestPointLines(const Report& report);

// The charting library inlined into the HTML; empty parts mean "no charts".
struct ChartLibrary {
  std::string_view js;
  std::string_view css;
  bool available() const { return !js.empty(); }
};

// uPlot, when the build found npm and compiled it in; otherwise empty.
ChartLibrary EmbeddedChartLibrary();

// A self-contained page: everything, scripts included, is inline. The
// comparison table sorts by a click on any header. The curves' data is in a
// <script type="application/json" id="gpuherd-report-data"> element:
// {"metrics": [names], "points": [{"node", "key", "curves": {metric: [[steps], [values]]}}]}.
// Without a chart library the page has tables only and says why.
std::string RenderHtml(const Report& report, const ChartLibrary& charts);
std::string RenderMarkdown(const Report& report);
// One row per node: node, key, step, state, attempts, the matrix parameters,
// elapsed_s, gpus, gpu_hours, then <metric>_final and <metric>_best.
std::string RenderCsv(const Report& report);

// Two runs side by side (`gpuherd report A B`): each one's objective, best
// point and GPU-hours, then the points they share (same parameters) with
// both objective values.
std::string RenderComparisonHtml(const Report& a, const Report& b);
std::string RenderComparisonMarkdown(const Report& a, const Report& b);

}  // namespace gpuherd::pipeline
