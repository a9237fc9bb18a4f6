#include "pipeline/report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "api/decode.h"
#include "core/html.h"
#include "core/printable.h"

// Generated at build time from npm's uplot package (src/pipeline/CMakeLists.txt).
#ifdef GPUHERD_HAVE_UPLOT
extern "C" const unsigned char gpuherd_uplot_js[];
extern "C" const unsigned long gpuherd_uplot_js_size;
extern "C" const unsigned char gpuherd_uplot_css[];
extern "C" const unsigned long gpuherd_uplot_css_size;
#endif

namespace gpuherd::pipeline {
namespace {

using nlohmann::json;

// Why each earlier attempt ended, from the history the daemon stores as it
// is: "failed (job 12): exited with code 1; stderr: ...last line".
std::vector<std::string> AttemptHistory(const json& history) {
  std::vector<std::string> out;
  if (!history.is_array()) return out;
  for (const json& a : history) {
    if (!a.is_object()) {
      out.push_back(a.is_string() ? a.get<std::string>() : a.dump());
      continue;
    }
    const std::string state = api::FieldText(a, "state"), reason = api::FieldText(a, "reason");
    std::string text = state.empty() ? reason
                                     : state + (a.contains("job") ? " (job " + api::FieldText(a, "job") + ")" : "") +
                                           ": " + reason;
    if (auto tail = a.find("stderr_tail"); tail != a.end() && tail->is_array() && !tail->empty() &&
                                            tail->back().is_string()) {
      text += "; stderr: " + tail->back().get<std::string>();
    }
    out.push_back(text);
  }
  return out;
}

bool IsAxis(const std::string& name) {
  return name == "step" || name == "epoch" || name == "time" || name == "timestamp";
}

// Values print with 6 significant digits, enough to compare sweep points.
std::string Number(double value) { return fmt::format("{:.6g}", value); }

std::string Hours(double value) { return fmt::format("{:.4g}", value); }

std::string Seconds(double seconds) {
  if (seconds <= 0) return "-";
  return FormatDuration(static_cast<DurationMs>(std::llround(seconds * 1000)));
}

std::string MatrixValue(const NodeReport& node, const std::string& name) {
  for (const auto& [k, v] : node.matrix) {
    if (k == name) return v;
  }
  return "";
}

// One metric line, normalised.
struct Line {
  size_t order = 0;
  int attempt = 0;
  TimeMs time = 0;
  double step = 0;
  const json* values = nullptr;
};

void AddLines(const std::vector<Line>& unsorted, NodeReport* node) {
  std::vector<Line> lines = unsorted;
  // Time order; a resumed attempt's lines come after the failed one's.
  std::stable_sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    if (a.attempt != b.attempt) return a.attempt < b.attempt;
    if (a.time != b.time) return a.time < b.time;
    return a.order < b.order;
  });
  std::map<std::string, std::map<double, double>> by_step;
  for (const Line& line : lines) {
    for (const auto& [name, value] : line.values->items()) {
      if (IsAxis(name) || !value.is_number()) continue;
      double v = value.get<double>();
      if (!std::isfinite(v)) continue;
      MetricSummary& m = node->metrics[name];
      bool better = m.count == 0 || (LowerIsBetter(name) ? v < m.best_value : v > m.best_value);
      if (better) {
        m.best_value = v;
        m.best_at = line.step;
      }
      m.final_value = v;
      ++m.count;
      by_step[name][line.step] = v;
    }
  }
  for (const auto& [name, points] : by_step) {
    auto& curve = node->curves[name];
    for (const auto& [step, value] : points) curve.push_back({step, value});
  }
}

// The objective's best value per point, then each step's ranking by it.
void RankPoints(Report* report) {
  for (auto& [step, objective] : report->objectives) {
    std::vector<size_t> in_step;
    std::vector<std::optional<double>> values;
    for (size_t i = 0; i < report->nodes.size(); ++i) {
      NodeReport& node = report->nodes[i];
      if (node.step != step) continue;
      if (auto curve = node.curves.find(objective.metric); curve != node.curves.end()) {
        std::vector<Observation> values;
        for (const CurvePoint& c : curve->second) values.push_back({static_cast<int64_t>(c.step), c.value, 0});
        if (auto v = SummaryValue(values, objective)) {
          node.objective_value = v->value;
          node.objective_at = static_cast<double>(v->step);
        }
      }
      in_step.push_back(i);
      values.push_back(node.objective_value);
    }
    const std::vector<int> ranks = RankValues(values, objective.mode);
    for (size_t k = 0; k < in_step.size(); ++k) {
      report->nodes[in_step[k]].rank = ranks[k];
      if (ranks[k] == 1 && !report->best.count(step)) report->best[step] = in_step[k];
    }
  }
}

}  // namespace

