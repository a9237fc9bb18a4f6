#include "store/records.h"

namespace gpuherd::store {

const char* RollupMetricName(RollupMetric m) {
  switch (m) {
    case RollupMetric::kGpuUtil: return "gpu_util";
    case RollupMetric::kMemUtil: return "mem_util";
    case RollupMetric::kMemUsedMib: return "mem_used_mib";
    case RollupMetric::kTempC: return "temp_c";
    case RollupMetric::kPowerW: return "power_w";
    case RollupMetric::kSmClockMhz: return "sm_clock_mhz";
    case RollupMetric::kMemClockMhz: return "mem_clock_mhz";
    case RollupMetric::kFanPct: return "fan_pct";
    case RollupMetric::kPcieTxKbps: return "pcie_tx_kbps";
    case RollupMetric::kPcieRxKbps: return "pcie_rx_kbps";
    case RollupMetric::kCount: break;
  }
  return "unknown";
}

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "unknown";
}

std::optional<Severity> ParseSeverity(const std::string& s) {
  for (Severity candidate : {Severity::kInfo, Severity::kWarning, Severity::kCritical}) {
    if (s == SeverityName(candidate)) return candidate;
  }
  return std::nullopt;
}

}  // namespace gpuherd::store
