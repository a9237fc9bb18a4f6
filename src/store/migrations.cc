#include "store/migrations.h"

#include <sqlite3.h>

#include <SQLiteCpp/Transaction.h>

#include "store/records.h"

namespace gpuherd::store {
namespace {

// Version 1 gets exactly the rollup metrics that existed when it was released;
// metrics added later get their columns from their own step.
constexpr int kVersion1RollupMetrics = 10;

std::string SchemaVersion1() {
  std::string stat_columns;
  for (int i = 0; i < kVersion1RollupMetrics; ++i) {
    const std::string stem = RollupMetricName(static_cast<RollupMetric>(i));
    stat_columns += "  " + stem + "_min REAL, " + stem + "_mean REAL, " + stem + "_max REAL,\n";
  }
  return R"sql(
CREATE TABLE gpus (
  uuid TEXT PRIMARY KEY NOT NULL CHECK (uuid <> ''),
  gpu_index INTEGER NOT NULL,
  name TEXT NOT NULL,
  serial TEXT NOT NULL,
  pci_bus_id TEXT NOT NULL,
  memory_total_bytes INTEGER NOT NULL,
  info_json TEXT NOT NULL,
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL
);
CREATE TABLE rollups (
  uuid TEXT NOT NULL REFERENCES gpus (uuid),
  minute INTEGER NOT NULL,
  samples INTEGER NOT NULL CHECK (samples >= 0),
  failures INTEGER NOT NULL CHECK (failures >= 0),
)sql" + stat_columns +
         R"sql(
  pcie_replay_count INTEGER,
  ecc_sbe INTEGER,
  ecc_dbe INTEGER,
  throttle_reasons_seen INTEGER NOT NULL,
  xid_count INTEGER NOT NULL CHECK (xid_count >= 0),
  PRIMARY KEY (uuid, minute)
) WITHOUT ROWID;
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''),
  severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  gpu_uuid TEXT NOT NULL,
  message TEXT NOT NULL,
  data_json TEXT NOT NULL
);
CREATE INDEX events_by_time ON events (time);
CREATE INDEX events_by_gpu ON events (gpu_uuid, id);
)sql";
}

std::string SchemaVersion2() {
  return R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  uid INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN
    ('pending', 'held', 'running', 'stopping', 'completed', 'failed', 'cancelled')),
  priority INTEGER NOT NULL,
  spec_json TEXT NOT NULL,
  submitted INTEGER NOT NULL,
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 0),
  restarts INTEGER NOT NULL CHECK (restarts >= 0),
  gpus_json TEXT NOT NULL,
  exit_code INTEGER,
  exit_signal INTEGER,
  reason TEXT NOT NULL
);
CREATE INDEX jobs_unfinished ON jobs (state) WHERE state NOT IN ('completed', 'failed', 'cancelled');
CREATE INDEX jobs_by_end ON jobs (ended);
CREATE TABLE gpu_drains (
  uuid TEXT PRIMARY KEY NOT NULL CHECK (uuid <> ''),
  reason TEXT NOT NULL,
  since INTEGER NOT NULL
);
)sql";
}

// No foreign key to gpus: a burn-in run directly, without a daemon, tests
// GPUs the store has never listed.
std::string SchemaVersion3() {
  return R"sql(
CREATE TABLE burnin_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  gpu_uuid TEXT NOT NULL CHECK (gpu_uuid <> ''),
  gpu_name TEXT NOT NULL,
  level INTEGER NOT NULL CHECK (level BETWEEN 1 AND 3),
  started INTEGER NOT NULL,
  finished INTEGER NOT NULL,
  outcome TEXT NOT NULL CHECK (outcome <> ''),
  verdict TEXT NOT NULL CHECK (verdict <> ''),
  score INTEGER NOT NULL CHECK (score BETWEEN 0 AND 100),
  job_id INTEGER NOT NULL,
  json TEXT NOT NULL
);
CREATE INDEX burnin_runs_by_gpu ON burnin_runs (gpu_uuid, finished);
CREATE INDEX burnin_runs_by_model ON burnin_runs (gpu_name, finished);
)sql";
}

