#include "daemon/fleet_view.h"

#include "gpu/json.h"

namespace gpuherd::daemon {

GpuView ViewOf(const telemetry::Telemetry& telemetry, int index) {
  GpuView view;
  view.state = telemetry.State(index) == telemetry::GpuState::kLost ? "lost" : "ok";
  if (const gpu::GpuSample* latest = telemetry.Latest(index)) view.sample = *latest;
  view.last_error = telemetry.LostReason(index);
  return view;
}

FleetView ViewOf(const gpu::Fleet& fleet, const telemetry::Telemetry& telemetry, const std::string& sim_reason,
                 const std::string& hostname) {
  FleetView view;
  view.fleet = &fleet;
  view.sim_reason = sim_reason;
  view.hostname = hostname;
  for (size_t i = 0; i < fleet.gpus.size(); ++i) view.gpus.push_back(ViewOf(telemetry, static_cast<int>(i)));
  return view;
}

nlohmann::json GpuJson(const gpu::GpuInfo& info, const GpuView& view) {
  nlohmann::json j = info;
  j["state"] = view.state;
  if (view.sample) j["sample"] = *view.sample;
  if (!view.last_error.empty()) j["last_error"] = view.last_error;
  return j;
}

nlohmann::json FleetJson(const FleetView& view) {
  nlohmann::json gpus = nlohmann::json::array();
  for (size_t i = 0; i < view.fleet->gpus.size(); ++i) {
    gpus.push_back(GpuJson(view.fleet->gpus[i], i < view.gpus.size() ? view.gpus[i] : GpuView{}));
  }
  nlohmann::json topology = nlohmann::json::array();
  for (const auto& row : view.fleet->topology) {
    nlohmann::json names = nlohmann::json::array();
    for (gpu::Link link : row) names.push_back(gpu::LinkName(link));
    topology.push_back(names);
  }
  return {{"driver", view.fleet->driver_name},
          {"simulated", view.fleet->simulated},
          {"sim_reason", view.sim_reason},
          {"hostname", view.hostname},
          {"gpus", gpus},
          {"topology", topology}};
}

}  // namespace gpuherd::daemon
