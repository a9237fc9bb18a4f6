#include "api/gpus.h"

#include "gpu/json.h"

namespace gpuherd::api {

using nlohmann::json;

void to_json(json& j, const Gpu& g) {
  j = g.info;
  j["state"] = g.state;
  if (g.sample) j["sample"] = *g.sample;
  if (!g.last_error.empty()) j["last_error"] = g.last_error;
  if (g.drained) {
    j["drained"] = true;
    j["drain_reason"] = g.drain_reason;
    if (!g.drain_origin.empty()) j["drain_origin"] = g.drain_origin;
  }
  if (g.failure_risk) j["failure_risk"] = *g.failure_risk;
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
}

Gpu GpuOf(const gpu::GpuInfo& info, const telemetry::Telemetry& telemetry, int index) {
  Gpu g;
  g.info = info;
  g.state = telemetry.State(index) == telemetry::GpuState::kLost ? "lost" : "ok";
  if (const gpu::GpuSample* latest = telemetry.Latest(index)) g.sample = *latest;
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
  for (size_t i = 0; i < fleet.gpus.size(); ++i) f.gpus.push_back(GpuOf(fleet.gpus[i], telemetry, static_cast<int>(i)));
  return f;
}

void MarkDrained(Gpu& g, const std::string& reason, const std::string& origin) {
  g.drained = true;
  g.drain_reason = reason;
  g.drain_origin = origin;
  if (g.state == "ok") g.state = "drained";
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
