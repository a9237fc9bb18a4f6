#include "pipeline/report.h"

#include <cmath>
#include <limits>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

constexpr TimeMs kStart = 1'700'000'000'000;

// The curves the fake trainer logs: loss falls with the learning rate's
// help, accuracy rises; a point with lr 0.3 has a loss spike at step 5.
double Loss(double lr, int step) { return 2.0 / (1.0 + lr * step) + (lr > 0.2 && step == 5 ? 3.0 : 0.0); }
double Accuracy(double lr, int step) { return 1.0 - 0.5 / (1.0 + lr * step); }

// A metric line as the daemon collected it; `values` keeps the step too.
api::PipelineMetricLine MetricLine(const std::string& node, int attempt, int step, json values) {
  values["step"] = step;
  api::PipelineMetricLine line;
  line.node = node;
  line.attempt = attempt;
  line.step = step;
  line.time = kStart + attempt * 100'000 + step * 1000;
  line.values = std::move(values);
  return line;
}

// A line without a step of its own, in the order it came.
api::PipelineMetricLine BareLine(const std::string& node, json values) {
  api::PipelineMetricLine line;
  line.node = node;
  line.values = std::move(values);
  return line;
}

api::PipelineNodeView NodeView(const std::string& id, const std::string& key, const std::string& step) {
  api::PipelineNodeView n;
  n.id = id;
  n.key = key;
  n.step = step;
  return n;
}

// A run of the one node `node`.
ReportData OneNode(api::PipelineNodeView node) {
  ReportData data;
  data.pipeline.summary.id = 1;
  data.pipeline.nodes = {std::move(node)};
  return data;
}

// Three sweep points of "train" and a report node; the lr=0.1 point failed
// at step 7 and resumed from its checkpoint at step 5, logging steps 6 and 7
// again with other values.
ReportData SweepData() {
  ReportData data;
  data.now = kStart + 3'600'000;
  api::PipelineDetail& p = data.pipeline;
  p.summary.id = 7;
  p.summary.name = "toy-sweep";
  p.summary.state = "finished";
  p.summary.outcome = "succeeded";
  p.summary.created = kStart;
  p.summary.finished = kStart + 600'000;
  p.run_dir = "/runs/7";
  p.params = {{"steps", "10"}};
  const double lrs[] = {0.3, 0.1, 0.03};
  for (int i = 0; i < 3; ++i) {
    std::string id = "train[lr=" + json(lrs[i]).dump() + "]";
    api::PipelineNodeView n = NodeView(id, "train/" + std::to_string(i), "train");
    n.matrix = {{"lr", json(lrs[i]).dump()}};
    n.state = "completed";
    n.attempts = i == 1 ? 2 : 1;
    n.job_id = 10 + i;
    n.gpus = {i};
    n.started = kStart + 1000;
    n.ended = kStart + 1000 + (i + 1) * 720'000;
    p.nodes.push_back(std::move(n));
    data.jobs[10 + i].gpu_twentieths = 10;  // half a GPU each
    for (int step = 0; step < 10; ++step) {
      if (i == 1 && step > 7) break;
      data.metrics.push_back(MetricLine(id, 1, step, {{"loss", Loss(lrs[i], step)}, {"acc", Accuracy(lrs[i], step)}}));
    }
    if (i == 1) {
      for (int step = 6; step < 10; ++step) {
        data.metrics.push_back(
            MetricLine(id, 2, step, {{"loss", Loss(lrs[i], step) / 2}, {"acc", Accuracy(lrs[i], step)}}));
      }
    }
  }
  api::PipelineNodeView report = NodeView("report", "report", "report");
  report.state = "running";
  report.attempts = 1;
  report.started = kStart + 3'000'000;
  p.nodes.push_back(std::move(report));
  return data;
}

const NodeReport& Node(const Report& r, const std::string& key) {
  for (const NodeReport& n : r.nodes) {
    if (n.key == key) return n;
  }
  ADD_FAILURE() << "no node " << key;
  return r.nodes.front();
}