bool LowerIsBetter(std::string_view metric) {
  std::string name(metric);
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"loss", "err", "perplexity", "ppl"}) {
    if (name.find(word) != std::string::npos) return true;
  }
  for (const char* suffix : {"mse", "mae", "rmse"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

Report Summarize(const ReportData& data) {
  const api::PipelineDetail& p = data.pipeline;
  Report report;
  report.id = p.summary.id;
  report.name = p.summary.name;
  report.state = p.summary.state;
  report.outcome = p.summary.outcome;
  report.run_dir = p.run_dir;
  report.created = p.summary.created;
  report.finished = p.summary.finished;
  report.params = p.params;

  std::map<std::string, size_t> index;  // node id or key → position
  std::set<std::string> seen_matrix;
  for (const api::PipelineNodeView& n : p.nodes) {
    NodeReport node;
    node.id = n.id;
    node.key = n.key;
    node.step = n.step;
    node.state = n.state;
    node.attempts = n.attempts;
    node.reason = n.reason;
    node.job_id = n.job_id;
    node.attempt_history = AttemptHistory(n.attempt_history);
    if (node.state == "stopped") ++report.stopped;
    // By name, as the API's JSON orders them: a report reads the same
    // whether the daemon or the CLI made it.
    node.matrix = n.matrix;
    std::sort(node.matrix.begin(), node.matrix.end());
    for (const auto& [k, v] : node.matrix) {
      if (seen_matrix.insert(k).second) report.matrix_names.push_back(k);
    }
    if (auto job = data.jobs.find(n.job_id); n.job_id > 0 && job != data.jobs.end()) {
      node.gpus = static_cast<double>(job->second.gpu_twentieths) / 20.0;
    } else {
      node.gpus = static_cast<double>(n.gpus.size());
    }
    if (n.started > 0) {
      TimeMs end = n.ended > 0 ? n.ended : data.now;
      node.elapsed_seconds = end > n.started ? static_cast<double>(end - n.started) / 1000.0 : 0.0;
    }
    // Every attempt's GPU time where the daemon kept it; else the last one's.
    node.gpu_hours = n.gpu_seconds > 0 ? n.gpu_seconds / 3600.0 : node.gpus * node.elapsed_seconds / 3600.0;
    report.gpu_hours += node.gpu_hours;
    report.failed_attempts += std::max(0, node.attempts - 1);
    const size_t position = report.nodes.size();
    if (!node.id.empty()) index[node.id] = position;
    if (!node.key.empty()) index.emplace(node.key, position);
    report.nodes.push_back(std::move(node));
  }

  std::vector<std::vector<Line>> lines(report.nodes.size());
  size_t order = 0;
  for (const api::PipelineMetricLine& m : data.metrics) {
    ++order;
    auto it = index.find(m.node);
    if (it == index.end() || !m.values.is_object()) continue;
    Line line;
    line.order = order;
    line.attempt = m.attempt;
    line.time = m.time;
    if (m.step) {
      line.step = static_cast<double>(*m.step);
    } else if (auto step = m.values.find("step"); step != m.values.end() && step->is_number()) {
      line.step = step->get<double>();
    } else {
      line.step = static_cast<double>(lines[it->second].size());
    }
    line.values = &m.values;
    lines[it->second].push_back(line);
  }
  std::set<std::string> metric_names;
  for (size_t i = 0; i < report.nodes.size(); ++i) {
    AddLines(lines[i], &report.nodes[i]);
    for (const auto& [name, summary] : report.nodes[i].metrics) metric_names.insert(name);
  }
  report.metric_names.assign(metric_names.begin(), metric_names.end());

  for (const auto& [step, o] : p.objectives) {
    if (o.metric.empty()) continue;  // a view decoded from a reply without one
    report.objectives[step] = Objective{o.metric, o.mode == "max" ? ObjectiveMode::kMax : ObjectiveMode::kMin,
                                        o.summary == "best" ? ObjectiveSummary::kBest : ObjectiveSummary::kLast};
    if (!o.warning.empty()) report.objective_warnings[step] = o.warning;
  }
  RankPoints(&report);

  for (const NodeReport& node : report.nodes) {
    auto it = std::find_if(report.steps.begin(), report.steps.end(),
                           [&](const StepTiming& s) { return s.step == node.step; });
    if (it == report.steps.end()) it = report.steps.insert(report.steps.end(), StepTiming{node.step});
    ++it->nodes;
    it->elapsed_seconds += node.elapsed_seconds;
    it->longest_seconds = std::max(it->longest_seconds, node.elapsed_seconds);
    it->gpu_hours += node.gpu_hours;
  }
  return report;
}

namespace {

// The rows every format shares, as text cells.
struct Tables {
  std::vector<std::string> comparison_header;
  std::vector<std::vector<std::string>> comparison;
  std::vector<size_t> comparison_nodes;  // the node of each comparison row
  std::vector<std::string> omitted_metrics;  // metrics left to the CSV
  std::vector<std::string> timing_header{"step", "nodes", "elapsed (sum)", "longest", "GPU-hours"};
  std::vector<std::vector<std::string>> timing;
  std::vector<std::string> failure_header{"node", "state", "attempts", "why"};
  std::vector<std::vector<std::string>> failures;
};

// Besides the objectives, the comparison shows this many metrics (those most
// points logged); the CSV has every one. More columns would not fit a page.
constexpr size_t kMaxMetricColumns = 4;

std::string ModeName(ObjectiveMode mode) { return mode == ObjectiveMode::kMin ? "min" : "max"; }

// The objective metrics, each once, in step order.
std::vector<std::string> ObjectiveMetrics(const Report& r) {
  std::vector<std::string> names;
  for (const auto& [step, o] : r.objectives) {
    if (std::find(names.begin(), names.end(), o.metric) == names.end()) names.push_back(o.metric);
  }
  return names;
}

// Nodes in step order; within a step, ranked points first by rank.
std::vector<size_t> DisplayOrder(const Report& r) {
  std::vector<size_t> order;
  for (const StepTiming& step : r.steps) {
    std::vector<size_t> in_step;
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      if (r.nodes[i].step == step.step) in_step.push_back(i);
    }
    std::stable_sort(in_step.begin(), in_step.end(), [&](size_t a, size_t b) {
      int ra = r.nodes[a].rank, rb = r.nodes[b].rank;
      if ((ra > 0) != (rb > 0)) return ra > 0;
      return ra < rb;
    });
    order.insert(order.end(), in_step.begin(), in_step.end());
  }
  return order;
}

std::string WhyEnded(const NodeReport& n) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < n.attempt_history.size(); ++i) {
    parts.push_back(fmt::format("attempt {}: {}", i + 1, n.attempt_history[i]));
  }
  if (!n.reason.empty()) parts.push_back(n.reason);
  return fmt::format("{}", fmt::join(parts, "; "));
}

