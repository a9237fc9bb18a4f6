#include "cli/pipeline_format.h"

#include <map>

#include <fmt/format.h>

#include "api/decode.h"
#include "cli/job_format.h"
#include "cli/table.h"

namespace gpuherd::cli {
namespace {

using nlohmann::json;

// A value a job logged, as text for the terminal.
std::string Value(const json& value) {
  if (value.is_number_float()) return fmt::format("{:.4g}", value.get<double>());
  if (value.is_string()) return Printable(value.get<std::string>());
  return value.is_null() ? "nan" : Printable(value.dump());  // the daemon writes NaN as null
}

// A field of the daemon's reply that a user or a job wrote (a name, a node's
// id with its parameters, a reason), escaped for the terminal.
std::string Text(const json& object, const char* key) { return Printable(api::FieldText(object, key)); }

std::string NodeStateCell(const std::string& raw_state, bool color) {
  const std::string state = Printable(raw_state);
  if (state == "skipped" || state == "cancelled") return Colored(state, kYellow, color);
  if (state == "completed" || state == "succeeded") return Colored(state, kGreen, color);
  return StateCell(state == "active" ? "running" : state, color);
}

// The nodes array of a detail reply, by reference (value() would copy it).
const json& Nodes(const json& pipeline) {
  static const json kNone = json::array();
  if (!pipeline.is_object()) return kNone;
  auto it = pipeline.find("nodes");
  return it != pipeline.end() && it->is_array() ? *it : kNone;
}

// Counts the nodes of a detail reply, in the listing's terms.
json CountNodes(const json& pipeline) {
  json counts = {{"total", 0}, {"completed", 0}, {"failed", 0}, {"running", 0}, {"waiting", 0}, {"skipped", 0}, {"stopped", 0}};
  for (const json& node : Nodes(pipeline)) {
    counts["total"] = counts["total"].get<int>() + 1;
    std::string state = api::FieldText(node, "state");
    if (state == "active" || state == "pending") state = "running";
    if (state == "cancelled") state = "skipped";
    if (counts.contains(state)) counts[state] = counts[state].get<int>() + 1;
  }
  return counts;
}

}  // namespace

std::string LatestMetricCell(const json& latest) {
  if (!latest.is_object() || latest.empty()) return "-";
  std::string out;
  if (auto step = latest.find("step"); step != latest.end()) out = "step " + Value(*step);
  int shown = 0;
  for (const auto& [name, value] : latest.items()) {  // nlohmann orders keys by name
    if (name == "step" || name == "time" || name == "epoch") continue;
    if (shown++ == 3) break;
    out += (out.empty() ? "" : " ") + Printable(name) + "=" + Value(value);  // the job chose the name
  }
  return out.empty() ? "-" : out;
}

std::string NodeGpusCell(const json& node) {
  std::string out;
  for (const json& gpu : node.value("gpus", json::array())) out += (out.empty() ? "" : ",") + Value(gpu);
  return out.empty() ? "-" : out;
}

std::string NodeElapsedCell(const json& node, TimeMs now) {
  TimeMs started = api::FieldInt(node, "started"), ended = api::FieldInt(node, "ended");
  if (started <= 0) return "-";
  TimeMs end = ended > 0 ? ended : now;
  return end >= started ? FormatDuration(end - started) : "-";
}

std::string NodeCountsCell(const json& counts) {
  if (!counts.is_object()) return "-";
  // A point stopped early is a result, not a failure: it counts as done.
  const int64_t completed = api::FieldInt(counts, "completed"), stopped = api::FieldInt(counts, "stopped");
  std::string out = fmt::format("{}/{} done", completed + stopped, api::FieldInt(counts, "total"));
  if (stopped > 0) out += fmt::format(": {} completed, {} stopped early", completed, stopped);
  for (const char* kind : {"failed", "running", "skipped"}) {
    if (int64_t n = api::FieldInt(counts, kind); n > 0) out += fmt::format(", {} {}", n, kind);
  }
  return out;
}

std::string PipelinesTable(const json& pipelines, bool color) {
  Table table({"ID", "NAME", "USER", "STATE", "NODES", "CREATED"});
  for (const json& p : pipelines) {
    std::string state = api::FieldText(p, "outcome").empty() ? api::FieldText(p, "state") : api::FieldText(p, "outcome");
    table.AddRow({Text(p, "id"), Text(p, "name"), Text(p, "user"),
                  NodeStateCell(state, color), NodeCountsCell(p.value("nodes", json())),
                  api::FieldInt(p, "created") > 0 ? FormatTimeUtc(api::FieldInt(p, "created")) : "-"});
  }
  return table.Render({0});
}

std::string ProgressTable(const json& pipeline, TimeMs now, bool color) {
  std::string state = api::FieldText(pipeline, "outcome").empty() ? api::FieldText(pipeline, "state") : api::FieldText(pipeline, "outcome");
  std::string out = fmt::format("pipeline {} {}: {}, {}\n", Text(pipeline, "id"), Text(pipeline, "name"),
                                Printable(state), NodeCountsCell(CountNodes(pipeline)));
  // With an objective, the best point first and a RANK column.
  const json best_points = pipeline.value("best_points", json::object());
  const json objectives = pipeline.value("objectives", json::object());
  for (const auto& [step, b] : best_points.items()) {
    const json o = objectives.value(step, json::object());
    out += Printable(fmt::format("best of {} by {} ({}): {} with {} = {} at step {}", step, api::FieldText(o, "metric"),
                       api::FieldText(o, "mode"), api::FieldText(b, "node"), api::FieldText(b, "metric"),
                       b.contains("value") && b["value"].is_number() ? fmt::format("{:.6g}", b["value"].get<double>())
                                                                     : "-",
                       api::FieldText(b, "step"))) + "\n";
  }
  for (const auto& [step, o] : objectives.items()) {
    if (!o.is_object()) continue;
    if (std::string w = api::FieldText(o, "warning"); !w.empty()) out += Printable(fmt::format("{}: {}", step, w)) + "\n";
  }
  const bool ranked = !objectives.empty();
  // JOB is the node's latest job: what `gpuherd logs` and `show` take.
  std::vector<std::string> header = {"NODE", "STATE", "JOB", "GPU", "ELAPSED", "ATTEMPTS", "LATEST"};
  if (ranked) header.insert(header.begin(), "RANK");
  Table table(header);
  for (const json& node : Nodes(pipeline)) {
    std::string node_state = api::FieldText(node, "state");
    std::string latest = LatestMetricCell(node.value("latest_metrics", json()));
    if ((node_state == "failed" || node_state == "skipped" || node_state == "stopped") &&
        !api::FieldText(node, "reason").empty()) {
      latest = Text(node, "reason");
    }
    const int64_t job = api::FieldInt(node, "job_id");
    std::vector<std::string> row = {Text(node, "id"), NodeStateCell(node_state, color),
                                    job > 0 ? std::to_string(job) : "-", NodeGpusCell(node),
                                    NodeElapsedCell(node, now), std::to_string(api::FieldInt(node, "attempts")), latest};
    if (ranked) {
      const json o = node.value("objective", json::object());
      row.insert(row.begin(), api::FieldInt(o, "rank") > 0 ? std::to_string(api::FieldInt(o, "rank")) : "-");
    }
    table.AddRow(row);
  }
  out += table.Render(ranked ? std::vector<size_t>{0, 3, 5, 6} : std::vector<size_t>{2, 4, 5});
  // Why earlier attempts ended (a requeue for a GPU fault or a preemption, a
  // failure with the end of its stderr), node by node.
  for (const json& node : Nodes(pipeline)) {
    const json history = node.value("attempt_history", json::array());
    if (!history.is_array()) continue;
    for (const json& a : history) {
      if (!a.is_object()) continue;
      std::string line = fmt::format("{} job {}: {}: {}", api::FieldText(node, "id"), api::FieldText(a, "job"), api::FieldText(a, "state"),
                                     api::FieldText(a, "reason"));
      const json tail = a.value("stderr_tail", json::array());
      if (tail.is_array() && !tail.empty() && tail.back().is_string()) {
        line += " (stderr: " + tail.back().get<std::string>() + ")";
      }
      out += Printable(line) + "\n";
    }
  }
  return out;
}

std::string RunStartedLines(int64_t id, int64_t nodes) {
  return fmt::format("pipeline {}: {} node{}\n  follow it:   gpuherd pipeline show {}\n  its report:  gpuherd report {}\n",
                     id, nodes, nodes == 1 ? "" : "s", id, id);
}

bool PipelineFinished(const json& pipeline) {
  if (api::FieldInt(pipeline, "finished") > 0 || !api::FieldText(pipeline, "outcome").empty()) return true;
  std::string state = api::FieldText(pipeline, "state");
  return state == "succeeded" || state == "failed" || state == "cancelled" || state == "completed";
}

bool PipelineSucceeded(const json& pipeline) {
  std::string outcome = api::FieldText(pipeline, "outcome");
  if (outcome.empty()) outcome = api::FieldText(pipeline, "state");
  return outcome == "succeeded" || outcome == "completed";
}

std::vector<std::string> ProgressChanges(const json& before, const json& after, TimeMs now) {
  std::map<std::string, const json*> previous;
  for (const json& node : Nodes(before)) previous[api::FieldText(node, "id")] = &node;
  std::vector<std::string> lines;
  for (const json& node : Nodes(after)) {
    std::string id = api::FieldText(node, "id"), state = api::FieldText(node, "state");
    int64_t attempts = api::FieldInt(node, "attempts");
    auto it = previous.find(id);
    if (it == previous.end() ? state == "waiting"
                             : api::FieldText(*it->second, "state") == state && api::FieldInt(*it->second, "attempts") == attempts) {
      continue;
    }
    std::string line = Printable(id) + " " + Printable(state == "active" ? "running" : state);
    if (state == "running" || state == "active") {
      if (std::string gpus = NodeGpusCell(node); gpus != "-") line += " on GPU " + gpus;
      if (attempts > 1) line += fmt::format(" (attempt {})", attempts);
    } else if (state == "completed" || state == "failed") {
      line += " after " + NodeElapsedCell(node, now);
      if (std::string latest = LatestMetricCell(node.value("latest_metrics", json())); latest != "-") {
        line += ", " + latest;
      }
      if (state == "failed" && !api::FieldText(node, "reason").empty()) line += " (" + Text(node, "reason") + ")";
    } else if (!api::FieldText(node, "reason").empty()) {
      line += " (" + Text(node, "reason") + ")";
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace gpuherd::cli
