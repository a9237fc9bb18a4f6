// The Prometheus text exposition (format 0.0.4) of the fleet: dcgm-exporter's
// metric names and labels for what both measure, so that dashboards built for
// dcgm-exporter work unchanged, plus gpuherd_* metrics for what only gpuherd
// knows. A reading the GPU does not give is left out, never reported as 0.
//
// Pure: renders what it is given. Thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"

namespace gpuherd::telemetry {

// What the exposition says about one GPU. The pointers are not owned and must
// stay valid for the call of RenderMetrics.
struct GpuMetrics {
  const gpu::GpuInfo* info = nullptr;         // required
  const gpu::GpuSample* latest = nullptr;     // nullptr: no reading yet
  bool lost = false;                          // the last reading failed
  // The last XID ever seen on the GPU (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS).
  // nullopt: take it from `latest`, or 0 when `latest` has none.
  std::optional<int> last_xid;
  std::optional<uint64_t> xid_count;          // XIDs seen since the daemon started
  std::optional<int> jobs;                    // jobs holding the GPU now
  std::optional<int> health_score;            // 0-100, from the last burn-in
  std::string verdict;                        // "healthy", ...; empty when never screened
  std::optional<double> failure_risk;         // 0..1 from the risk model; nullopt: none
  // Self-healing's state ("in_service", "suspect", "quarantined",
  // "requalifying", "retired"); empty: not tracked (no daemon).
  std::string health_state;
};

// One InfiniBand port's error counters ("port_rcv_errors" -> value), as read
// from /sys/class/infiniband/<device>/ports/<port>/counters.
struct IbPortMetrics {
  std::string device;                         // "mlx5_0"
  std::string port;                           // "1"
  std::map<std::string, uint64_t> counters;
};

struct AlertsFiring {
  std::string rule;
  std::string severity;                       // "info", "warning", "critical"
  int count = 0;                              // alerts of the rule firing now
};

// The daemon's HTTP connections (http::ConnectionStats, summed over its
// listeners).
struct ConnectionMetrics {
  int open = 0;
  int limit = 0;                      // the most that may be open at once
  uint64_t refused_per_user = 0;
  uint64_t refused_per_address = 0;
  uint64_t refused_total = 0;
  uint64_t accept_errors = 0;
};

struct MetricsInput {
  std::string hostname;
  std::string version;                        // gpuherd's version
  std::string driver;                         // "nvml" or "sim"
  bool simulated = false;
  std::vector<GpuMetrics> gpus;
  std::map<std::string, int> jobs_by_state;   // "pending" -> 3; list zero states too
  std::map<std::string, double> gpu_seconds_by_user;  // cumulative GPU time
  std::vector<AlertsFiring> alerts_firing;
  std::optional<double> scheduler_pass_seconds;  // the duration of the last pass
  std::vector<IbPortMetrics> ib_ports;
  std::optional<ConnectionMetrics> connections;  // nullopt: no HTTP server (left out)
};

// The exposition, "text/plain; version=0.0.4". Families without a series are
// left out entirely.
std::string RenderMetrics(const MetricsInput& in);

// The content type to serve RenderMetrics' output with.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// `value` escaped for use between the quotes of a label value: backslash,
// double quote and newline.
std::string EscapeLabelValue(const std::string& value);

}  // namespace gpuherd::telemetry
