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

// A job's id, name and state: what a job array's summary needs of each task.
struct JobStateRecord {
  int64_t id = 0;
  std::string name;
  std::string state;
};

// A GPU taken out of scheduling by an operator or by a fault, until undrained.
struct DrainRecord {
  std::string uuid;
  bool drained = false;        // false: the drain is lifted (row deleted)
  std::string reason;
  TimeMs since = 0;
  // Who drained it: "operator", "fault", "alert", "burnin" or "risk"
  // (daemon/queue/drain_origin.h decides what may lift each).
  std::string origin = "operator";
};

// One burn-in of one GPU. The store keeps the whole record as JSON (the
// burn-in layer's schema, which it does not interpret) and copies into
// columns only what it is queried or shown by.
struct BurnInRecord {
  int64_t id = 0;              // assigned by the store at commit, monotonic
  std::string gpu_uuid;
  std::string gpu_name;        // the model, e.g. "NVIDIA GeForce GTX 1070 Ti"
  int level = 1;               // 1, 2 or 3
  TimeMs started = 0, finished = 0;
  std::string outcome;         // "passed", "faults_found", "could_not_run", "aborted"
  std::string verdict;         // "healthy", "degraded", "unhealthy", "unknown"
  int score = 0;               // 0-100
  int64_t job_id = 0;          // the queue job that ran it; 0 when run directly
  std::string json;
};

struct BurnInFilter {
  std::string gpu_uuid;        // empty: all GPUs
  std::string gpu_name;        // empty: all models
  int limit = 100;             // the newest `limit` matching, newest first
};

// One alert: a rule on one subject (a GPU or an InfiniBand port) from the
// moment its condition started to hold. Upserted at every change of state;
// a pending alert whose condition stopped holding before it fired ("inactive")
// is deleted, so that a flapping condition leaves no rows behind.
struct AlertRecord {
  std::string rule;
  std::string subject;         // the GPU's UUID, or "mlx5_0/1" for a port
  int gpu_index = -1;          // -1 for a port
  std::string state;           // "pending", "firing", "resolved"; "inactive" deletes
  TimeMs pending_since = 0;    // with rule and subject, the key
  TimeMs fired_at = 0, resolved_at = 0;  // 0 until then
  double value = 0;            // the rule's reduced series at the last change
  Severity severity = Severity::kWarning;
  std::string action;          // "none", "notify", "drain", "checkpoint_and_move"
  std::string summary;
};

// One run of a pipeline file. The file's text and the overrides are kept, so
// that a restarted daemon expands the same plan again (expansion is
// deterministic); what the API lists is in columns.
struct PipelineRunRecord {
  int64_t id = 0;              // assigned by the daemon (monotonic), never reused
  std::string name;
  std::string source_path;     // the file's name in messages
  std::string base_dir;        // the folder its relative paths mean
  std::string yaml;
  std::string overrides_json = "{}";  // {"param": "value"} given with -p
  std::string run_dir;
  std::string state;           // "running", "completed", "failed", "cancelled"
  std::string outcome;         // "succeeded", "failed", "cancelled"; empty while running
  TimeMs created = 0, finished = 0;
  std::string user;
  uint32_t uid = 0, gid = 0;
};

// Where one node of a run stands; upserted by (run_id, node_id).
struct PipelineNodeRecord {
  int64_t run_id = 0;
  std::string node_id;         // "train[lr=0.1,seed=1]"
  std::string key;             // "train/0"
  std::string step;
  std::string state;           // "waiting", "active", "completed", "failed", "cancelled", "skipped", "stopped"
  int attempts = 0;            // jobs submitted for it so far
  int64_t job_id = 0;          // its latest job; 0 before the first
  TimeMs started = 0, ended = 0;
  std::string reason;
  // GPU time of the node's attempts that have ended, every retry and requeue
  // included (a fraction of a GPU counts its share).
  double gpu_seconds = 0;
  // Why each of its jobs' attempts that did not complete ended, oldest
  // first: a JSON array of {"job", "attempt", "ended", "state", "reason",
  // "stderr_tail"} (the last lines of a failed attempt's standard error).
  std::string history_json = "[]";
};

// One line of a job's metrics file. A pipeline job's lines carry its run and
// node; a plain job's run_id is 0 and node_id empty. A line with a step
// replaces an earlier line of the same series and step (a resumed job
// repeats the steps after its checkpoint): the series is the node for
// pipeline jobs, the job otherwise.
struct MetricRecord {
  int64_t job_id = 0;
  int64_t run_id = 0;
  std::string node_id;
  int attempt = 1;             // which run of the node (or job) wrote it, from 1
  std::optional<int64_t> step;
  TimeMs time = 0;             // the line's "time", else when it was read
  std::string line_json;       // the whole line
};

