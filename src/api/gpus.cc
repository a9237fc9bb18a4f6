#include "api/gpus.h"

#include "gpu/json.h"

namespace gpuherd::api {

using nlohmann::json;

void to_json(json& j, const GpuJob& job) {
  j = {{"id", job.id}, {"user", job.user}, {"name", job.name}, {"gpu_twentieths", job.gpu_twentieths},
       {"share_bytes", job.share_bytes}};
  if (job.used_bytes) j["used_bytes"] = *job.used_bytes;
  if (!job.fence.empty()) j["fence"] = job.fence;
}

void from_json(const json& j, GpuJob& job) {
  job.id = j.value("id", int64_t{0});
  job.user = j.value("user", std::string());
  job.name = j.value("name", std::string());
  job.gpu_twentieths = j.value("gpu_twentieths", 0);
  job.share_bytes = j.value("share_bytes", uint64_t{0});
  if (auto it = j.find("used_bytes"); it != j.end() && it->is_number_unsigned()) job.used_bytes = it->get<uint64_t>();
  job.fence = j.value("fence", std::string());
}

void to_json(json& j, const GpuHealthState& h) {
  j = {{"state", h.state},
       {"since", h.since},
       {"reason", h.reason},
       {"evidence", h.evidence},
       {"requalifications", h.requalifications}};
  if (!h.rule.empty()) j["rule"] = h.rule;
  if (h.requalify_job) j["requalify_job"] = h.requalify_job;
}

void from_json(const json& j, GpuHealthState& h) {
  h.state = j.value("state", std::string());
  h.since = j.value("since", int64_t{0});
  h.reason = j.value("reason", std::string());
  h.rule = j.value("rule", std::string());
  if (auto it = j.find("evidence"); it != j.end() && it->is_array()) h.evidence = *it;
  h.requalify_job = j.value("requalify_job", int64_t{0});
  h.requalifications = j.value("requalifications", 0);
}

void to_json(json& j, const Gpu& g) {
  j = g.info;
  j["state"] = g.state;
  if (g.sample) j["sample"] = *g.sample;
  if (g.last_seen) j["last_seen"] = g.last_seen;
  if (g.health_score) {
    j["health_score"] = *g.health_score;
    j["health_verdict"] = g.health_verdict;
    j["health_at"] = g.health_at;
  }
  j["jobs"] = g.jobs;
  if (!g.last_error.empty()) j["last_error"] = g.last_error;
  if (g.drained) {
    j["drained"] = true;
    j["drain_reason"] = g.drain_reason;
    if (!g.drain_origin.empty()) j["drain_origin"] = g.drain_origin;
  }
  if (g.failure_risk) j["failure_risk"] = *g.failure_risk;
  if (g.health_state) j["health_state"] = *g.health_state;
}

void from_json(const json& j, Gpu& g) {
  g.info = j.get<gpu::GpuInfo>();
  g.state = j.value("state", std::string("ok"));
  if (auto it = j.find("sample"); it != j.end() && it->is_object()) g.sample = it->get<gpu::GpuSample>();
  g.last_error = j.value("last_error", std::string());
  g.drained = j.value("drained", false);
  g.drain_reason = j.value("drain_reason", std::string());
  g.drain_origin = j.value("drain_origin", std::string());
  if (auto it = j.find("failure_risk"); it != j.end() && it->is_number()) g.failure_risk = it->get<double>();
  g.last_seen = j.value("last_seen", TimeMs{0});
  if (auto it = j.find("health_score"); it != j.end() && it->is_number_integer()) g.health_score = it->get<int>();
  g.health_verdict = j.value("health_verdict", std::string());
  g.health_at = j.value("health_at", TimeMs{0});
  g.jobs = j.value("jobs", std::vector<GpuJob>());
  if (auto it = j.find("health_state"); it != j.end() && it->is_object()) {
    g.health_state = it->get<GpuHealthState>();
  }
}

void to_json(json& j, const Fleet& f) {
  json topology = json::array();
  for (const auto& row : f.topology) {
    json names = json::array();
    for (gpu::Link link : row) names.push_back(gpu::LinkName(link));
    topology.push_back(names);
  }
  j = {{"driver", f.driver},     {"simulated", f.simulated}, {"sim_reason", f.sim_reason},
       {"hostname", f.hostname}, {"gpus", f.gpus},           {"topology", topology}};
  if (!f.nvlinks.empty()) j["nvlinks"] = f.nvlinks;
  if (!f.pcie_multiple.empty()) j["pcie_multiple"] = f.pcie_multiple;
}

void from_json(const json& j, Fleet& f) {
  f.driver = j.value("driver", std::string());
  f.simulated = j.value("simulated", false);
  f.sim_reason = j.value("sim_reason", std::string());
  f.hostname = j.value("hostname", std::string());
  f.gpus = j.value("gpus", std::vector<Gpu>());
  f.topology.clear();
  for (const json& row : j.value("topology", json::array())) {
    std::vector<gpu::Link>& links = f.topology.emplace_back();
    for (const json& name : row) links.push_back(gpu::ParseLink(name.is_string() ? name.get<std::string>() : ""));
  }
  // A matrix of another shape than the topology's is ignored, never indexed out of range.
  auto square = [&](const auto& m) {
    if (m.size() != f.topology.size()) return false;
    for (const auto& row : m) if (row.size() != m.size()) return false;
    return true;
  };
  f.nvlinks = j.value("nvlinks", std::vector<std::vector<int>>());
  if (!square(f.nvlinks)) f.nvlinks.clear();
  f.pcie_multiple = j.value("pcie_multiple", std::vector<std::vector<bool>>());
  if (!square(f.pcie_multiple)) f.pcie_multiple.clear();
}

Gpu GpuOf(const gpu::GpuInfo& info, const telemetry::Telemetry& telemetry, int index) {
  Gpu g;
  g.info = info;
  const bool lost = telemetry.State(index) == telemetry::GpuState::kLost;
  g.state = lost ? "lost" : "ok";
  // A lost GPU's newest reading is from before it stopped answering: never shown as current.
  if (const gpu::GpuSample* latest = telemetry.Latest(index)) {
    if (lost) g.last_seen = latest->time;
    else g.sample = *latest;
  }
  g.last_error = telemetry.LostReason(index);
  return g;
}

Fleet FleetOf(const gpu::Fleet& fleet, const telemetry::Telemetry& telemetry, const std::string& sim_reason,
              const std::string& hostname) {
  Fleet f;
  f.driver = fleet.driver_name;
  f.simulated = fleet.simulated;
  f.sim_reason = sim_reason;
  f.hostname = hostname;
  f.topology = fleet.topology;
  f.nvlinks = fleet.nvlinks;
  f.pcie_multiple = fleet.pcie_multiple;
  for (size_t i = 0; i < fleet.gpus.size(); ++i) f.gpus.push_back(GpuOf(fleet.gpus[i], telemetry, static_cast<int>(i)));
  return f;
}

void MarkDrained(Gpu& g, const std::string& reason, const std::string& origin) {
  g.drained = true;
  g.drain_reason = reason;
  g.drain_origin = origin;
  if (g.state == "ok") g.state = "drained";
}

void SetHealth(Gpu& g, const store::BurnInRecord& latest) {
  g.health_score = latest.score;
  g.health_verdict = latest.verdict;
  g.health_at = latest.finished;
}

json RollupJson(const store::RollupRecord& r) {
  json stats = json::object();
  for (int m = 0; m < store::kRollupMetricCount; ++m) {
    const auto& stat = r.stats[m];
    if (!stat) continue;
    stats[store::RollupMetricName(static_cast<store::RollupMetric>(m))] = {
        {"min", stat->min}, {"mean", stat->mean}, {"max", stat->max}};
  }
  json j = {{"minute", r.minute},       {"samples", r.samples},
            {"failures", r.failures},   {"stats", stats},
            {"xid_count", r.xid_count}, {"throttle_reasons_seen", r.throttle_reasons_seen}};
  if (r.pcie_replay_count) j["pcie_replay_count"] = *r.pcie_replay_count;
  if (r.ecc_sbe) j["ecc_sbe"] = *r.ecc_sbe;
  if (r.ecc_dbe) j["ecc_dbe"] = *r.ecc_dbe;
  return j;
}

}  // namespace gpuherd::api