Tables MakeTables(const Report& r) {
  Tables t;
  const std::vector<std::string> objective_metrics = ObjectiveMetrics(r);
  std::map<std::string, int> logged_by;
  for (const NodeReport& n : r.nodes) {
    for (const auto& [name, m] : n.metrics) ++logged_by[name];
  }
  std::vector<std::string> others;
  for (const auto& name : r.metric_names) {
    if (std::find(objective_metrics.begin(), objective_metrics.end(), name) == objective_metrics.end()) {
      others.push_back(name);
    }
  }
  std::stable_sort(others.begin(), others.end(),
                   [&](const std::string& a, const std::string& b) { return logged_by[a] > logged_by[b]; });
  if (others.size() > kMaxMetricColumns) {
    t.omitted_metrics.assign(others.begin() + kMaxMetricColumns, others.end());
    others.resize(kMaxMetricColumns);
    std::sort(t.omitted_metrics.begin(), t.omitted_metrics.end());
  }
  bool retried = false;
  for (const NodeReport& n : r.nodes) retried = retried || n.attempts > 1;

  if (!r.objectives.empty()) t.comparison_header.push_back("rank");
  t.comparison_header.insert(t.comparison_header.end(), {"point", "state"});
  for (const auto& name : r.matrix_names) t.comparison_header.push_back(name);
  for (const auto& name : objective_metrics) {
    ObjectiveMode mode = ObjectiveMode::kMin;
    ObjectiveSummary summary = ObjectiveSummary::kLast;
    for (const auto& [step, o] : r.objectives) {
      if (o.metric == name) mode = o.mode, summary = o.summary;
    }
    t.comparison_header.push_back(
        fmt::format("{} {} ({})", name, summary == ObjectiveSummary::kBest ? "best" : "last", ModeName(mode)));
    t.comparison_header.push_back("at step");
  }
  for (const auto& name : others) t.comparison_header.push_back(name + " last");
  t.comparison_header.push_back("GPU-hours");
  if (retried) t.comparison_header.push_back("attempts");

  for (size_t i : DisplayOrder(r)) {
    const NodeReport& n = r.nodes[i];
    std::vector<std::string> row;
    if (!r.objectives.empty()) row.push_back(n.rank > 0 ? std::to_string(n.rank) : "");
    row.insert(row.end(), {n.id, n.state});
    for (const auto& name : r.matrix_names) row.push_back(MatrixValue(n, name));
    auto objective = r.objectives.find(n.step);
    for (const auto& name : objective_metrics) {
      const bool mine = objective != r.objectives.end() && objective->second.metric == name && n.objective_value;
      row.push_back(mine ? Number(*n.objective_value) : "");
      row.push_back(mine ? Number(n.objective_at) : "");
    }
    for (const auto& name : others) {
      auto it = n.metrics.find(name);
      row.push_back(it == n.metrics.end() ? "" : Number(it->second.final_value));
    }
    row.push_back(Hours(n.gpu_hours));
    if (retried) row.push_back(std::to_string(n.attempts));
    t.comparison.push_back(std::move(row));
    t.comparison_nodes.push_back(i);
    if (n.attempts > 1 || n.state == "failed" || n.state == "cancelled" || n.state == "skipped" ||
        n.state == "stopped") {
      t.failures.push_back({n.id, n.state, std::to_string(n.attempts), WhyEnded(n)});
    }
  }
  for (const StepTiming& s : r.steps) {
    t.timing.push_back({s.step, std::to_string(s.nodes), Seconds(s.elapsed_seconds), Seconds(s.longest_seconds),
                        Hours(s.gpu_hours)});
  }
  return t;
}

std::string Headline(const Report& r) {
  std::string outcome = r.outcome.empty() ? r.state : r.outcome;
  return fmt::format("pipeline {} ({}): {}", r.id, r.name, outcome);
}

std::string Summary(const Report& r) {
  return fmt::format("{} nodes{}, {} GPU-hours in total, {} retried attempts; created {}{}", r.nodes.size(),
                     r.stopped > 0 ? fmt::format(" ({} stopped early)", r.stopped) : "", Hours(r.gpu_hours),
                     r.failed_attempts, r.created > 0 ? FormatTimeUtc(r.created) : "-",
                     r.finished > 0 ? ", finished " + FormatTimeUtc(r.finished) : "");
}

std::string Parameters(const NodeReport& n) {
  std::string out;
  for (const auto& [k, v] : n.matrix) out += (out.empty() ? "" : ", ") + k + "=" + v;
  return out.empty() ? "no parameters" : out;
}

}  // namespace

