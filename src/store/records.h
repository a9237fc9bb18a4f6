// The rows the store keeps. The store sits below the GPU layer, so these are
// its own plain types; the layers above convert to and from them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace gpuherd::store {

// One GPU, keyed by UUID so that its history survives re-enumeration.
struct GpuRecord {
  std::string uuid;
  int index = 0;               // index at last enumeration
  std::string name;
  std::string serial;
  std::string pci_bus_id;
  uint64_t memory_total_bytes = 0;
  std::string info_json;       // all static facts, as the API serves them
  TimeMs first_seen = 0;       // kept from the first insert
  TimeMs last_seen = 0;
};

// The gauges rolled up per minute, in column order. Adding one is a migration.
enum class RollupMetric {
  kGpuUtil = 0,    // %
  kMemUtil,        // %
  kMemUsedMib,
  kTempC,
  kPowerW,
  kSmClockMhz,
  kMemClockMhz,
  kFanPct,
  kPcieTxKbps,
  kPcieRxKbps,
  kCount,
};
constexpr int kRollupMetricCount = static_cast<int>(RollupMetric::kCount);
// Column stem of a metric: "gpu_util", "mem_util", "mem_used_mib", ...
const char* RollupMetricName(RollupMetric m);

struct RollupStat {
  double min = 0, mean = 0, max = 0;
};

// min/mean/max of each gauge over one minute of one GPU. A metric the GPU does
// not report stays nullopt (stored as NULL).
struct RollupRecord {
  std::string uuid;
  TimeMs minute = 0;           // start of the minute
  int samples = 0;             // readings that answered
  int failures = 0;            // readings that did not answer
  std::array<std::optional<RollupStat>, kRollupMetricCount> stats;
  // Counters at the end of the minute (cumulative as the GPU reports them).
  std::optional<uint64_t> pcie_replay_count, ecc_sbe, ecc_dbe;
  uint64_t throttle_reasons_seen = 0;  // OR of all throttle bits in the minute
  int xid_count = 0;

  std::optional<RollupStat>& stat(RollupMetric m) { return stats[static_cast<int>(m)]; }
  const std::optional<RollupStat>& stat(RollupMetric m) const { return stats[static_cast<int>(m)]; }
};

enum class Severity { kInfo = 0, kWarning, kCritical };
const char* SeverityName(Severity s);                          // "info", "warning", "critical"
std::optional<Severity> ParseSeverity(const std::string& s);

// An entry of the append-only event log.
struct EventRecord {
  int64_t id = 0;              // assigned by the store, monotonic
  TimeMs time = 0;
  std::string kind;            // "gpu.lost", "gpu.found", "gpu.xid", "gpu.fault", "daemon.start", ...
  Severity severity = Severity::kInfo;
  std::string gpu_uuid;        // empty when not about one GPU
  std::string message;         // for people
  std::string data_json = "{}";  // details for machines
};

struct EventFilter {
  int64_t after_id = 0;        // only events with id > after_id
  TimeMs since = 0;            // only events at or after this time
  std::string gpu_uuid;        // empty: all
  std::string kind_prefix;     // "gpu." matches all GPU events; empty: all
  int limit = 1000;            // newest `limit` matching, returned oldest first
};

// A job of the queue. The spec is stored as the API's JSON so that adding a
// spec field needs no migration; what is queried is in columns.
struct JobRecord {
  int64_t id = 0;              // assigned by the daemon (monotonic), never reused
  std::string name;
  std::string user;
  uint32_t uid = 0;
  std::string state;           // "pending", "running", ... (sched::JobStateName)
  int priority = 0;
  std::string spec_json;
  TimeMs submitted = 0, started = 0, ended = 0;
  int attempt = 0;
  int restarts = 0;
  std::string gpus_json = "[]";  // UUIDs of the GPUs of the current/last attempt
  std::optional<int> exit_code, exit_signal;
  std::string reason;
};

// A GPU taken out of scheduling by an operator or by a fault, until undrained.
struct DrainRecord {
  std::string uuid;
  bool drained = false;        // false: the drain is lifted (row deleted)
  std::string reason;
  TimeMs since = 0;
};

// Everything that happened in one turn of the daemon's loop, committed in one
// transaction (one fsync) before anyone is told.
struct WriteBatch {
  std::vector<GpuRecord> gpus;
  std::vector<RollupRecord> rollups;
  std::vector<EventRecord> events;
  std::vector<JobRecord> jobs;       // upserted by id
  std::vector<DrainRecord> drains;
  bool empty() const {
    return gpus.empty() && rollups.empty() && events.empty() && jobs.empty() && drains.empty();
  }
};

}  // namespace gpuherd::store