TEST(ReportTest, FinalAndBestFollowTheMetricLines) {
  const Report report = Summarize(SweepData());
  EXPECT_EQ(report.metric_names, (std::vector<std::string>{"acc", "loss"}));
  EXPECT_EQ(report.matrix_names, (std::vector<std::string>{"lr"}));

  const NodeReport& fast = Node(report, "train/0");
  EXPECT_DOUBLE_EQ(fast.metrics.at("loss").final_value, Loss(0.3, 9));
  EXPECT_DOUBLE_EQ(fast.metrics.at("loss").best_value, Loss(0.3, 9));  // lowest, not the spike
  EXPECT_DOUBLE_EQ(fast.metrics.at("acc").best_value, Accuracy(0.3, 9));
  EXPECT_EQ(fast.metrics.at("loss").count, 10);

  const NodeReport& slow = Node(report, "train/2");
  EXPECT_DOUBLE_EQ(slow.metrics.at("acc").final_value, Accuracy(0.03, 9));
  EXPECT_DOUBLE_EQ(slow.metrics.at("acc").best_at, 9);
}

TEST(ReportTest, ResumedPointKeepsTheLaterAttemptsValues) {
  const Report report = Summarize(SweepData());
  const NodeReport& resumed = Node(report, "train/1");
  EXPECT_DOUBLE_EQ(resumed.metrics.at("loss").final_value, Loss(0.1, 9) / 2);
  EXPECT_DOUBLE_EQ(resumed.metrics.at("loss").best_value, Loss(0.1, 9) / 2);
  // One value per step: steps 6 and 7 of the failed attempt are replaced.
  const auto& curve = resumed.curves.at("loss");
  ASSERT_EQ(curve.size(), 10u);
  for (int step = 0; step < 10; ++step) {
    EXPECT_EQ(curve[step].step, step);
    EXPECT_DOUBLE_EQ(curve[step].value, step < 6 ? Loss(0.1, step) : Loss(0.1, step) / 2) << step;
  }
  EXPECT_EQ(report.failed_attempts, 1);
}

TEST(ReportTest, GpuHoursAreGpusTimesElapsed) {
  const Report report = Summarize(SweepData());
  double total = 0;
  for (int i = 0; i < 3; ++i) {
    const NodeReport& n = Node(report, "train/" + std::to_string(i));
    double elapsed = (i + 1) * 720.0;
    EXPECT_DOUBLE_EQ(n.elapsed_seconds, elapsed);
    EXPECT_DOUBLE_EQ(n.gpus, 0.5);
    EXPECT_DOUBLE_EQ(n.gpu_hours, 0.5 * elapsed / 3600);
    total += n.gpu_hours;
  }
  // The running report node has no GPUs: time counts, GPU-hours do not.
  EXPECT_DOUBLE_EQ(Node(report, "report").elapsed_seconds, 600.0);
  EXPECT_DOUBLE_EQ(Node(report, "report").gpu_hours, 0.0);
  EXPECT_DOUBLE_EQ(report.gpu_hours, total);
  ASSERT_EQ(report.steps.size(), 2u);
  EXPECT_EQ(report.steps[0].step, "train");
  EXPECT_EQ(report.steps[0].nodes, 3);
  EXPECT_DOUBLE_EQ(report.steps[0].gpu_hours, total);
  EXPECT_DOUBLE_EQ(report.steps[0].longest_seconds, 3 * 720.0);
}

TEST(ReportTest, GpuCountFallsBackToAssignedGpus) {
  ReportData data = SweepData();
  data.jobs.erase(10);
  data.pipeline.nodes[0].gpus = {0, 1};
  const Report report = Summarize(data);
  EXPECT_DOUBLE_EQ(Node(report, "train/0").gpu_hours, 2 * 720.0 / 3600);
}

TEST(ReportTest, GpuTimeOfEveryAttemptWinsOverTheLastAttemptsSpan) {
  // Two attempts: 900 s on half a GPU, then the last one's 720 s.
  ReportData data = SweepData();
  data.pipeline.nodes[0].attempts = 2;
  data.pipeline.nodes[0].gpu_seconds = 0.5 * 900 + 0.5 * 720;
  const Report report = Summarize(data);
  EXPECT_DOUBLE_EQ(Node(report, "train/0").gpu_hours, 0.5 * 1620 / 3600);
}