// One sentence per step with an objective: which point is best, and why.
std::vector<std::string> BestPointLines(const Report& r) {
  std::vector<std::string> lines;
  for (const auto& [step, o] : r.objectives) {
    auto best = r.best.find(step);
    if (auto w = r.objective_warnings.find(step); w != r.objective_warnings.end()) {
      lines.push_back(fmt::format("Step {}: {}.", step, w->second));
      continue;
    }
    if (best == r.best.end()) {
      lines.push_back(fmt::format("Step {}: no point has logged {} yet.", step, o.metric));
      continue;
    }
    const NodeReport& n = r.nodes[best->second];
    lines.push_back(fmt::format("Best of step {} by {} ({}): {} with {} = {} at step {} ({}).", step, o.metric,
                                ModeName(o.mode), n.id, o.metric, Number(*n.objective_value),
                                Number(n.objective_at), Parameters(n)));
  }
  return lines;
}

namespace {

constexpr const char* kNoObjective =
    "No objective declared, so no point is ranked: add objective: {metric: NAME, mode: min|max} "
    "to the swept step.";

void MarkdownTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                   std::string* out) {
  auto line = [&](const std::vector<std::string>& cells) {
    *out += "|";
    for (const auto& c : cells) *out += " " + MarkdownText(c) + " |";
    *out += "\n";
  };
  line(header);
  *out += "|";
  for (size_t i = 0; i < header.size(); ++i) *out += "---|";
  *out += "\n";
  for (const auto& row : rows) line(row);
}

// `links`, when given, adds a last column of raw HTML per row.
void HtmlTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
               const char* css_class, std::string* out, const std::vector<std::string>* links = nullptr,
               const char* links_header = "logs") {
  *out += fmt::format("<table class=\"{}\"><thead><tr>", css_class);
  for (const auto& h : header) *out += "<th>" + HtmlEscape(h) + "</th>";
  if (links) *out += fmt::format("<th>{}</th>", links_header);
  *out += "</tr></thead><tbody>\n";
  for (size_t r = 0; r < rows.size(); ++r) {
    *out += "<tr>";
    for (const auto& c : rows[r]) *out += "<td>" + HtmlEscape(c) + "</td>";
    if (links) *out += "<td>" + (*links)[r] + "</td>";
    *out += "</tr>\n";
  }
  *out += "</tbody></table>\n";
}

// A section: its heading, then the table, or the sentence `none` where there
// are no rows (an empty `none`: the table all the same).
void MarkdownSection(const std::string& heading, const std::vector<std::string>& header,
                     const std::vector<std::vector<std::string>>& rows, const std::string& none, std::string* out) {
  *out += "\n## " + heading + "\n\n";
  if (rows.empty() && !none.empty()) {
    *out += none + "\n";
  } else {
    MarkdownTable(header, rows, out);
  }
}

void HtmlSection(const std::string& heading, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows, const char* css_class, const std::string& none,
                 std::string* out) {
  *out += "<h2>" + HtmlEscape(heading) + "</h2>\n";
  if (rows.empty() && !none.empty()) {
    *out += "<p>" + HtmlEscape(none) + "</p>\n";
  } else {
    HtmlTable(header, rows, css_class, out);
  }
}

constexpr const char* kNoFailures = "None: every node completed on its first attempt.";
constexpr const char* kNoSharedPoints =
    "No point with the same step and parameters has an objective value in both runs.";

// Safe inside <script>: a "</" in a string would end the element early.
std::string ScriptSafe(std::string text) {
  for (size_t at = text.find("</"); at != std::string::npos; at = text.find("</", at + 3)) {
    text.replace(at, 2, "<\\/");
  }
  return text;
}

// JSON inside a <script> element: a "<" can only be in a string there, and
// as \u003c no name (a metric's, a node's) can open "<!--" or "</script".
// ASCII only, and DEL escaped too, so that a page printed with `-o -` holds
// no control character either.
std::string JsonInScript(const json& value) {
  std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true);
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '<') out += "\\u003c";
    else if (c == 0x7f) out += "\\u007f";
    else out += c;
  }
  return out;
}

// Learning curves of the top points are drawn by default.
constexpr int kTopCurves = 5;

json ChartData(const Report& r) {
  json points = json::array();
  for (const NodeReport& n : r.nodes) {
    json curves = json::object();
    for (const auto& [name, curve] : n.curves) {
      json steps = json::array(), values = json::array();
      for (const CurvePoint& c : curve) {
        steps.push_back(c.step);
        values.push_back(c.value);
      }
      curves[name] = json::array({steps, values});
    }
    const bool ranked_step = r.objectives.count(n.step) > 0;
    const bool top = !ranked_step || (n.rank > 0 && n.rank <= kTopCurves);
    if (!curves.empty()) {
      points.push_back({{"node", n.id}, {"key", n.key}, {"rank", n.rank}, {"top", top}, {"curves", curves}});
    }
  }
  return {{"metrics", r.metric_names}, {"points", points}};
}

// A parameter or objective axis of a plot: numbers on a linear or (when
// positive and spanning two decades or more) logarithmic scale; anything
// else as evenly spaced categories in sorted order.
struct PlotAxis {
  std::string name;
  bool numeric = true;
  bool log = false;
  double lo = 0, hi = 0;
  std::vector<std::string> categories;

  double Position(const std::string& value) const {  // 0..1
    if (!numeric) {
      auto it = std::find(categories.begin(), categories.end(), value);
      if (categories.size() < 2) return 0.5;
      return static_cast<double>(it - categories.begin()) / static_cast<double>(categories.size() - 1);
    }
    double v = std::strtod(value.c_str(), nullptr);
    if (hi <= lo) return 0.5;
    return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : (v - lo) / (hi - lo);
  }
  std::string Label(double fraction) const {
    if (!numeric) return "";
    return Number(log ? std::pow(10.0, std::log10(lo) + fraction * (std::log10(hi) - std::log10(lo)))
                      : lo + fraction * (hi - lo));
  }
};