// Alerts keep their GPU's UUID as a plain subject: a port is not a GPU, and
// an alert outlives the GPU's removal from the fleet.
std::string SchemaVersion4() {
  return R"sql(
CREATE TABLE alerts (
  rule TEXT NOT NULL CHECK (rule <> ''),
  subject TEXT NOT NULL CHECK (subject <> ''),
  gpu_index INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('pending', 'firing', 'resolved')),
  pending_since INTEGER NOT NULL,
  fired_at INTEGER NOT NULL,
  resolved_at INTEGER NOT NULL,
  value REAL NOT NULL,
  severity TEXT NOT NULL CHECK (severity IN ('info', 'warning', 'critical')),
  action TEXT NOT NULL,
  summary TEXT NOT NULL,
  PRIMARY KEY (rule, subject, pending_since)
) WITHOUT ROWID;
CREATE INDEX alerts_active ON alerts (state) WHERE state <> 'resolved';
CREATE INDEX alerts_by_resolution ON alerts (resolved_at) WHERE state = 'resolved';
)sql";
}

// Pipeline runs, their nodes, and the metric lines of every job. A metric
// line's series is its node (run_id > 0) or its job (run_id 0); the indexes
// serve both the replacement of a repeated step and the listings.
std::string SchemaVersion5() {
  return R"sql(
CREATE TABLE pipeline_runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  source_path TEXT NOT NULL,
  base_dir TEXT NOT NULL,
  yaml TEXT NOT NULL,
  overrides_json TEXT NOT NULL,
  run_dir TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
  outcome TEXT NOT NULL,
  created INTEGER NOT NULL,
  finished INTEGER NOT NULL,
  user TEXT NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL
);
CREATE INDEX pipeline_runs_unfinished ON pipeline_runs (state) WHERE state = 'running';
CREATE TABLE pipeline_nodes (
  run_id INTEGER NOT NULL REFERENCES pipeline_runs (id),
  node_id TEXT NOT NULL,
  key TEXT NOT NULL,
  step TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN
    ('waiting', 'active', 'completed', 'failed', 'cancelled', 'skipped')),
  attempts INTEGER NOT NULL CHECK (attempts >= 0),
  job_id INTEGER NOT NULL,
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  reason TEXT NOT NULL,
  PRIMARY KEY (run_id, node_id)
) WITHOUT ROWID;
CREATE TABLE metrics (
  job_id INTEGER NOT NULL,
  run_id INTEGER NOT NULL,
  node_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  step INTEGER,
  time INTEGER NOT NULL,
  line_json TEXT NOT NULL
);
CREATE INDEX metrics_by_node ON metrics (run_id, node_id, step);
CREATE INDEX metrics_by_job ON metrics (job_id, step);
)sql";
}

std::string SchemaVersion6() {
  return "ALTER TABLE pipeline_nodes ADD COLUMN gpu_seconds REAL NOT NULL DEFAULT 0 CHECK (gpu_seconds >= 0);";
}

// A point stopped early by its step's early_stop policy ends 'stopped', and
// a node keeps why each of its attempts ended (history_json). SQLite cannot
// change a CHECK constraint in place: the table is rebuilt.
std::string SchemaVersion7() {
  return R"sql(
CREATE TABLE pipeline_nodes_v7 (
  run_id INTEGER NOT NULL REFERENCES pipeline_runs (id),
  node_id TEXT NOT NULL,
  key TEXT NOT NULL,
  step TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN
    ('waiting', 'active', 'completed', 'failed', 'cancelled', 'skipped', 'stopped')),
  attempts INTEGER NOT NULL CHECK (attempts >= 0),
  job_id INTEGER NOT NULL,
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  reason TEXT NOT NULL,
  gpu_seconds REAL NOT NULL DEFAULT 0 CHECK (gpu_seconds >= 0),
  history_json TEXT NOT NULL DEFAULT '[]',
  PRIMARY KEY (run_id, node_id)
) WITHOUT ROWID;
INSERT INTO pipeline_nodes_v7 (run_id, node_id, key, step, state, attempts, job_id, started, ended, reason,
                               gpu_seconds)
  SELECT run_id, node_id, key, step, state, attempts, job_id, started, ended, reason, gpu_seconds
  FROM pipeline_nodes;
DROP TABLE pipeline_nodes;
ALTER TABLE pipeline_nodes_v7 RENAME TO pipeline_nodes;
)sql";
}

std::string SchemaVersion8() {
  return R"sql(
CREATE TABLE gpu_health_transitions (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  gpu_uuid TEXT NOT NULL CHECK (gpu_uuid <> ''),
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL,
  shadow INTEGER NOT NULL CHECK (shadow IN (0, 1))
);
CREATE INDEX gpu_health_transitions_by_gpu ON gpu_health_transitions (gpu_uuid, id);
CREATE TABLE passport_imports (
  card_key TEXT NOT NULL CHECK (card_key <> ''),
  source TEXT NOT NULL,
  imported_at INTEGER NOT NULL,
  passport_json TEXT NOT NULL,
  PRIMARY KEY (card_key, source)
) WITHOUT ROWID;
)sql";
}