// How far the daemon read a job's metrics file: lines parsed, lines stored
// (the rest were thinned, daemon/metrics_intake.h), lines skipped (too long,
// not a metric line), and whether the file had more than was read.
struct MetricIntakeRecord {
  int64_t job_id = 0;
  int64_t lines_read = 0;
  int64_t lines_kept = 0;
  int64_t lines_skipped = 0;
  bool behind = false;
  TimeMs updated = 0;
};

// Everything that happened in one turn of the daemon's loop, committed in one
// transaction (one fsync) before anyone is told.
// A GPU's move between health states (in_service, suspect, quarantined,
// requalifying, retired) with why and on what evidence; shadow: a decision
// recorded but not carried out.
struct HealthTransitionRecord {
  int64_t id = 0;              // assigned by the store
  TimeMs time = 0;
  std::string gpu_uuid;
  std::string from_state, to_state;
  std::string reason;
  std::string evidence_json = "[]";
  bool shadow = false;
};

// A card's passport brought from another machine (`gpuherd passport import`),
// keyed by serial (UUID where the card has none); `source` names where it was
// exported (host and time), so the same file imported twice is kept once.
struct PassportImportRecord {
  std::string card_key;
  std::string source;
  TimeMs imported_at = 0;
  std::string passport_json;
};

// The first outcome of a mutating API request sent with an Idempotency-Key,
// kept per caller so that a retry with the same key gets it again instead of
// acting twice (daemon/idempotency.h).
struct IdempotencyRecord {
  uint32_t uid = 0;          // the caller's uid: keys of different users never meet
  std::string key;           // as sent, bounded and checked by the daemon
  std::string request;       // method, target and body digest: a key names one request
  TimeMs created = 0;
  int status = 0;            // the HTTP status of the first outcome
  std::string content_type;
  std::string body;
};

// One run of a job (its attempt N), upserted by (job_id, attempt): written
// when the attempt starts (ended 0, end_cause empty) and again when it ends,
// in the same commit as the job's own change. What the attempt used comes
// from the telemetry sampled while it ran (see daemon/attempt_log.h).
struct AttemptRecord {
  int64_t job_id = 0;
  int attempt = 0;             // from 1
  std::string user;            // the job's owner, for accounting by user
  std::string gpus_json = "[]";  // UUIDs of the GPUs it held
  int gpu_twentieths = 0;          // the share it held: 10 per whole GPU
  TimeMs started = 0, ended = 0;  // ended is 0 while it runs
  // "" while it runs; then completed, failed, preempted, requeued, gpu_fault,
  // cancelled, time_limit, supervisor_lost, out_of_memory, gpu_memory,
  // launch_failed (api::kAttemptEndCauses).
  std::string end_cause;
  std::optional<int> exit_code, exit_signal;
  std::string reason;          // for people: "exited with code 3", "preempted for job 9"
  int util_samples = 0;        // telemetry readings taken while it ran
  std::optional<double> gpu_util_mean;        // % over its GPUs and readings; none without readings
  std::optional<uint64_t> peak_gpu_mem_bytes;  // the most GPU memory it held on one GPU
};

// Which jobs `acct` covers: those submitted, running or ended at or after
// `since` (unfinished ones always), of one user or all.
struct AcctFilter {
  TimeMs since = 0;
  std::string user;            // empty: everyone
  int limit = 100000;          // at most this many jobs, the newest
};

struct WriteBatch {
  std::vector<GpuRecord> gpus;
  std::vector<RollupRecord> rollups;
  std::vector<EventRecord> events;
  std::vector<JobRecord> jobs;       // upserted by id
  std::vector<DrainRecord> drains;
  std::vector<BurnInRecord> burnin_runs;  // inserted; ids assigned at commit
  std::vector<AlertRecord> alerts;        // upserted by (rule, subject, pending_since)
  std::vector<PipelineRunRecord> pipeline_runs;    // upserted by id
  std::vector<PipelineNodeRecord> pipeline_nodes;  // upserted by (run_id, node_id)
  std::vector<MetricRecord> metrics;               // inserted, replacing a repeated step
  std::vector<MetricIntakeRecord> metric_intake;   // upserted by job_id
  std::vector<IdempotencyRecord> idempotency;      // upserted by (uid, key)
  TimeMs idempotency_expire_before = 0;            // > 0: deletes keys created before it
  std::vector<HealthTransitionRecord> health_transitions;  // appended; ids assigned at commit
  std::vector<AttemptRecord> attempts;             // upserted by (job_id, attempt), after the jobs
  bool empty() const {
    return gpus.empty() && rollups.empty() && events.empty() && jobs.empty() && drains.empty() &&
           burnin_runs.empty() && alerts.empty() && pipeline_runs.empty() && pipeline_nodes.empty() &&
           metrics.empty() && metric_intake.empty() && idempotency.empty() && idempotency_expire_before == 0 &&
           health_transitions.empty() && attempts.empty();
  }
};

}  // namespace gpuherd::store