bool ParseNumber(const std::string& text, double* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*value);
}

PlotAxis MakeAxis(const std::string& name, const std::vector<std::string>& values) {
  PlotAxis axis;
  axis.name = name;
  std::vector<double> numbers;
  for (const auto& v : values) {
    double x;
    if (!ParseNumber(v, &x)) {
      axis.numeric = false;
      break;
    }
    numbers.push_back(x);
  }
  if (!axis.numeric || numbers.empty()) {
    axis.numeric = false;
    std::set<std::string> distinct(values.begin(), values.end());
    axis.categories.assign(distinct.begin(), distinct.end());
    return axis;
  }
  auto [lo, hi] = std::minmax_element(numbers.begin(), numbers.end());
  axis.lo = *lo;
  axis.hi = *hi;
  axis.log = axis.lo > 0 && axis.hi / axis.lo >= 100;
  return axis;
}

// Best rank green, worst red.
std::string RankColour(int rank, int ranks) {
  double f = ranks > 1 ? static_cast<double>(rank - 1) / (ranks - 1) : 0.0;
  return fmt::format("hsl({:.0f},70%,40%)", 120.0 * (1.0 - f));
}

// The ranked points of a step with their parameter and objective values.
struct StepPlot {
  std::string step;
  Objective objective;
  std::vector<const NodeReport*> points;  // ranked, best first
  std::vector<PlotAxis> axes;             // the parameters, then the objective
};

std::vector<StepPlot> StepPlots(const Report& r) {
  std::vector<StepPlot> plots;
  for (const auto& [step, objective] : r.objectives) {
    StepPlot plot{step, objective, {}, {}};
    for (const NodeReport& n : r.nodes) {
      if (n.step == step && n.rank > 0) plot.points.push_back(&n);
    }
    std::stable_sort(plot.points.begin(), plot.points.end(),
                     [](const NodeReport* a, const NodeReport* b) { return a->rank < b->rank; });
    if (plot.points.size() < 2) continue;
    for (const auto& name : r.matrix_names) {
      std::vector<std::string> values;
      for (const NodeReport* n : plot.points) values.push_back(MatrixValue(*n, name));
      if (std::all_of(values.begin(), values.end(), [](const std::string& v) { return v.empty(); })) continue;
      plot.axes.push_back(MakeAxis(name, values));
    }
    if (plot.axes.empty()) continue;
    std::vector<std::string> objective_values;
    for (const NodeReport* n : plot.points) objective_values.push_back(fmt::format("{}", *n->objective_value));
    plot.axes.push_back(MakeAxis(objective.metric, objective_values));
    plots.push_back(std::move(plot));
  }
  return plots;
}

std::string AxisValue(const StepPlot& plot, size_t axis, const NodeReport& n) {
  return axis + 1 == plot.axes.size() ? fmt::format("{}", *n.objective_value)
                                      : MatrixValue(n, plot.axes[axis].name);
}

// Parameters to objective, one vertical axis each, a line per point.
std::string ParallelCoordinates(const StepPlot& plot) {
  const double width = 1100, height = 320, top = 40, bottom = 40, left = 70, right = 70;
  const size_t axes = plot.axes.size();
  auto x = [&](size_t a) { return left + (width - left - right) * static_cast<double>(a) / static_cast<double>(axes - 1); };
  auto y = [&](double f) { return top + (height - top - bottom) * (1.0 - f); };
  std::string svg = fmt::format(
      "<svg class=\"plot\" viewBox=\"0 0 {} {}\" width=\"100%\" role=\"img\" aria-label=\"parallel coordinates of "
      "step {}\">\n", width, height, HtmlEscape(plot.step));
  for (size_t a = 0; a < axes; ++a) {
    const PlotAxis& axis = plot.axes[a];
    svg += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#999\"/>\n", x(a),
                       y(0), y(1));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-weight=\"bold\">{}{}</text>\n",
                       x(a), top - 18, HtmlEscape(axis.name), axis.log ? " (log)" : "");
    if (axis.numeric) {
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(a), top - 4,
                         HtmlEscape(axis.Label(1)));
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", x(a),
                         height - bottom + 16, HtmlEscape(axis.Label(0)));
    } else {
      for (const auto& c : axis.categories) {
        svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>\n", x(a) + 4,
                           y(axis.Position(c)) + 4, HtmlEscape(c));
      }
    }
  }
  const int ranks = plot.points.back()->rank;
  for (auto it = plot.points.rbegin(); it != plot.points.rend(); ++it) {  // the best drawn last, on top
    const NodeReport& n = **it;
    std::string path;
    for (size_t a = 0; a < axes; ++a) {
      path += fmt::format("{}{:.1f},{:.1f}", a ? " " : "", x(a), y(plot.axes[a].Position(AxisValue(plot, a, n))));
    }
    svg += fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"><title>{} "
                       "(rank {})</title></polyline>\n",
                       path, RankColour(n.rank, ranks), n.rank == 1 ? 3 : 1.5, HtmlEscape(n.id), n.rank);
  }
  return svg + "</svg>\n";
}