// Who drained a GPU, typed. Drains stored before it had only their reason:
// the prefixes gpuherd itself wrote ("fault: ", "alert ") are read once here,
// every other drain is an operator's.
std::string SchemaVersion9() {
  return R"sql(
ALTER TABLE gpu_drains ADD COLUMN origin TEXT NOT NULL DEFAULT 'operator'
  CHECK (origin IN ('operator', 'fault', 'alert', 'burnin', 'risk'));
UPDATE gpu_drains SET origin = 'fault' WHERE reason LIKE 'fault: %';
UPDATE gpu_drains SET origin = 'alert' WHERE reason LIKE 'alert %';
)sql";
}

std::string SchemaVersion10() {
  return R"sql(
CREATE TABLE idempotency_keys (
  uid INTEGER NOT NULL,
  key TEXT NOT NULL CHECK (length(key) BETWEEN 1 AND 128),
  request TEXT NOT NULL,
  created INTEGER NOT NULL,
  status INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (uid, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_keys_by_created ON idempotency_keys (created);
)sql";
}

// One row per attempt of a job. Jobs that ran before get their last attempt
// back from their own row (earlier attempts and telemetry were not kept).
std::string SchemaVersion11() {
  return R"sql(
CREATE TABLE job_attempts (
  job_id INTEGER NOT NULL CHECK (job_id > 0),
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  user TEXT NOT NULL,
  gpus_json TEXT NOT NULL,
  gpu_twentieths INTEGER NOT NULL CHECK (gpu_twentieths >= 0),
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  end_cause TEXT NOT NULL CHECK (end_cause IN ('', 'completed', 'failed', 'preempted', 'requeued',
    'gpu_fault', 'cancelled', 'time_limit', 'supervisor_lost', 'out_of_memory', 'gpu_memory', 'launch_failed')),
  exit_code INTEGER,
  exit_signal INTEGER,
  reason TEXT NOT NULL,
  util_samples INTEGER NOT NULL CHECK (util_samples >= 0),
  gpu_util_mean REAL,
  peak_gpu_mem_bytes INTEGER,
  PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE INDEX job_attempts_by_end ON job_attempts (ended);
INSERT INTO job_attempts (job_id, attempt, user, gpus_json, gpu_twentieths, started, ended, end_cause, exit_code,
                          exit_signal, reason, util_samples)
  SELECT id, attempt, user, gpus_json, COALESCE(json_extract(spec_json, '$.gpu_twentieths'), 2 * json_extract(spec_json, '$.gpu_tenths'), 0), started,
         CASE WHEN state IN ('completed', 'failed', 'cancelled') THEN ended ELSE 0 END,
         CASE WHEN state IN ('completed', 'failed', 'cancelled') THEN state ELSE '' END,
         exit_code, exit_signal, reason, 0
  FROM jobs WHERE attempt > 0 AND started > 0 AND json_valid(spec_json);
)sql";
}

// SQLite (3.40) checks `x IN ('a', 'b', 'c')` in a CHECK constraint or a
// partial index's WHERE by building a temporary b-tree of the list for every
// row it writes: a job's record cost 80 µs instead of 8, and cancelling
// 20,000 jobs spent most of its commit there. The tables written for every
// job (jobs, events, attempts, pipeline nodes) are rebuilt with the same
// constraints written as comparisons; their rows and ids are kept.
std::string SchemaVersion12() {
  return R"sql(
CREATE TABLE jobs_v12 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  uid INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state = 'pending' OR state = 'held' OR state = 'running' OR state = 'stopping' OR
                             state = 'completed' OR state = 'failed' OR state = 'cancelled'),
  priority INTEGER NOT NULL,
  spec_json TEXT NOT NULL,
  submitted INTEGER NOT NULL,
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 0),
  restarts INTEGER NOT NULL CHECK (restarts >= 0),
  gpus_json TEXT NOT NULL,
  exit_code INTEGER,
  exit_signal INTEGER,
  reason TEXT NOT NULL
);
INSERT INTO jobs_v12 (id, name, user, uid, state, priority, spec_json, submitted, started, ended, attempt, restarts,
                      gpus_json, exit_code, exit_signal, reason)
  SELECT id, name, user, uid, state, priority, spec_json, submitted, started, ended, attempt, restarts,
         gpus_json, exit_code, exit_signal, reason FROM jobs;
