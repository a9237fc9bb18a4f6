// Pipeline runs as /v1/pipelines serves them: the PipelineService answers
// with these types, the routes write them (to_json) and the CLI reads them
// (from_json takes what it knows and ignores the rest; a field of the wrong
// type throws, which Decode turns into a Status). A metric line is the job's
// own JSON (any names, any numbers): it stays JSON here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::api {

// POST /v1/pipelines: {"yaml", "source"?, "base_dir"?, "params"?}.
struct PipelineCreateRequest {
  std::string yaml;                      // the pipeline file's text
  std::string source = "pipeline.yaml";  // its path, for messages
  std::string base_dir;                  // its folder (absolute), or empty
  std::map<std::string, std::string> params;  // overrides, -p key=value
};
// The request from its JSON; kInvalidArgument names the field to fix.
Result<PipelineCreateRequest> ParsePipelineCreateRequest(const nlohmann::json& body);

struct PipelineCreated {
  int64_t id = 0;
  size_t nodes = 0;
};
void to_json(nlohmann::json& j, const PipelineCreated& v);

// One run in the listing.
struct PipelineSummary {
  int64_t id = 0;
  std::string name, state, outcome, user, source;
  TimeMs created = 0, finished = 0;
  // Nodes per state (completed, failed, running, waiting, skipped,
  // cancelled, stopped) and "total".
  std::map<std::string, int64_t> node_counts;
};
void to_json(nlohmann::json& j, const PipelineSummary& v);
// node_counts only where "nodes" is an object (a detail has the node list there).
void from_json(const nlohmann::json& j, PipelineSummary& v);

struct PipelineNodeView {
  std::string id, key, step;
  std::vector<std::pair<std::string, std::string>> matrix;  // the point's values, in matrix order
  std::string state;  // the node's, with "active" told apart as pending or running
  int attempts = 0, retries = 0;
  int64_t job_id = 0;
  std::optional<int64_t> slurm_job_id;  // a Slurm backend's job
  std::vector<int> gpus;
  TimeMs started = 0, ended = 0;
  double gpu_seconds = 0;
  std::string reason;
  std::vector<std::string> needs;
  nlohmann::json latest_metrics = nlohmann::json::object();  // the node's latest metric line
  std::map<std::string, double> best;  // each metric's best value (lower or higher by its name)
  nlohmann::json attempt_history = nlohmann::json::array();  // as stored
  struct Objective {
    double value = 0;
    int64_t step = 0;
    int rank = 0;  // among its step's points, 1 = best
  };
  std::optional<Objective> objective;
};

// One run as `pipeline show` has it.
struct PipelineDetail {
  PipelineSummary summary;
  std::string run_dir;
  std::map<std::string, std::string> params;
  std::string backend;
  struct Objective {
    std::string metric, mode;  // "min" or "max"
    std::string summary = "last";  // "last" or "best": which value ranks a point
    std::string warning;           // e.g. "objective 'accuracy' not logged; seen: acc, loss"
  };
  std::map<std::string, Objective> objectives;  // by step
  struct BestPoint {
    std::string node, metric;
    double value = 0;
    int64_t step = 0;
  };
  std::map<std::string, BestPoint> best_points;  // by step
  std::vector<PipelineNodeView> nodes;
};
// The summary's fields, with "nodes" the node list instead of the counts.
void to_json(nlohmann::json& j, const PipelineDetail& v);
// Refuses (throws) a reply without the "nodes" list.
void from_json(const nlohmann::json& j, PipelineDetail& v);
void from_json(const nlohmann::json& j, PipelineNodeView& v);

// A sweep point's parameters as its job's GPUHERD_PARAMS carries them: a
// JSON object {"lr": "0.1", "seed": "1"}, the values as the matrix wrote them.
std::string PointParamsJson(const std::vector<std::pair<std::string, std::string>>& matrix);

struct PipelineMetricLine {
  std::string node;
  int64_t job = 0;
  int attempt = 0;
  std::optional<int64_t> step;
  TimeMs time = 0;
  nlohmann::json values;  // the line less step and time
};
void to_json(nlohmann::json& j, const PipelineMetricLine& v);
void from_json(const nlohmann::json& j, PipelineMetricLine& v);

}  // namespace gpuherd::api