// The objective against one parameter, a dot per point.
std::string ParameterPlot(const StepPlot& plot, size_t axis) {
  const double width = 340, height = 240, top = 30, bottom = 40, left = 60, right = 20;
  const PlotAxis& px = plot.axes[axis];
  const PlotAxis& py = plot.axes.back();
  auto x = [&](double f) { return left + (width - left - right) * f; };
  auto y = [&](double f) { return top + (height - top - bottom) * (1.0 - f); };
  std::string svg = fmt::format("<svg class=\"param\" viewBox=\"0 0 {} {}\" width=\"{}\" role=\"img\">\n", width,
                                height, width);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"16\" text-anchor=\"middle\" font-weight=\"bold\">{} vs {}{}</text>\n",
                     width / 2, HtmlEscape(py.name), HtmlEscape(px.name), px.log ? " (log axis)" : "");
  svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" "
                     "stroke=\"#ccc\"/>\n", x(0), y(1), x(1) - x(0), y(0) - y(1));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text><text x=\"{:.1f}\" y=\"{:.1f}\" "
                     "text-anchor=\"end\">{}</text>\n",
                     x(0), height - bottom + 16, HtmlEscape(px.Label(0)), x(1), height - bottom + 16,
                     HtmlEscape(px.Label(1)));
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text><text x=\"{:.1f}\" "
                     "y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
                     x(0) - 4, y(1) + 10, HtmlEscape(py.Label(1)), x(0) - 4, y(0), HtmlEscape(py.Label(0)));
  const int ranks = plot.points.back()->rank;
  for (const NodeReport* n : plot.points) {
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\"><title>{}: {}</title></circle>\n",
                       x(px.Position(AxisValue(plot, axis, *n))),
                       y(py.Position(AxisValue(plot, plot.axes.size() - 1, *n))), n->rank == 1 ? 6 : 4,
                       RankColour(n->rank, ranks), HtmlEscape(n->id), Number(*n->objective_value));
  }
  return svg + "</svg>\n";
}

std::string LogLink(const NodeReport& n) {
  return n.job_id > 0 ? "<code>gpuherd logs " + std::to_string(n.job_id) + "</code>" : "";
}

constexpr const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1400px;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right;overflow-wrap:anywhere}
td:first-child,th:first-child,table.sortable td:nth-child(2){text-align:left}
table.sortable th{cursor:pointer;background:#f3f3f3;user-select:none}
table.sortable th.asc::after{content:" \25B2"} table.sortable th.desc::after{content:" \25BC"}
.note{color:#855;font-style:italic} .chart{margin:1em 0} .best{font-size:1.15em;background:#eef8ee;padding:.6em 1em}
.param-plots{display:flex;flex-wrap:wrap;gap:1em} svg text{font-size:12px;font-family:system-ui,sans-serif}
)";

// Sorts by the clicked column: numbers as numbers, the rest as text.
constexpr const char* kSortScript = R"(
document.querySelectorAll("table.sortable").forEach(function(table){
  table.querySelectorAll("th").forEach(function(th,col){
    th.addEventListener("click",function(){
      var asc=!th.classList.contains("asc");
      table.querySelectorAll("th").forEach(function(h){h.classList.remove("asc","desc");});
      th.classList.add(asc?"asc":"desc");
      var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows);
      rows.sort(function(a,b){
        var x=a.cells[col].textContent,y=b.cells[col].textContent,nx=parseFloat(x),ny=parseFloat(y);
        var c=(!isNaN(nx)&&!isNaN(ny))?nx-ny:x.localeCompare(y);
        return asc?c:-c;
      });
      rows.forEach(function(row){body.appendChild(row);});
    });
  });
});
)";

// One uPlot chart per metric, a series per sweep point (the top points of a
// ranked step unless "all points" is ticked), on the union of the points'
// steps (gaps where a point has no value at a step).
constexpr const char* kChartScript = R"(
(function(){
  var data=JSON.parse(document.getElementById("gpuherd-report-data").textContent);
  var box=document.getElementById("curves"),all=document.getElementById("all-curves");
  var palette=["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b","#e377c2","#7f7f7f","#bcbd22","#17becf"];
  function draw(){
    box.innerHTML="";
    var showAll=!all||all.checked;
    data.metrics.forEach(function(metric){
      var points=data.points.filter(function(p){return p.curves[metric]&&(showAll||p.top);});
      if(!points.length)return;
      var xs={};
      points.forEach(function(p){p.curves[metric][0].forEach(function(x){xs[x]=true;});});
      var axis=Object.keys(xs).map(Number).sort(function(a,b){return a-b;});
      var columns=[axis],series=[{label:"step"}];
      points.forEach(function(p,i){
        var at={};
        p.curves[metric][0].forEach(function(x,j){at[x]=p.curves[metric][1][j];});
        columns.push(axis.map(function(x){return x in at?at[x]:null;}));
        series.push({label:(p.rank?"#"+p.rank+" ":"")+p.node,stroke:palette[i%palette.length],width:p.rank===1?2.5:1.5,spanGaps:true});
      });
      var div=document.createElement("div");div.className="chart";box.appendChild(div);
      var h=document.createElement("h3");h.textContent=metric;div.appendChild(h);
      new uPlot({width:Math.min(1300,window.innerWidth-80),height:300,series:series,
                 scales:{x:{time:false}},axes:[{label:"step"},{label:metric}]},columns,div);
    });
  }
  if(all)all.addEventListener("change",draw);
  draw();
})();
)";

}  // namespace