TEST(ReportTest, SkipsValuesThatAreNotFiniteNumbers) {
  ReportData data = SweepData();
  std::string id = data.pipeline.nodes[2].id;
  data.metrics.push_back(MetricLine(id, 1, 10, {{"loss", nullptr}, {"acc", "n/a"}}));
  data.metrics.push_back(MetricLine(id, 1, 11, {{"loss", std::numeric_limits<double>::infinity()}}));
  data.metrics.push_back(MetricLine("not-a-node", 1, 1, {{"loss", 0.0}}));
  const Report report = Summarize(data);
  EXPECT_DOUBLE_EQ(Node(report, "train/2").metrics.at("loss").final_value, Loss(0.03, 9));
  EXPECT_EQ(Node(report, "train/2").metrics.at("loss").count, 10);
}

TEST(ReportTest, StepComesFromValuesWhenTheLineHasNone) {
  ReportData data = OneNode(NodeView("a", "a", "a"));
  data.metrics = {BareLine("a", {{"step", 40}, {"err", 0.5}}), BareLine("a", {{"step", 80}, {"err", 0.25}}),
                  BareLine("a", {{"err", 0.75}})};
  const Report report = Summarize(data);
  const MetricSummary& err = report.nodes[0].metrics.at("err");
  EXPECT_DOUBLE_EQ(err.best_value, 0.25);
  EXPECT_DOUBLE_EQ(err.best_at, 80);
  EXPECT_DOUBLE_EQ(err.final_value, 0.75);
  EXPECT_DOUBLE_EQ(report.nodes[0].curves.at("err")[0].step, 2);  // its position
}

TEST(ReportTest, LowerIsBetterForLossesAndErrors) {
  EXPECT_TRUE(LowerIsBetter("loss"));
  EXPECT_TRUE(LowerIsBetter("val_loss"));
  EXPECT_TRUE(LowerIsBetter("top1_error"));
  EXPECT_TRUE(LowerIsBetter("PPL"));
  EXPECT_TRUE(LowerIsBetter("val_rmse"));
  EXPECT_FALSE(LowerIsBetter("acc"));
  EXPECT_FALSE(LowerIsBetter("bleu"));
}

// The JSON inside <script id="gpuherd-report-data">.
json EmbeddedData(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"gpuherd-report-data\">";
  size_t begin = html.find(open);
  if (begin == std::string::npos) return nullptr;
  begin += open.size();
  size_t end = html.find("</script>", begin);
  return json::parse(html.substr(begin, end - begin), nullptr, false);
}

TEST(ReportHtmlTest, EmbeddedChartDataMatchesTheMetrics) {
  ReportData data = SweepData();
  const Report report = Summarize(data);
  std::string html = RenderHtml(report, ChartLibrary{"window.uPlot=function(){};", ".uplot{}"});
  json embedded = EmbeddedData(html);
  ASSERT_TRUE(embedded.is_object()) << html;
  EXPECT_EQ(embedded["metrics"], json({"acc", "loss"}));
  ASSERT_EQ(embedded["points"].size(), 3u);  // the report node logged nothing
  // Every metric line of an attempt that was not replaced appears at its step.
  for (const api::PipelineMetricLine& line : data.metrics) {
    const std::string& node = line.node;
    const json* point = nullptr;
    for (const json& p : embedded["points"]) {
      if (p["node"] == node) point = &p;
    }
    ASSERT_NE(point, nullptr) << node;
    const json& curve = (*point)["curves"]["loss"];
    const int step = static_cast<int>(*line.step);
    ASSERT_EQ(curve[0][step], step);
    bool replaced = node == "train[lr=0.1]" && line.attempt == 1 && step >= 6;
    if (!replaced) {
      EXPECT_DOUBLE_EQ(curve[1][step].get<double>(), line.values["loss"].get<double>());
    }
  }
  EXPECT_THAT(html, HasSubstr("window.uPlot=function(){};"));
  EXPECT_THAT(html, HasSubstr("new uPlot("));
  EXPECT_THAT(html, HasSubstr("<table class=\"sortable\">"));
  EXPECT_THAT(html, Not(HasSubstr("No charts")));
}

