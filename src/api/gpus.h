// The GPUs as /v1/gpus serves them and `gpuherd gpus --json` prints them:
// the card's facts, its state and latest reading, and what the daemon adds
// (a drain, the failure risk). Field names are part of /v1: add, never rename.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/types.h"
#include "store/records.h"
#include "telemetry/telemetry.h"

namespace gpuherd::api {

// A job holding (part of) a GPU, as the GPU's views list it.
struct GpuJob {
  int64_t id = 0;
  std::string user;
  std::string name;
  int gpu_twentieths = 0;                 // the job's whole request: 20 per GPU
  // A fraction's GPU memory share on this GPU (what its fence enforces); 0
  // for a job that holds whole GPUs.
  uint64_t share_bytes = 0;
  // GPU memory its processes use on this GPU, as the driver reports them
  // (or, for a fenced fraction the driver shows no processes of, as its
  // fence counts them); nullopt when neither says.
  std::optional<uint64_t> used_bytes;
  std::string fence;                      // a fraction's fence state ("active", "preloaded", "off"); else ""
};

// Self-healing's state of a GPU (the daemon's SelfHealService).
struct GpuHealthState {
  std::string state;             // "in_service", "suspect", "quarantined", "requalifying", "retired"
  int64_t since = 0;             // ms since the epoch: when it entered `state`
  std::string reason;            // why (the latest transition's reason)
  std::string rule;              // the rule that decided it, when one did
  nlohmann::json evidence = nlohmann::json::array();  // [{time, kind, xid?, job_id?, detail}]
  int64_t requalify_job = 0;     // the burn-in job while requalifying
  int requalifications = 0;      // passed requalifications
};

struct Gpu {
  gpu::GpuInfo info;
  std::string state = "ok";               // "ok", "lost", or "drained" (an ok GPU kept from work)
  std::optional<gpu::GpuSample> sample;   // the latest answer, if any
  std::string last_error;                 // why it is lost
  bool drained = false;
  std::string drain_reason;
  std::string drain_origin;  // who drained it: operator, fault, alert, burnin, risk
  std::optional<double> failure_risk;     // where the risk model scored it
  // A lost GPU has no `sample` (never its last, stale reading): when it last answered.
  TimeMs last_seen = 0;
  // The latest burn-in's health score (0..100) and verdict ("healthy",
  // "degraded", "unhealthy", "unknown") and when it finished; none unscreened.
  std::optional<int> health_score;
  std::string health_verdict;
  TimeMs health_at = 0;
  std::vector<GpuJob> jobs;               // running or stopping jobs on it (the daemon's views only)
  std::optional<GpuHealthState> health_state;  // from a daemon; absent elsewhere
};

struct Fleet {
  std::string driver;
  bool simulated = false;
  std::string sim_reason;                 // non-empty when the fleet is simulated
  std::string hostname;
  std::vector<Gpu> gpus;
  std::vector<std::vector<gpu::Link>> topology;  // [i][j]: how GPU i reaches GPU j
  std::vector<std::vector<int>> nvlinks;          // [i][j]: NVLinks between them; empty when unknown
  std::vector<std::vector<bool>> pcie_multiple;   // [i][j]: several PCIe bridges (PXB); empty when unknown
};

// {"id", "user", "name", "gpu_twentieths", "share_bytes", "used_bytes"?, "fence"?}
void to_json(nlohmann::json& j, const GpuJob& job);
void from_json(const nlohmann::json& j, GpuJob& job);
// {"state", "since", "reason", "rule"?, "evidence", "requalify_job"?, "requalifications"}
void to_json(nlohmann::json& j, const GpuHealthState& h);
void from_json(const nlohmann::json& j, GpuHealthState& h);
// {<info>, "state", "sample"?, "last_seen"?, "last_error"?, "drained"?, "drain_reason"?,
//  "drain_origin"?, "failure_risk"?, "health_score"?, "health_verdict"?, "health_at"?,
//  "jobs": [GpuJob], "health_state"?: GpuHealthState}
void to_json(nlohmann::json& j, const Gpu& g);
void from_json(const nlohmann::json& j, Gpu& g);
// {"driver", "simulated", "sim_reason", "hostname", "gpus", "topology": [[link names]],
//  "nvlinks"?: [[counts]], "pcie_multiple"?: [[bools]]}
void to_json(nlohmann::json& j, const Fleet& f);
void from_json(const nlohmann::json& j, Fleet& f);

// GPU `index` of the telemetry's fleet as it stands now.
Gpu GpuOf(const gpu::GpuInfo& info, const telemetry::Telemetry& telemetry, int index);
Fleet FleetOf(const gpu::Fleet& fleet, const telemetry::Telemetry& telemetry, const std::string& sim_reason,
              const std::string& hostname);
// Marks an ok GPU drained for `reason`.
void MarkDrained(Gpu& g, const std::string& reason, const std::string& origin = "");
// Sets the health from the GPU's latest burn-in.
void SetHealth(Gpu& g, const store::BurnInRecord& latest);

// {"minute", "samples", "failures", "stats": {metric: {min, mean, max}}, "xid_count",
//  "throttle_reasons_seen", "pcie_replay_count"?, "ecc_sbe"?, "ecc_dbe"?}
nlohmann::json RollupJson(const store::RollupRecord& rollup);

}  // namespace gpuherd::api
