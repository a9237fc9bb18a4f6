#include "api/pipelines.h"

#include <initializer_list>
#include <utility>

namespace gpuherd::api {

using nlohmann::json;

Result<PipelineCreateRequest> ParsePipelineCreateRequest(const json& body) {
  if (!body.is_object()) {
    return InvalidArgument("body must be a JSON object {\"yaml\": \"<the pipeline file>\", \"source\": \"path\", "
                           "\"base_dir\": \"/abs/dir\", \"params\": {\"key\": \"value\"}}");
  }
  for (const auto& [key, value] : body.items()) {
    if (key != "yaml" && key != "source" && key != "base_dir" && key != "params") {
      return InvalidArgument("unknown field '" + key + "'; allowed: yaml, source, base_dir, params");
    }
  }
  if (!body.contains("yaml") || !body["yaml"].is_string()) {
    return InvalidArgument("field 'yaml' (the pipeline file's text, a string) is required");
  }
  PipelineCreateRequest r;
  r.yaml = body["yaml"].get<std::string>();
  for (const char* key : {"source", "base_dir"}) {
    if (body.contains(key) && !body[key].is_string()) return InvalidArgument(std::string(key) + " must be a string");
  }
  r.source = body.value("source", std::string("pipeline.yaml"));
  r.base_dir = body.value("base_dir", std::string());
  if (body.contains("params")) {
    if (!body["params"].is_object()) return InvalidArgument("params must be an object {\"key\": \"value\"}");
    for (const auto& [k, v] : body["params"].items()) {
      if (v.is_object() || v.is_array() || v.is_null()) {
        return InvalidArgument("parameter '" + k + "' must be a string or a number, like -p " + k + "=5");
      }
      r.params[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  return r;
}

void to_json(json& j, const PipelineCreated& v) { j = {{"id", v.id}, {"nodes", v.nodes}}; }

void to_json(json& j, const PipelineSummary& v) {
  j = {{"id", v.id},          {"name", v.name},         {"state", v.state},
       {"outcome", v.outcome}, {"created", v.created},  {"finished", v.finished},
       {"user", v.user},       {"source", v.source},    {"nodes", v.node_counts}};
}

void to_json(json& j, const PipelineDetail& v) {
  j = v.summary;
  j["run_dir"] = v.run_dir;
  j["params"] = v.params;
  j["backend"] = v.backend;
  json objectives = json::object();
  for (const auto& [step, o] : v.objectives) {
    objectives[step] = {{"metric", o.metric}, {"mode", o.mode}, {"summary", o.summary}};
    if (!o.warning.empty()) objectives[step]["warning"] = o.warning;
  }
  j["objectives"] = std::move(objectives);
  json best_points = json::object();
  for (const auto& [step, b] : v.best_points) {
    best_points[step] = {{"node", b.node}, {"metric", b.metric}, {"value", b.value}, {"step", b.step}};
  }
  j["best_points"] = std::move(best_points);
  json nodes = json::array();
  for (const PipelineNodeView& n : v.nodes) {
    json matrix = json::object();
    for (const auto& [name, value] : n.matrix) matrix[name] = value;
    json node = {{"id", n.id},
                 {"key", n.key},
                 {"step", n.step},
                 {"matrix", std::move(matrix)},
                 {"state", n.state},
                 {"attempts", n.attempts},
                 {"retries", n.retries},
                 {"job_id", n.job_id},
                 {"slurm_job_id", n.slurm_job_id ? json(*n.slurm_job_id) : json()},
                 {"gpus", n.gpus},
                 {"started", n.started},
                 {"ended", n.ended},
                 {"gpu_seconds", n.gpu_seconds},
                 {"reason", n.reason},
                 {"needs", n.needs},
                 {"latest_metrics", n.latest_metrics},
                 {"best", json(n.best)},
                 {"attempt_history", n.attempt_history}};
    if (n.objective) {
      node["objective"] = {{"value", n.objective->value}, {"step", n.objective->step}, {"rank", n.objective->rank}};
    }
    nodes.push_back(std::move(node));
  }
  j["nodes"] = std::move(nodes);
}

namespace {

// The text fields of an object; "" for those it lacks.
void ReadTexts(const json& j, std::initializer_list<std::pair<const char*, std::string*>> fields) {
  for (const auto& [key, field] : fields) *field = j.value(key, std::string());
}

void ReadTimes(const json& j, std::initializer_list<std::pair<const char*, TimeMs*>> fields) {
  for (const auto& [key, field] : fields) *field = j.value(key, TimeMs{0});
}

}  // namespace

void from_json(const json& j, PipelineSummary& v) {
  v.id = j.value("id", int64_t{0});
  ReadTexts(j, {{"name", &v.name}, {"state", &v.state}, {"outcome", &v.outcome}, {"user", &v.user},
                {"source", &v.source}});
  ReadTimes(j, {{"created", &v.created}, {"finished", &v.finished}});
  v.node_counts.clear();
  if (auto it = j.find("nodes"); it != j.end() && it->is_object()) v.node_counts = it->get<std::map<std::string, int64_t>>();
}

void from_json(const json& j, PipelineNodeView& v) {
  ReadTexts(j, {{"id", &v.id}, {"key", &v.key}, {"step", &v.step}, {"state", &v.state}, {"reason", &v.reason}});
  v.matrix.clear();
  if (auto it = j.find("matrix"); it != j.end() && it->is_object()) {
    for (const auto& [name, value] : it->items()) {
      v.matrix.emplace_back(name, value.is_string() ? value.get<std::string>() : value.dump());
    }
  }
  v.attempts = j.value("attempts", 0);
  v.retries = j.value("retries", 0);
  v.job_id = j.value("job_id", int64_t{0});
  v.slurm_job_id.reset();
  if (auto it = j.find("slurm_job_id"); it != j.end() && !it->is_null()) v.slurm_job_id = it->get<int64_t>();
  v.gpus = j.value("gpus", std::vector<int>());
  ReadTimes(j, {{"started", &v.started}, {"ended", &v.ended}});
  v.gpu_seconds = j.value("gpu_seconds", 0.0);
  v.needs = j.value("needs", std::vector<std::string>());
  v.latest_metrics = j.value("latest_metrics", json::object());
  v.best = j.value("best", std::map<std::string, double>());
  v.attempt_history = j.value("attempt_history", json::array());
  v.objective.reset();
  if (auto it = j.find("objective"); it != j.end() && it->is_object()) {
    v.objective = PipelineNodeView::Objective{it->value("value", 0.0), it->value("step", int64_t{0}),
                                              it->value("rank", 0)};
  }
}

void from_json(const json& j, PipelineDetail& v) {
  const json& nodes = j.at("nodes");  // throws where there is none: not a run's detail
  v.summary = j.get<PipelineSummary>();
  v.run_dir = j.value("run_dir", std::string());
  v.params = j.value("params", std::map<std::string, std::string>());
  v.backend = j.value("backend", std::string());
  v.objectives.clear();
  if (auto it = j.find("objectives"); it != j.end() && it->is_object()) {
    for (const auto& [step, o] : it->items()) {
      v.objectives[step] = {o.value("metric", ""), o.value("mode", ""), o.value("summary", "last"),
                            o.value("warning", "")};
    }
  }
  v.best_points.clear();
  if (auto it = j.find("best_points"); it != j.end() && it->is_object()) {
    for (const auto& [step, b] : it->items()) {
      v.best_points[step] = {b.value("node", ""), b.value("metric", ""), b.value("value", 0.0),
                             b.value("step", int64_t{0})};
    }
  }
  v.nodes = nodes.get<std::vector<PipelineNodeView>>();
}

std::string PointParamsJson(const std::vector<std::pair<std::string, std::string>>& matrix) {
  json params = json::object();
  for (const auto& [name, value] : matrix) params[name] = value;
  // A value is the file's text, not always UTF-8: replaced, never thrown on.
  return params.dump(-1, ' ', false, json::error_handler_t::replace);
}

void from_json(const json& j, PipelineMetricLine& v) {
  v.node = j.value("node", std::string());
  v.job = j.value("job", int64_t{0});
  v.attempt = j.value("attempt", 0);
  v.step.reset();
  if (auto it = j.find("step"); it != j.end() && !it->is_null()) v.step = it->get<int64_t>();
  v.time = j.value("time", TimeMs{0});
  v.values = j.value("values", json::object());
}

void to_json(json& j, const PipelineMetricLine& v) {
  j = {{"node", v.node},
       {"job", v.job},
       {"attempt", v.attempt},
       {"step", v.step ? json(*v.step) : json(nullptr)},
       {"time", v.time},
       {"values", v.values}};
}

}  // namespace gpuherd::api