TEST(ReportHtmlTest, WithoutAChartLibraryTheReportSaysSo) {
  const Report report = Summarize(SweepData());
  std::string html = RenderHtml(report, ChartLibrary{});
  EXPECT_THAT(html, HasSubstr("No charts"));
  EXPECT_THAT(html, Not(HasSubstr("new uPlot(")));
  EXPECT_TRUE(EmbeddedData(html).is_object());
}

// The CSS rules of the page's <style> elements whose selectors name
// `css_class` and that set `display`.
std::vector<std::string> DisplayRulesOf(const std::string& html, const std::string& css_class) {
  std::vector<std::string> found;
  const std::regex style("<style>([^<]*)</style>");
  const std::regex rule("([^{}]+)\\{([^}]*)\\}");
  const std::regex names_class("\\." + css_class + "(?![-\\w])");
  for (auto s = std::sregex_iterator(html.begin(), html.end(), style); s != std::sregex_iterator(); ++s) {
    const std::string css = (*s)[1].str();
    for (auto r = std::sregex_iterator(css.begin(), css.end(), rule); r != std::sregex_iterator(); ++r) {
      const std::string selectors = (*r)[1].str(), body = (*r)[2].str();
      if (std::regex_search(selectors, names_class) && body.find("display") != std::string::npos) {
        found.push_back(r->str());
      }
    }
  }
  return found;
}

TEST(ReportHtmlTest, ParametersTableHasItsHeaderAndItsValuesInOneTable) {
  ReportData data = SweepData();
  data.pipeline.objectives = {{"train", {"acc", "max", "last"}}};  // the parameter plots are drawn too
  data.pipeline.params = {{"epochs", "20"}, {"data", "/data/cifar"}};
  const std::string html = RenderHtml(Summarize(data), ChartLibrary{});
  const size_t heading = html.find("<h2>Parameters</h2>");
  ASSERT_NE(heading, std::string::npos);
  const size_t begin = html.find("<table", heading), end = html.find("</table>", heading);
  ASSERT_LT(begin, end);
  const std::string table = html.substr(begin, end - begin);
  EXPECT_EQ(table.find("<table", 1), std::string::npos) << table;
  EXPECT_THAT(table, HasSubstr("<thead><tr><th>parameter</th><th>value</th></tr></thead><tbody>"));
  EXPECT_THAT(table, HasSubstr("<tr><td>data</td><td>/data/cifar</td></tr>\n<tr><td>epochs</td><td>20</td></tr>"));
  // Nothing lays the table out otherwise than as a table: the head and the
  // body stay one grid.
  std::smatch css_class;
  ASSERT_TRUE(std::regex_search(table, css_class, std::regex("^<table class=\"([-\\w]+)\">")));
  EXPECT_THAT(DisplayRulesOf(html, css_class[1].str()), ::testing::IsEmpty());
  EXPECT_THAT(html, HasSubstr("<div class=\"param-plots\">"));
  EXPECT_THAT(DisplayRulesOf(html, "param-plots"), ::testing::SizeIs(1));  // the check sees such rules
}

TEST(ReportHtmlTest, EscapesNamesFromTheFile) {
  ReportData data = OneNode(NodeView("a</script>", "a", "a&b"));
  data.pipeline.summary.name = "<b>x</b>";
  api::PipelineMetricLine line = BareLine("a</script>", {{"loss", 1.0}});
  line.step = 1;
  data.metrics = {line};
  const Report report = Summarize(data);
  std::string html = RenderHtml(report, ChartLibrary{});
  EXPECT_THAT(html, HasSubstr("&lt;b&gt;x&lt;/b&gt;"));
  EXPECT_THAT(html, HasSubstr("a&amp;b"));
  EXPECT_EQ(EmbeddedData(html)["points"][0]["node"], "a</script>");
}

TEST(ReportHtmlTest, BuiltInChartLibraryIsUplot) {
#ifdef GPUHERD_HAVE_UPLOT
  ChartLibrary charts = EmbeddedChartLibrary();
  ASSERT_TRUE(charts.available());
  EXPECT_THAT(std::string(charts.js), HasSubstr("uPlot"));
  EXPECT_THAT(std::string(charts.css), HasSubstr(".uplot"));
#else
  EXPECT_FALSE(EmbeddedChartLibrary().available());
#endif
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) out.push_back(part);
  return out;
}