CREATE TABLE events_v12 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind <> ''),
  severity TEXT NOT NULL CHECK (severity = 'info' OR severity = 'warning' OR severity = 'critical'),
  gpu_uuid TEXT NOT NULL,
  message TEXT NOT NULL,
  data_json TEXT NOT NULL
);
INSERT INTO events_v12 (id, time, kind, severity, gpu_uuid, message, data_json)
  SELECT id, time, kind, severity, gpu_uuid, message, data_json FROM events;
-- An id once given is never given again: the old counters move with the tables.
DELETE FROM sqlite_sequence WHERE name = 'jobs_v12' OR name = 'events_v12';
INSERT INTO sqlite_sequence (name, seq)
  SELECT name || '_v12', seq FROM sqlite_sequence WHERE name = 'jobs' OR name = 'events';
DROP TABLE jobs;
ALTER TABLE jobs_v12 RENAME TO jobs;
CREATE INDEX jobs_unfinished ON jobs (state) WHERE state <> 'completed' AND state <> 'failed' AND state <> 'cancelled';
CREATE INDEX jobs_by_end ON jobs (ended);
DROP TABLE events;
ALTER TABLE events_v12 RENAME TO events;
CREATE INDEX events_by_time ON events (time);
CREATE INDEX events_by_gpu ON events (gpu_uuid, id);
CREATE TABLE job_attempts_v12 (
  job_id INTEGER NOT NULL CHECK (job_id > 0),
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  user TEXT NOT NULL,
  gpus_json TEXT NOT NULL,
  gpu_twentieths INTEGER NOT NULL CHECK (gpu_twentieths >= 0),
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  end_cause TEXT NOT NULL CHECK (end_cause = '' OR end_cause = 'completed' OR end_cause = 'failed' OR
    end_cause = 'preempted' OR end_cause = 'requeued' OR end_cause = 'gpu_fault' OR end_cause = 'cancelled' OR
    end_cause = 'time_limit' OR end_cause = 'supervisor_lost' OR end_cause = 'out_of_memory' OR
    end_cause = 'gpu_memory' OR end_cause = 'launch_failed'),
  exit_code INTEGER,
  exit_signal INTEGER,
  reason TEXT NOT NULL,
  util_samples INTEGER NOT NULL CHECK (util_samples >= 0),
  gpu_util_mean REAL,
  peak_gpu_mem_bytes INTEGER,
  PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
INSERT INTO job_attempts_v12 (job_id, attempt, user, gpus_json, gpu_twentieths, started, ended, end_cause, exit_code,
                              exit_signal, reason, util_samples, gpu_util_mean, peak_gpu_mem_bytes)
  SELECT job_id, attempt, user, gpus_json, gpu_twentieths, started, ended, end_cause, exit_code, exit_signal, reason,
         util_samples, gpu_util_mean, peak_gpu_mem_bytes FROM job_attempts;
DROP TABLE job_attempts;
ALTER TABLE job_attempts_v12 RENAME TO job_attempts;
CREATE INDEX job_attempts_by_end ON job_attempts (ended);
CREATE TABLE pipeline_nodes_v12 (
  run_id INTEGER NOT NULL REFERENCES pipeline_runs (id),
  node_id TEXT NOT NULL,
  key TEXT NOT NULL,
  step TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state = 'waiting' OR state = 'active' OR state = 'completed' OR state = 'failed' OR
                             state = 'cancelled' OR state = 'skipped' OR state = 'stopped'),
  attempts INTEGER NOT NULL CHECK (attempts >= 0),
  job_id INTEGER NOT NULL,
  started INTEGER NOT NULL,
  ended INTEGER NOT NULL,
  reason TEXT NOT NULL,
  gpu_seconds REAL NOT NULL DEFAULT 0 CHECK (gpu_seconds >= 0),
  history_json TEXT NOT NULL DEFAULT '[]',
  PRIMARY KEY (run_id, node_id)
) WITHOUT ROWID;
INSERT INTO pipeline_nodes_v12 (run_id, node_id, key, step, state, attempts, job_id, started, ended, reason,
                                gpu_seconds, history_json)
  SELECT run_id, node_id, key, step, state, attempts, job_id, started, ended, reason, gpu_seconds, history_json
  FROM pipeline_nodes;
DROP TABLE pipeline_nodes;
ALTER TABLE pipeline_nodes_v12 RENAME TO pipeline_nodes;
)sql";
}

// How far the daemon read each job's metrics file, and how many of its
// lines it stored (metric lines past a job's first are thinned).
std::string SchemaVersion13() {
  return R"sql(
CREATE TABLE metric_intake (
  job_id INTEGER PRIMARY KEY,
  lines_read INTEGER NOT NULL CHECK (lines_read >= 0),
  lines_kept INTEGER NOT NULL CHECK (lines_kept >= 0),
  lines_skipped INTEGER NOT NULL CHECK (lines_skipped >= 0),
  behind INTEGER NOT NULL CHECK (behind = 0 OR behind = 1),
  updated INTEGER NOT NULL
);
)sql";
}

