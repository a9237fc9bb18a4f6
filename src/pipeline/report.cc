#include "pipeline/report.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/html.h"

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

std::string Str(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

int64_t Int(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<int64_t>() : 0;
}

// A node's id and key as the metric lines name it; either may be a number.
std::string IdText(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

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

Result<Report> Summarize(const ReportData& data) {
  const json& p = data.pipeline;
  if (!p.is_object() || !p.contains("nodes") || !p["nodes"].is_array()) {
    return InvalidArgument("the pipeline has no \"nodes\" array; is this a reply of GET /v1/pipelines/ID?");
  }
  if (!data.metrics.is_null() && !data.metrics.is_array()) {
    return InvalidArgument("the metrics must be an array of lines, as in GET /v1/pipelines/ID/metrics");
  }
  Report report;
  report.id = Int(p, "id");
  report.name = Str(p, "name");
  report.state = Str(p, "state");
  report.outcome = Str(p, "outcome");
  report.run_dir = Str(p, "run_dir");
  report.created = Int(p, "created");
  report.finished = Int(p, "finished");
  if (auto it = p.find("params"); it != p.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) report.params[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }

  std::map<std::string, size_t> index;  // node id or key → position
  std::set<std::string> seen_matrix;
  for (const json& n : p["nodes"]) {
    if (!n.is_object()) return InvalidArgument("a pipeline node is not an object");
    NodeReport node;
    node.id = n.contains("id") ? IdText(n["id"]) : "";
    node.key = Str(n, "key");
    node.step = Str(n, "step");
    node.state = Str(n, "state");
    node.attempts = static_cast<int>(Int(n, "attempts"));
    node.reason = Str(n, "reason");
    if (auto it = n.find("matrix"); it != n.end() && it->is_object()) {
      for (const auto& [k, v] : it->items()) {
        node.matrix.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
        if (seen_matrix.insert(k).second) report.matrix_names.push_back(k);
      }
    }
    if (n.contains("gpu_tenths")) {
      node.gpus = static_cast<double>(Int(n, "gpu_tenths")) / 10.0;
    } else if (auto it = n.find("gpus"); it != n.end() && it->is_array()) {
      node.gpus = static_cast<double>(it->size());
    }
    TimeMs started = Int(n, "started"), ended = Int(n, "ended");
    if (started > 0) {
      TimeMs end = ended > 0 ? ended : data.now;
      node.elapsed_seconds = end > started ? static_cast<double>(end - started) / 1000.0 : 0.0;
    }
    // Every attempt's GPU time where the daemon kept it; else the last one's.
    node.gpu_hours = n.contains("gpu_seconds") && n["gpu_seconds"].is_number()
                         ? n["gpu_seconds"].get<double>() / 3600.0
                         : node.gpus * node.elapsed_seconds / 3600.0;
    report.gpu_hours += node.gpu_hours;
    report.failed_attempts += std::max(0, node.attempts - 1);
    const size_t position = report.nodes.size();
    if (!node.id.empty()) index[node.id] = position;
    if (!node.key.empty()) index.emplace(node.key, position);
    report.nodes.push_back(std::move(node));
  }

  std::vector<std::vector<Line>> lines(report.nodes.size());
  if (data.metrics.is_array()) {
    size_t order = 0;
    for (const json& m : data.metrics) {
      ++order;
      if (!m.is_object() || !m.contains("node")) continue;
      auto it = index.find(IdText(m["node"]));
      auto values = m.find("values");
      if (it == index.end() || values == m.end() || !values->is_object()) continue;
      Line line;
      line.order = order;
      line.attempt = static_cast<int>(Int(m, "attempt"));
      line.time = Int(m, "time");
      if (m.contains("step") && m["step"].is_number()) {
        line.step = m["step"].get<double>();
      } else if (values->contains("step") && (*values)["step"].is_number()) {
        line.step = (*values)["step"].get<double>();
      } else {
        line.step = static_cast<double>(lines[it->second].size());
      }
      line.values = &*values;
      lines[it->second].push_back(line);
    }
  }
  std::set<std::string> metric_names;
  for (size_t i = 0; i < report.nodes.size(); ++i) {
    AddLines(lines[i], &report.nodes[i]);
    for (const auto& [name, summary] : report.nodes[i].metrics) metric_names.insert(name);
  }
  report.metric_names.assign(metric_names.begin(), metric_names.end());

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
  std::vector<std::string> timing_header{"step", "nodes", "elapsed (sum)", "longest", "GPU-hours"};
  std::vector<std::vector<std::string>> timing;
  std::vector<std::string> failure_header{"node", "state", "attempts", "reason"};
  std::vector<std::vector<std::string>> failures;
};

Tables MakeTables(const Report& r) {
  Tables t;
  t.comparison_header = {"node", "state", "attempts"};
  for (const auto& name : r.matrix_names) t.comparison_header.push_back(name);
  for (const auto& name : r.metric_names) {
    t.comparison_header.push_back(name + " final");
    t.comparison_header.push_back(name + (LowerIsBetter(name) ? " best (min)" : " best (max)"));
  }
  t.comparison_header.push_back("elapsed (s)");
  t.comparison_header.push_back("GPU-hours");
  for (const NodeReport& n : r.nodes) {
    std::vector<std::string> row = {n.id, n.state, std::to_string(n.attempts)};
    for (const auto& name : r.matrix_names) row.push_back(MatrixValue(n, name));
    for (const auto& name : r.metric_names) {
      auto it = n.metrics.find(name);
      row.push_back(it == n.metrics.end() ? "" : Number(it->second.final_value));
      row.push_back(it == n.metrics.end() ? "" : Number(it->second.best_value));
    }
    row.push_back(fmt::format("{:.1f}", n.elapsed_seconds));  // a number, so the HTML sorts it
    row.push_back(Hours(n.gpu_hours));
    t.comparison.push_back(std::move(row));
    if (n.attempts > 1 || n.state == "failed" || n.state == "cancelled" || n.state == "skipped") {
      t.failures.push_back({n.id, n.state, std::to_string(n.attempts), n.reason});
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
  return fmt::format("{} nodes, {} GPU-hours, {} retried attempts; created {}{}", r.nodes.size(), Hours(r.gpu_hours),
                     r.failed_attempts, r.created > 0 ? FormatTimeUtc(r.created) : "-",
                     r.finished > 0 ? ", finished " + FormatTimeUtc(r.finished) : "");
}

std::string MarkdownCell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

void MarkdownTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
                   std::string* out) {
  auto line = [&](const std::vector<std::string>& cells) {
    *out += "|";
    for (const auto& c : cells) *out += " " + MarkdownCell(c) + " |";
    *out += "\n";
  };
  line(header);
  *out += "|";
  for (size_t i = 0; i < header.size(); ++i) *out += "---|";
  *out += "\n";
  for (const auto& row : rows) line(row);
}

void HtmlTable(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows,
               const char* css_class, std::string* out) {
  *out += fmt::format("<table class=\"{}\"><thead><tr>", css_class);
  for (const auto& h : header) *out += "<th>" + HtmlEscape(h) + "</th>";
  *out += "</tr></thead><tbody>\n";
  for (const auto& row : rows) {
    *out += "<tr>";
    for (const auto& c : row) *out += "<td>" + HtmlEscape(c) + "</td>";
    *out += "</tr>\n";
  }
  *out += "</tbody></table>\n";
}

// Safe inside <script>: a "</" in a string would end the element early.
std::string ScriptSafe(std::string text) {
  for (size_t at = text.find("</"); at != std::string::npos; at = text.find("</", at + 3)) {
    text.replace(at, 2, "<\\/");
  }
  return text;
}

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
    if (!curves.empty()) points.push_back({{"node", n.id}, {"key", n.key}, {"curves", curves}});
  }
  return {{"metrics", r.metric_names}, {"points", points}};
}

constexpr const char* kStyle = R"(
body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
table.sortable th{cursor:pointer;background:#f3f3f3;user-select:none}
table.sortable th.asc::after{content:" \25B2"} table.sortable th.desc::after{content:" \25BC"}
.note{color:#855;font-style:italic} .chart{margin:1em 0}
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

// One uPlot chart per metric, a series per sweep point, on the union of the
// points' steps (gaps where a point has no value at a step).
constexpr const char* kChartScript = R"(
(function(){
  var data=JSON.parse(document.getElementById("gpuherd-report-data").textContent);
  var box=document.getElementById("curves");
  var palette=["#1f77b4","#ff7f0e","#2ca02c","#d62728","#9467bd","#8c564b","#e377c2","#7f7f7f","#bcbd22","#17becf"];
  data.metrics.forEach(function(metric){
    var points=data.points.filter(function(p){return p.curves[metric];});
    if(!points.length)return;
    var xs={};
    points.forEach(function(p){p.curves[metric][0].forEach(function(x){xs[x]=true;});});
    var axis=Object.keys(xs).map(Number).sort(function(a,b){return a-b;});
    var columns=[axis],series=[{label:"step"}];
    points.forEach(function(p,i){
      var at={};
      p.curves[metric][0].forEach(function(x,j){at[x]=p.curves[metric][1][j];});
      columns.push(axis.map(function(x){return x in at?at[x]:null;}));
      series.push({label:p.node,stroke:palette[i%palette.length],width:1.5,spanGaps:true});
    });
    var div=document.createElement("div");div.className="chart";box.appendChild(div);
    var h=document.createElement("h3");h.textContent=metric;div.appendChild(h);
    new uPlot({width:Math.min(960,window.innerWidth-60),height:300,series:series,
               scales:{x:{time:false}},axes:[{label:"step"},{label:metric}]},columns,div);
  });
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
  out += "</head><body>\n<h1>" + HtmlEscape(Headline(r)) + "</h1>\n<p>" + HtmlEscape(Summary(r)) + "</p>\n";
  if (!r.run_dir.empty()) out += "<p>Run folder: <code>" + HtmlEscape(r.run_dir) + "</code></p>\n";
  if (!r.params.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [k, v] : r.params) rows.push_back({k, v});
    out += "<h2>Parameters</h2>\n";
    HtmlTable({"parameter", "value"}, rows, "params", &out);
  }
  out += "<h2>Sweep points</h2>\n<p>Click a header to sort.</p>\n";
  HtmlTable(t.comparison_header, t.comparison, "sortable", &out);
  out += "<h2>Learning curves</h2>\n<div id=\"curves\"></div>\n";
  if (!charts.available()) {
    out += "<p class=\"note\">No charts: this gpuherd was built without npm, which installs the charting "
           "library (uPlot) at build time. The curves' data is embedded in this page all the same.</p>\n";
  } else if (r.metric_names.empty()) {
    out += "<p class=\"note\">No metrics were logged.</p>\n";
  }
  out += "<h2>Step timings</h2>\n";
  HtmlTable(t.timing_header, t.timing, "timing", &out);
  out += "<h2>Failures and restarts</h2>\n";
  if (t.failures.empty()) {
    out += "<p>None: every node completed on its first attempt.</p>\n";
  } else {
    HtmlTable(t.failure_header, t.failures, "failures", &out);
  }
  out += "<script type=\"application/json\" id=\"gpuherd-report-data\">" + ScriptSafe(ChartData(r).dump()) +
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
  std::string out = "# " + MarkdownCell(Headline(r)) + "\n\n" + MarkdownCell(Summary(r)) + "\n\n";
  if (!r.params.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& [k, v] : r.params) rows.push_back({k, v});
    out += "## Parameters\n\n";
    MarkdownTable({"parameter", "value"}, rows, &out);
    out += "\n";
  }
  out += "## Sweep points\n\n";
  MarkdownTable(t.comparison_header, t.comparison, &out);
  out += "\n## Step timings\n\n";
  MarkdownTable(t.timing_header, t.timing, &out);
  out += "\n## Failures and restarts\n\n";
  if (t.failures.empty()) {
    out += "None: every node completed on its first attempt.\n";
  } else {
    MarkdownTable(t.failure_header, t.failures, &out);
  }
  return out;
}

namespace {

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

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
    line(row);
  }
  return out;
}

}  // namespace gpuherd::pipeline