TEST(ReportCsvTest, RowsCarryTheNumbersOfEachPoint) {
  ReportData data = SweepData();
  const Report report = Summarize(data);
  std::vector<std::string> lines = Split(RenderCsv(report), '\n');
  ASSERT_EQ(lines.size(), 5u);  // header + 4 nodes
  std::vector<std::string> header = Split(lines[0], ',');
  EXPECT_EQ(header, (std::vector<std::string>{"node", "key", "step", "state", "attempts", "lr", "elapsed_s", "gpus",
                                              "gpu_hours", "acc_final", "acc_best", "loss_final", "loss_best"}));
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> row = Split(lines[1 + i], ',');
    ASSERT_EQ(row.size(), header.size()) << lines[1 + i];
    const NodeReport& n = report.nodes[i];
    EXPECT_EQ(row[1], n.key);
    EXPECT_DOUBLE_EQ(std::stod(row[8]), 0.5 * (i + 1) * 720.0 / 3600);
    EXPECT_DOUBLE_EQ(std::stod(row[11]), n.metrics.at("loss").final_value);
    EXPECT_DOUBLE_EQ(std::stod(row[12]), n.metrics.at("loss").best_value);
  }
  EXPECT_DOUBLE_EQ(std::stod(Split(lines[1], ',')[11]), Loss(0.3, 9));
}

TEST(ReportCsvTest, QuotesFieldsWithCommas) {
  ReportData data = OneNode(NodeView("t[a=1,b=\"x\"]", "t/0", "t"));
  const Report report = Summarize(data);
  EXPECT_THAT(RenderCsv(report), HasSubstr("\"t[a=1,b=\"\"x\"\"]\",t/0,t,"));
}

// Issue 29: a job wrote metric names with escape sequences as JSON keys, and
// a sweep's parameters can be anything; the Markdown and CSV reports are read
// on terminals (`gpuherd report --format md`), so none may reach them raw.
ReportData HostileData() {
  api::PipelineNodeView n = NodeView("t[p=a|b\x1b[8m]", "t/0", "t\x07");
  n.matrix = {{"p\x1b]0;T\x07", "a|b\nc\x1b[8m"}};
  n.state = "completed";
  n.attempts = 2;
  n.reason = "exit 1\r\x1b[2K";
  ReportData data = OneNode(n);
  data.pipeline.summary.name = "run\x1b[30;40mHIDDEN";
  data.pipeline.params = {{"k\x1b[31m", "v\xc2\x9b" "2J"}};
  api::PipelineMetricLine line =
      MetricLine(n.id, 1, 1, {{"loss\x1b[31m", 0.5}, {"acc\x1b]0;T\x07", 0.9}, {"a,b\"c\n", 1.0}});
  data.metrics = {line};
  return data;
}

// A control character other than a line feed: C0, DEL or C1 (U+0080..U+009F).
bool HasControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') continue;
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return true;
  }
  return false;
}

TEST(ReportMarkdownTest, NamesFromTheJobAreEscapedAndCannotBreakTheTable) {
  ReportData data = HostileData();
  data.metrics[0].values["z1"] = 1.0;
  data.metrics[0].values["z2|\x1b[1m"] = 1.0;  // the fifth: named below the table
  const Report report = Summarize(data);
  ASSERT_EQ(report.metric_names.size(), 5u);
  const std::string md = RenderMarkdown(report);
  EXPECT_THAT(md, HasSubstr("Also logged (see --format csv): z2\\|\\e[1m\n"));
  EXPECT_FALSE(HasControl(md)) << md;
  EXPECT_THAT(md, HasSubstr("loss\\e[31m"));
  EXPECT_THAT(md, HasSubstr("run\\e[30;40mHIDDEN"));
  EXPECT_THAT(md, HasSubstr("a\\|b\\nc\\e[8m"));  // the value stays in its cell and its row
  EXPECT_THAT(md, HasSubstr("v\\u009b2J"));
  // Every row of a table has as many unescaped pipes as its header.
  for (const std::string& row : Split(md, '\n')) {
    if (row.empty() || row[0] != '|') continue;
    size_t pipes = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (row[i] == '\\') ++i;
      else if (row[i] == '|') ++pipes;
    }
    EXPECT_GE(pipes, 3u) << row;
  }
  const std::string compared = RenderComparisonMarkdown(report, report);
  EXPECT_FALSE(HasControl(compared)) << compared;
}

