#include "gpu/types.h"

#include <utility>

namespace gpuherd::gpu {

const char* LinkName(Link link) {
  switch (link) {
    case Link::kSelf: return "self";
    case Link::kNvLink: return "nvlink";
    case Link::kPcieSwitch: return "pcie-switch";
    case Link::kHostBridge: return "host-bridge";
    case Link::kNumaNode: return "numa-node";
    case Link::kCrossSocket: return "cross-socket";
    case Link::kUnknown: return "unknown";
  }
  return "unknown";
}

namespace throttle {
std::string Describe(uint64_t reasons) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {kGpuIdle, "idle"},
      {kApplicationsClocksSetting, "app_clocks"},
      {kSwPowerCap, "sw_power_cap"},
      {kHwSlowdown, "hw_slowdown"},
      {kSyncBoost, "sync_boost"},
      {kSwThermalSlowdown, "sw_thermal"},
      {kHwThermalSlowdown, "hw_thermal"},
      {kHwPowerBrakeSlowdown, "hw_power_brake"},
      {kDisplayClockSetting, "display_clocks"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames) {
    if (reasons & bit) {
      if (!out.empty()) out += ",";
      out += name;
    }
  }
  return out;
}
}  // namespace throttle

bool NamesGpu(const std::string& id, int index, const std::string& uuid) {
  return !id.empty() && (id == uuid || id == std::to_string(index));
}

int FindGpu(const std::vector<GpuInfo>& gpus, const std::string& id) {
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (NamesGpu(id, gpus[i].index, gpus[i].uuid)) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace gpuherd::gpu
