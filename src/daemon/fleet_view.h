// The fleet as the API serves it and `gpuherd gpus --json` prints it, built
// the same way by the daemon and by the CLI when it reads GPUs directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/types.h"
#include "telemetry/telemetry.h"

namespace gpuherd::daemon {

struct GpuView {
  std::string state = "ok";               // "ok" or "lost"
  std::optional<gpu::GpuSample> sample;   // the latest answer, if any
  std::string last_error;                 // why it is lost
};

struct FleetView {
  const gpu::Fleet* fleet = nullptr;      // not owned
  std::vector<GpuView> gpus;              // parallel to fleet->gpus
  std::string sim_reason;                 // non-empty when the fleet is simulated
  std::string hostname;
};

// The API view of GPU `index` from the telemetry's latest state.
GpuView ViewOf(const telemetry::Telemetry& telemetry, int index);
// Views of every GPU of `fleet`, which must outlive the result.
FleetView ViewOf(const gpu::Fleet& fleet, const telemetry::Telemetry& telemetry, const std::string& sim_reason,
                 const std::string& hostname);

// {"driver", "simulated", "sim_reason", "hostname", "gpus": [{<info>, "state",
// "sample"}], "topology": [[link names]]}
nlohmann::json FleetJson(const FleetView& view);
// One GPU: {<info>, "state", "sample", "last_error"}.
nlohmann::json GpuJson(const gpu::GpuInfo& info, const GpuView& view);

}  // namespace gpuherd::daemon