ChartLibrary EmbeddedChartLibrary() {
#ifdef GPUHERD_HAVE_UPLOT
  return {std::string_view(reinterpret_cast<const char*>(gpuherd_uplot_js), gpuherd_uplot_js_size),
          std::string_view(reinterpret_cast<const char*>(gpuherd_uplot_css), gpuherd_uplot_css_size)};
#else
  return {};
#endif
}

std::string RenderHtml(const Report& r, const ChartLibrary& charts) {
  Tables t = MakeTables(r);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += "<title>" + HtmlEscape(Headline(r)) + "</title>\n<style>" + std::string(kStyle) + "</style>\n";
  if (charts.available()) out += "<style>" + std::string(charts.css) + "</style>\n";
  out += "</head><body>\n<h1>" + HtmlEscape(Headline(r)) + "</h1>\n";
  if (r.objectives.empty()) {
    out += "<p class=\"note\">" + HtmlEscape(kNoObjective) + "</p>\n";
  } else {
    for (const auto& line : BestPointLines(r)) out += "<p class=\"best\">" + HtmlEscape(line) + "</p>\n";
  }
  out += "<p>" + HtmlEscape(Summary(r)) + "</p>\n";
  if (!r.run_dir.empty()) out += "<p>Run folder: <code>" + HtmlEscape(r.run_dir) + "</code></p>\n";
  if (!r.params.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [k, v] : r.params) rows.push_back({k, v});
    out += "<h2>Parameters</h2>\n";
    // Its own class: a flex rule for the plots' box once laid its head and
    // body out side by side as two tables.
    HtmlTable({"parameter", "value"}, rows, "params", &out);
  }
  out += "<h2>Sweep points</h2>\n<p>Ranked by the objective; click a header to sort.</p>\n";
  std::vector<std::string> links;
  for (size_t i : t.comparison_nodes) links.push_back(LogLink(r.nodes[i]));
  HtmlTable(t.comparison_header, t.comparison, "sortable", &out, &links);
  if (!t.omitted_metrics.empty()) {
    out += "<p class=\"note\">Also logged (in the CSV: <code>gpuherd report " + std::to_string(r.id) +
           " --format csv</code>): " + HtmlEscape(fmt::format("{}", fmt::join(t.omitted_metrics, ", "))) + "</p>\n";
  }
  for (const StepPlot& plot : StepPlots(r)) {
    out += "<h2>Parameters and " + HtmlEscape(plot.objective.metric) + " (step " + HtmlEscape(plot.step) + ")</h2>\n";
    out += "<p>A line per point, from its parameters to its best " + HtmlEscape(plot.objective.metric) +
           "; green is best.</p>\n";
    out += ParallelCoordinates(plot);
    out += "<div class=\"param-plots\">\n";
    for (size_t a = 0; a + 1 < plot.axes.size(); ++a) out += ParameterPlot(plot, a);
    out += "</div>\n";
  }
  out += "<h2>Learning curves</h2>\n";
  if (!r.objectives.empty()) {
    out += fmt::format("<p><label><input type=\"checkbox\" id=\"all-curves\"> all points (the top {} of each "
                       "ranked step are shown)</label></p>\n", kTopCurves);
  }
  out += "<div id=\"curves\"></div>\n";
  if (!charts.available()) {
    out += "<p class=\"note\">No charts: this gpuherd was built without npm, which installs the charting "
           "library (uPlot) at build time. The curves' data is embedded in this page all the same.</p>\n";
  } else if (r.metric_names.empty()) {
    out += "<p class=\"note\">No metrics were logged.</p>\n";
  }
  HtmlSection("Step timings", t.timing_header, t.timing, "timing", "", &out);
  HtmlSection("Failures, restarts and early stops", t.failure_header, t.failures, "failures", kNoFailures, &out);
  out += "<script type=\"application/json\" id=\"gpuherd-report-data\">" + JsonInScript(ChartData(r)) +
         "</script>\n";
  out += "<script>" + std::string(kSortScript) + "</script>\n";
  if (charts.available()) {
    out += "<script>" + ScriptSafe(std::string(charts.js)) + "</script>\n";
    out += "<script>" + std::string(kChartScript) + "</script>\n";
  }
  out += "</body></html>\n";
  return out;
}

std::string RenderMarkdown(const Report& r) {
  Tables t = MakeTables(r);
  std::string out = "# " + MarkdownText(Headline(r)) + "\n\n";
  if (r.objectives.empty()) {
    out += std::string(kNoObjective) + "\n\n";
  } else {
    for (const auto& line : BestPointLines(r)) out += "**" + MarkdownText(line) + "**\n\n";
  }
  out += MarkdownText(Summary(r)) + "\n\n";
  if (!r.params.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [k, v] : r.params) rows.push_back({k, v});
    out += "## Parameters\n\n";
    MarkdownTable({"parameter", "value"}, rows, &out);
    out += "\n";
  }
  out += "## Sweep points\n\n";
  MarkdownTable(t.comparison_header, t.comparison, &out);
  if (!t.omitted_metrics.empty()) {
    out += "\nAlso logged (see --format csv): " + MarkdownText(fmt::format("{}", fmt::join(t.omitted_metrics, ", "))) +
           "\n";
  }
  MarkdownSection("Step timings", t.timing_header, t.timing, "", &out);
  MarkdownSection("Failures, restarts and early stops", t.failure_header, t.failures, kNoFailures, &out);
  return out;
}

