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

struct Gpu {
  gpu::GpuInfo info;
  std::string state = "ok";               // "ok", "lost", or "drained" (an ok GPU kept from work)
  std::optional<gpu::GpuSample> sample;   // the latest answer, if any
  std::string last_error;                 // why it is lost
  bool drained = false;
  std::string drain_reason;
  std::string drain_origin;  // who drained it: operator, fault, alert, burnin, risk
  std::optional<double> failure_risk;     // where the risk model scored it
};

struct Fleet {
  std::string driver;
  bool simulated = false;
  std::string sim_reason;                 // non-empty when the fleet is simulated
  std::string hostname;
  std::vector<Gpu> gpus;
  std::vector<std::vector<gpu::Link>> topology;  // [i][j]: how GPU i reaches GPU j
};

// {<info>, "state", "sample"?, "last_error"?, "drained"?, "drain_reason"?, "failure_risk"?}
void to_json(nlohmann::json& j, const Gpu& g);
void from_json(const nlohmann::json& j, Gpu& g);
// {"driver", "simulated", "sim_reason", "hostname", "gpus", "topology": [[link names]]}
void to_json(nlohmann::json& j, const Fleet& f);
void from_json(const nlohmann::json& j, Fleet& f);

// GPU `index` of the telemetry's fleet as it stands now.
Gpu GpuOf(const gpu::GpuInfo& info, const telemetry::Telemetry& telemetry, int index);
Fleet FleetOf(const gpu::Fleet& fleet, const telemetry::Telemetry& telemetry, const std::string& sim_reason,
              const std::string& hostname);
// Marks an ok GPU drained for `reason`.
void MarkDrained(Gpu& g, const std::string& reason, const std::string& origin = "");

// {"minute", "samples", "failures", "stats": {metric: {min, mean, max}}, "xid_count",
//  "throttle_reasons_seen", "pcie_replay_count"?, "ecc_sbe"?, "ecc_dbe"?}
nlohmann::json RollupJson(const store::RollupRecord& rollup);

}  // namespace gpuherd::api