TEST(ReportCsvTest, NamesFromTheJobAreQuotedAndEscaped) {
  const Report report = Summarize(HostileData());
  const std::string csv = RenderCsv(report);
  EXPECT_FALSE(HasControl(csv)) << csv;
  const std::vector<std::string> lines = Split(csv, '\n');
  ASSERT_EQ(lines.size(), 2u);  // header and one node: no line break inside a field
  EXPECT_THAT(lines[0], HasSubstr(",\"a,b\"\"c\\n_final\",\"a,b\"\"c\\n_best\","));
  EXPECT_THAT(lines[0], HasSubstr(",loss\\e[31m_final,"));
  EXPECT_THAT(lines[0], HasSubstr(",acc\\e]0;T\\x07_best,"));
  EXPECT_THAT(lines[0], HasSubstr(",p\\e]0;T\\x07,"));
  EXPECT_THAT(lines[1], HasSubstr(",t\\x07,completed,2,a|b\\nc\\e[8m,"));
}

TEST(ReportHtmlTest, MetricNamesAreEscapedToo) {
  ReportData data = HostileData();
  data.metrics[0].values["<img src=x>"] = 2.0;
  const Report report = Summarize(data);
  const std::string html = RenderHtml(report, ChartLibrary{});
  EXPECT_EQ(html.find('\x1b'), std::string::npos);
  EXPECT_EQ(html.find('\x07'), std::string::npos);
  EXPECT_THAT(html, HasSubstr("<th>&lt;img src=x&gt; last</th>"));
  EXPECT_THAT(html, HasSubstr("<th>loss&#xfffd;[31m last</th>"));
  EXPECT_THAT(html, Not(HasSubstr("<img src=x>")));  // nor in the curves' data
  EXPECT_EQ(EmbeddedData(html)["metrics"][0], "<img src=x>");
}

TEST(ReportMarkdownTest, WithoutAnObjectiveNothingIsRankedAndTheReportSaysHow) {
  const Report report = Summarize(SweepData());
  std::string md = RenderMarkdown(report);
  EXPECT_THAT(md, HasSubstr("No objective declared"));
  EXPECT_THAT(md, HasSubstr("objective: {metric: NAME, mode: min|max}"));
  // No "best (max)" column for a metric nobody declared an objective for.
  EXPECT_THAT(md, Not(HasSubstr("best (max)")));
  EXPECT_THAT(md, HasSubstr("| point | state | lr | acc last | loss last | GPU-hours | attempts |"));
  bool found = false;
  for (const std::string& line : Split(md, '\n')) {
    if (!line.starts_with("| train[lr=0.3]")) continue;
    found = true;
    std::vector<std::string> cells = Split(line, '|');
    // "", point, state, lr, acc last, loss last, GPU-hours, attempts
    ASSERT_GE(cells.size(), 8u);
    EXPECT_NEAR(std::stod(cells[5]), Loss(0.3, 9), 1e-5);
    EXPECT_NEAR(std::stod(cells[6]), 0.1, 1e-9);
  }
  EXPECT_TRUE(found) << md;
  EXPECT_THAT(md, HasSubstr("| train[lr=0.1] | completed | 2 |"));  // under failures and restarts
  EXPECT_THAT(md, HasSubstr("## Step timings"));
}

ReportData WithObjective(ReportData data, const std::string& metric, const std::string& mode,
                         const std::string& summary = "last") {
  data.pipeline.objectives = {{"train", {metric, mode, summary}}};
  return data;
}

