#include "api/pipelines.h"

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
  for (const auto& [step, o] : v.objectives) objectives[step] = {{"metric", o.metric}, {"mode", o.mode}};
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

void to_json(json& j, const PipelineMetricLine& v) {
  j = {{"node", v.node},
       {"job", v.job},
       {"attempt", v.attempt},
       {"step", v.step ? json(*v.step) : json(nullptr)},
       {"time", v.time},
       {"values", v.values}};
}

}  // namespace gpuherd::api