namespace {

// The rows of a two-run comparison: the runs' figures, then the shared points.
struct Comparison {
  std::vector<std::string> summary_header;
  std::vector<std::vector<std::string>> summary;
  std::vector<std::string> points_header;
  std::vector<std::vector<std::string>> points;
};

std::string ObjectiveText(const Report& r) {
  std::string out;
  for (const auto& [step, o] : r.objectives) {
    out += (out.empty() ? "" : "; ") + fmt::format("{}: {} ({})", step, o.metric, ModeName(o.mode));
  }
  return out.empty() ? "none" : out;
}

std::string BestText(const Report& r) {
  std::string out;
  for (const auto& [step, index] : r.best) {
    const NodeReport& n = r.nodes[index];
    out += (out.empty() ? "" : "; ") + fmt::format("{} = {} ({})", n.id, Number(*n.objective_value), Parameters(n));
  }
  return out.empty() ? "-" : out;
}

std::string PointKey(const NodeReport& n) {
  std::vector<std::pair<std::string, std::string>> m = n.matrix;
  std::sort(m.begin(), m.end());
  std::string key = n.step;
  for (const auto& [k, v] : m) key += "\x1f" + k + "=" + v;
  return key;
}

Comparison Compare(const Report& a, const Report& b) {
  Comparison c;
  const std::string ha = fmt::format("{} ({})", a.id, a.name), hb = fmt::format("{} ({})", b.id, b.name);
  c.summary_header = {"run", ha, hb};
  c.summary = {{"outcome", a.outcome.empty() ? a.state : a.outcome, b.outcome.empty() ? b.state : b.outcome},
               {"nodes", std::to_string(a.nodes.size()), std::to_string(b.nodes.size())},
               {"stopped early", std::to_string(a.stopped), std::to_string(b.stopped)},
               {"GPU-hours", Hours(a.gpu_hours), Hours(b.gpu_hours)},
               {"objective", ObjectiveText(a), ObjectiveText(b)},
               {"best point", BestText(a), BestText(b)}};
  std::map<std::string, const NodeReport*> in_b;
  for (const NodeReport& n : b.nodes) {
    if (n.objective_value) in_b[PointKey(n)] = &n;
  }
  c.points_header = {"point", "objective in " + std::to_string(a.id), "objective in " + std::to_string(b.id),
                     "difference"};
  for (const NodeReport& n : a.nodes) {
    auto other = in_b.find(PointKey(n));
    if (!n.objective_value || other == in_b.end()) continue;
    c.points.push_back({n.id, Number(*n.objective_value), Number(*other->second->objective_value),
                        Number(*other->second->objective_value - *n.objective_value)});
  }
  return c;
}

}  // namespace

std::string RenderComparisonHtml(const Report& a, const Report& b) {
  Comparison c = Compare(a, b);
  std::string title = fmt::format("pipelines {} and {} compared", a.id, b.id);
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" + HtmlEscape(title) +
                    "</title>\n<style>" + std::string(kStyle) + "</style>\n</head><body>\n<h1>" + HtmlEscape(title) +
                    "</h1>\n";
  HtmlTable(c.summary_header, c.summary, "compare", &out);
  HtmlSection("Points in both runs", c.points_header, c.points, "sortable", kNoSharedPoints, &out);
  if (!c.points.empty()) out += "<script>" + std::string(kSortScript) + "</script>\n";
  return out + "</body></html>\n";
}

std::string RenderComparisonMarkdown(const Report& a, const Report& b) {
  Comparison c = Compare(a, b);
  std::string out = fmt::format("# pipelines {} and {} compared\n\n", a.id, b.id);
  MarkdownTable(c.summary_header, c.summary, &out);
  MarkdownSection("Points in both runs", c.points_header, c.points, kNoSharedPoints, &out);
  return out;
}

namespace {

// Full precision: CSV is for further analysis, not for reading.
std::string CsvNumber(double value) { return fmt::format("{}", value); }

}  // namespace

std::string RenderCsv(const Report& r) {
  std::vector<std::string> header = {"node", "key", "step", "state", "attempts"};
  for (const auto& name : r.matrix_names) header.push_back(name);
  header.insert(header.end(), {"elapsed_s", "gpus", "gpu_hours"});
  for (const auto& name : r.metric_names) {
    header.push_back(name + "_final");
    header.push_back(name + "_best");
  }
  if (!r.objectives.empty()) header.insert(header.end(), {"rank", "objective", "objective_step"});
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + CsvField(cells[i]);
    out += "\n";
  };
  line(header);
  for (const NodeReport& n : r.nodes) {
    std::vector<std::string> row = {n.id, n.key, n.step, n.state, std::to_string(n.attempts)};
    for (const auto& name : r.matrix_names) row.push_back(MatrixValue(n, name));
    row.insert(row.end(), {CsvNumber(n.elapsed_seconds), CsvNumber(n.gpus), CsvNumber(n.gpu_hours)});
    for (const auto& name : r.metric_names) {
      auto it = n.metrics.find(name);
      row.push_back(it == n.metrics.end() ? "" : CsvNumber(it->second.final_value));
      row.push_back(it == n.metrics.end() ? "" : CsvNumber(it->second.best_value));
    }
    if (!r.objectives.empty()) {
      row.push_back(n.rank > 0 ? std::to_string(n.rank) : "");
      row.push_back(n.objective_value ? CsvNumber(*n.objective_value) : "");
      row.push_back(n.objective_value ? CsvNumber(n.objective_at) : "");
    }
    line(row);
  }
  return out;
}

}  // namespace gpuherd::pipeline