TEST(ReportObjectiveTest, SummaryLastRanksTheLastValueSummaryBestTheBestEver) {
  // lr 0.03 logs a noisy early loss of 0.01 at step 1 and ends at 1.5748.
  ReportData data = SweepData();
  data.metrics.push_back(MetricLine("train[lr=0.03]", 1, 1, {{"loss", 0.01}, {"acc", Accuracy(0.03, 1)}}));
  const Report last = Summarize(WithObjective(data, "loss", "min"));
  EXPECT_EQ(Node(last, "train/2").rank, 3);
  EXPECT_EQ(Node(last, "train/1").rank, 1);
  EXPECT_THAT(RenderMarkdown(last), HasSubstr("| loss last (min) | at step |"));
  const Report best = Summarize(WithObjective(data, "loss", "min", "best"));
  EXPECT_EQ(Node(best, "train/2").rank, 1);
  EXPECT_EQ(Node(best, "train/2").objective_at, 1);
  EXPECT_THAT(RenderMarkdown(best), HasSubstr("| loss best (min) | at step |"));
}

TEST(ReportObjectiveTest, AnObjectiveNotLoggedIsSaidWhereTheBestPointWouldBe) {
  ReportData data = WithObjective(SweepData(), "accuracy", "max");
  data.pipeline.objectives["train"].warning = "objective 'accuracy' not logged; seen: acc, loss";
  EXPECT_THAT(RenderMarkdown(Summarize(data)), HasSubstr("Step train: objective 'accuracy' not logged; seen: acc, loss."));
}

TEST(ReportObjectiveTest, PointsAreRankedByTheBestValueOfTheObjective) {
  // Best loss per point: lr 0.3 → 2/(1+0.3·9) = 0.5405; lr 0.1 resumed with
  // halved values → 1/(1+0.9) = 0.5263; lr 0.03 → 2/1.27 = 1.5748.
  const Report report = Summarize(WithObjective(SweepData(), "loss", "min"));
  EXPECT_EQ(Node(report, "train/1").rank, 1);
  EXPECT_EQ(Node(report, "train/0").rank, 2);
  EXPECT_EQ(Node(report, "train/2").rank, 3);
  EXPECT_EQ(Node(report, "report").rank, 0);
  EXPECT_NEAR(*Node(report, "train/1").objective_value, Loss(0.1, 9) / 2, 1e-12);
  EXPECT_EQ(Node(report, "train/1").objective_at, 9);
  ASSERT_EQ(report.best.count("train"), 1u);
  EXPECT_EQ(report.nodes[report.best.at("train")].key, "train/1");
}

TEST(ReportObjectiveTest, MaxModeRanksTheHighestFirst) {
  const Report report = Summarize(WithObjective(SweepData(), "acc", "max"));
  // acc at step 9 rises with lr: 0.3 best, then 0.1, then 0.03.
  EXPECT_EQ(Node(report, "train/0").rank, 1);
  EXPECT_EQ(Node(report, "train/1").rank, 2);
  EXPECT_EQ(Node(report, "train/2").rank, 3);
}

TEST(ReportObjectiveTest, TheBestPointIsNamedFirstWithItsParametersAndTheTableIsInRankOrder) {
  const Report report = Summarize(WithObjective(SweepData(), "loss", "min"));
  std::string md = RenderMarkdown(report);
  EXPECT_THAT(md, HasSubstr("**Best of step train by loss (min): train[lr=0.1] with loss = 0.526316 at step 9 "
                            "(lr=0.1).**"));
  EXPECT_LT(md.find("Best of step"), md.find("## Sweep points"));
  EXPECT_THAT(md, HasSubstr("| rank | point | state | lr | loss last (min) | at step | acc last | GPU-hours |"));
  size_t first = md.find("| 1 | train[lr=0.1]"), second = md.find("| 2 | train[lr=0.3]"),
         third = md.find("| 3 | train[lr=0.03]");
  ASSERT_NE(first, std::string::npos) << md;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  EXPECT_THAT(RenderCsv(report), HasSubstr(",rank,objective,objective_step\n"));
}

