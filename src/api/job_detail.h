// What `gpuherd show` adds to a job's view (/v1/jobs/{id}): its whole spec
// and every attempt (store::AttemptRecord) with what it used of its GPUs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "store/records.h"

namespace gpuherd::api {

// The spec as the queue understood it (sched::JobSpec). command, cwd and env
// are left out for callers who may not see them (routes/access.h).
struct JobSpecView {
  std::vector<std::string> command;
  std::string cwd;
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> labels;
  std::vector<int64_t> depends_on;
  int gpu_twentieths = 0;
  uint64_t gpu_mem_bytes = 0;
  std::string model;
  std::optional<int> min_cc;          // ×10: 80 is 8.0
  int cpus = 0;
  uint64_t mem_bytes = 0;
  int priority = 0;
  DurationMs time_limit_ms = 0;       // 0: none
  DurationMs checkpoint_grace_ms = 0;
  bool preemptible = false;
  bool mixed_models = false;
  int max_restarts = 0;
};

void to_json(nlohmann::json& j, const JobSpecView& s);
void from_json(const nlohmann::json& j, JobSpecView& s);

// The ends an attempt can have, as end_cause says them.
inline constexpr const char* kAttemptEndCauses[] = {
    "completed", "failed",          "preempted",     "requeued",   "gpu_fault",    "cancelled",
    "time_limit", "supervisor_lost", "out_of_memory", "gpu_memory", "launch_failed"};

struct AttemptView {
  int attempt = 0;
  std::vector<std::string> gpu_uuids;
  std::vector<int> gpus;              // positions in the fleet now (-1: not present)
  int gpu_twentieths = 0;
  TimeMs started = 0, ended = 0;      // ended 0 while it runs
  std::string end_cause;              // empty while it runs
  std::optional<int> exit_code, exit_signal;
  std::string reason;
  int util_samples = 0;
  std::optional<double> gpu_util_mean;        // %
  std::optional<uint64_t> peak_gpu_mem_bytes;
  std::string logs;  // the attempt's stdout and stderr folder; empty for who may not read it
};

void to_json(nlohmann::json& j, const AttemptView& a);
void from_json(const nlohmann::json& j, AttemptView& a);
// `positions`: the fleet position of each of the record's GPU UUIDs (-1 for
// a GPU not present now), looked up by the caller.
AttemptView AttemptViewOf(const store::AttemptRecord& r, const std::vector<int>& positions);
// The record's GPU UUIDs (its gpus_json), empty when unreadable.
std::vector<std::string> AttemptGpuUuids(const store::AttemptRecord& r);

// How far the daemon read the job's metrics file (daemon/metrics_intake.h):
// lines beyond a job's first ones are thinned, and a flood is read over many
// rounds ("behind" until it is read to the end).
struct MetricIntakeView {
  int64_t lines_read = 0;
  int64_t lines_kept = 0;
  int64_t lines_skipped = 0;  // too long, or not a metric line
  bool behind = false;
};

void to_json(nlohmann::json& j, const MetricIntakeView& m);
void from_json(const nlohmann::json& j, MetricIntakeView& m);
// "190,000 lines read, 3,120 kept (thinned); reading behind the file".
std::string MetricIntakeText(const MetricIntakeView& m);

// "completed", "GPU fault", "time limit": an end cause for people.
std::string EndCauseText(const std::string& cause);

}  // namespace gpuherd::api