constexpr Migration kMigrations[] = {
    {1, "GPUs, rollups and events", &SchemaVersion1},
    {2, "jobs and drained GPUs", &SchemaVersion2},
    {3, "burn-in runs", &SchemaVersion3},
    {4, "alerts", &SchemaVersion4},
    {5, "pipeline runs, nodes and metrics", &SchemaVersion5},
    {6, "GPU time of every pipeline node's attempts", &SchemaVersion6},
    {7, "pipeline nodes stopped early, and why each attempt ended", &SchemaVersion7},
    {8, "GPU health transitions and imported card passports", &SchemaVersion8},
    {9, "who drained each GPU (typed origin)", &SchemaVersion9},
    {10, "the first outcome of requests sent with an idempotency key", &SchemaVersion10},
    {11, "one record per attempt of a job", &SchemaVersion11},
    {12, "constraints of the tables written for every job as comparisons, not IN lists", &SchemaVersion12},
    {13, "how far the metrics file of each job was read, and how many lines were kept", &SchemaVersion13},
};

std::string HintFor(int primary_code) {
  switch (primary_code) {
    case SQLITE_CANTOPEN: return "check that the directory exists and is writable";
    case SQLITE_NOTADB: return "move it aside or choose another --home";
    case SQLITE_CORRUPT:
      return "the file is damaged; restore it from a backup or move it aside to start afresh";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "another process holds the database lock; is a second gpuherd daemon using "
             "the same --home?";
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return "check the permissions of the file and its directory";
    case SQLITE_FULL: return "the disk is full; free some space";
    case SQLITE_IOERR: return "check the disk and its file system (dmesg)";
    default: return "";
  }
}

Code CodeFor(int primary_code) {
  switch (primary_code) {
    case SQLITE_CANTOPEN:
    case SQLITE_FULL:
    case SQLITE_IOERR: return Code::kIoError;
    case SQLITE_NOTADB: return Code::kFailedPrecondition;
    case SQLITE_CORRUPT: return Code::kDataLoss;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Code::kUnavailable;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH: return Code::kPermissionDenied;
    case SQLITE_CONSTRAINT: return Code::kInvalidArgument;
    default: return Code::kInternal;
  }
}

Status TooNew(const std::string& name, int version, int latest) {
  return FailedPrecondition("database " + name + " has schema version " + std::to_string(version) +
                            " but this gpuherd knows up to " + std::to_string(latest) +
                            "; upgrade gpuherd");
}

}  // namespace

std::span<const Migration> Migrations() { return kMigrations; }

int LatestSchemaVersion() { return Migrations().back().version; }

Result<int> ReadSchemaVersion(SQLite::Database& db) {
  try {
    return db.execAndGet("PRAGMA user_version").getInt();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the schema version of " + db.getFilename());
  }
}

Status Migrate(SQLite::Database& db, const std::string& name,
               std::span<const Migration> migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return Internal("migration list is out of order: entry " + std::to_string(i) +
                      " has version " + std::to_string(migrations[i].version));
    }
  }
  const int latest = static_cast<int>(migrations.size());
  Result<int> current = ReadSchemaVersion(db);
  if (!current.ok()) return current.status();
  if (*current > latest) return TooNew(name, *current, latest);

  for (int next = *current + 1; next <= latest; ++next) {
    const Migration& step = migrations[next - 1];
    try {
      SQLite::Transaction txn(db, SQLite::TransactionBehavior::IMMEDIATE);
      // Another process may have run this step while we waited for the lock.
      const int now = db.execAndGet("PRAGMA user_version").getInt();
      if (now > latest) return TooNew(name, now, latest);
      if (now >= step.version) continue;
      db.exec(step.sql());
      db.exec("PRAGMA user_version = " + std::to_string(step.version));
      txn.commit();
    } catch (const SQLite::Exception& e) {
      return StatusFromSqlite(e, "cannot upgrade " + name + " to schema version " +
                                     std::to_string(step.version) + " (" + step.summary + ")");
    }
  }
  return Status::Ok();
}

Status StatusFromSqlite(const SQLite::Exception& e, const std::string& context) {
  const int primary = e.getErrorCode() & 0xff;
  std::string message = context + ": " + e.what();
  const std::string hint = HintFor(primary);
  if (!hint.empty()) message += "; " + hint;
  return Status(CodeFor(primary), message);
}

}  // namespace gpuherd::store