TEST(ReportObjectiveTest, StoppedPointsAreCountedAndSayWhy) {
  ReportData data = WithObjective(SweepData(), "loss", "min");
  data.pipeline.nodes[2].state = "stopped";
  data.pipeline.nodes[2].reason = "stopped early: rung at step 3: 1.7 ranks 3 of 3";
  data.pipeline.nodes[1].attempt_history = {{{"reason", "GPU 2 fault (XID 79)"}}};
  const Report report = Summarize(data);
  EXPECT_EQ(report.stopped, 1);
  std::string md = RenderMarkdown(report);
  EXPECT_THAT(md, HasSubstr("(1 stopped early)"));
  EXPECT_THAT(md, HasSubstr("| train[lr=0.03] | stopped | 1 | stopped early: rung at step 3"));
  EXPECT_THAT(md, HasSubstr("| train[lr=0.1] | completed | 2 | attempt 1: GPU 2 fault (XID 79) |"));
}

TEST(ReportHtmlTest, ObjectivePlotsUseALogAxisWhereValuesSpanDecades) {
  ReportData data = WithObjective(SweepData(), "loss", "min");
  data.pipeline.nodes[0].matrix = {{"lr", "0.3"}};
  data.pipeline.nodes[2].matrix = {{"lr", "0.001"}};  // 0.001 .. 0.3: 300×
  const Report report = Summarize(data);
  std::string html = RenderHtml(report, ChartLibrary{});
  EXPECT_THAT(html, HasSubstr("aria-label=\"parallel coordinates of step train\""));
  size_t lines = 0;
  for (size_t at = html.find("<polyline"); at != std::string::npos; at = html.find("<polyline", at + 1)) ++lines;
  EXPECT_EQ(lines, 3u);  // one per ranked point
  EXPECT_THAT(html, HasSubstr("loss vs lr (log axis)"));
  EXPECT_THAT(html, HasSubstr("<code>gpuherd logs 11</code>"));
  EXPECT_THAT(html, HasSubstr("id=\"all-curves\""));
  EXPECT_THAT(html, HasSubstr("max-width:1400px"));
  // Linear where the values span less than two decades.
  const Report linear = Summarize(WithObjective(SweepData(), "loss", "min"));
  EXPECT_THAT(RenderHtml(linear, ChartLibrary{}), HasSubstr(">loss vs lr</text>"));
}

TEST(ReportHtmlTest, OnlyTheTopPointsCurvesAreDrawnByDefault) {
  ReportData data = WithObjective(SweepData(), "loss", "min");
  for (int i = 0; i < 6; ++i) {  // six more points: ranks 4..9 are not in the top 5
    std::string id = "train[extra=" + std::to_string(i) + "]";
    api::PipelineNodeView n = NodeView(id, "train/x" + std::to_string(i), "train");
    n.matrix = {{"lr", "0.5"}};
    n.state = "completed";
    n.attempts = 1;
    data.pipeline.nodes.push_back(std::move(n));
    data.metrics.push_back(MetricLine(id, 1, 1, {{"loss", 5.0 + i}}));
  }
  const Report report = Summarize(data);
  json chart = EmbeddedData(RenderHtml(report, ChartLibrary{}));
  int top = 0;
  for (const json& p : chart["points"]) top += p["top"].get<bool>() ? 1 : 0;
  EXPECT_EQ(chart["points"].size(), 9u);
  EXPECT_EQ(top, 5);
}

TEST(ReportCompareTest, TwoRunsSideBySideWithTheirSharedPoints) {
  const Report a = Summarize(WithObjective(SweepData(), "loss", "min"));
  ReportData other = WithObjective(SweepData(), "loss", "min");
  other.pipeline.summary.id = 8;
  for (api::PipelineMetricLine& m : other.metrics) {
    if (m.node == "train[lr=0.3]") m.values["loss"] = m.values["loss"].get<double>() - 0.25;
  }
  const Report b = Summarize(other);
  std::string md = RenderComparisonMarkdown(a, b);
  EXPECT_THAT(md, HasSubstr("| run | 7 (toy-sweep) | 8 (toy-sweep) |"));
  EXPECT_THAT(md, HasSubstr("| objective | train: loss (min) | train: loss (min) |"));
  // lr 0.3: 0.540541 in 7, 0.290541 in 8.
  EXPECT_THAT(md, HasSubstr("| train[lr=0.3] | 0.540541 | 0.290541 | -0.25 |"));
  EXPECT_THAT(RenderComparisonHtml(a, b), HasSubstr("<h1>pipelines 7 and 8 compared</h1>"));
}

}  // namespace
}  // namespace gpuherd::pipeline
