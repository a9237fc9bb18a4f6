#include "store/store.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "store/migrations.h"

namespace gpuherd::store {
namespace {

static_assert(kRollupMetricCount == kRollupMetricsWithColumns,
              "a new RollupMetric needs a migration that adds its columns");

// How long a statement waits for another process's lock before failing.
constexpr int kBusyTimeoutMs = 5000;

// The rollup columns in RollupRecord order; the stat triples are generated
// from RollupMetricName so that the SQL cannot drift from the enum.
const std::string& RollupColumns() {
  static const std::string columns = [] {
    std::string c = "uuid, minute, samples, failures";
    for (int i = 0; i < kRollupMetricCount; ++i) {
      const std::string stem = RollupMetricName(static_cast<RollupMetric>(i));
      c += ", " + stem + "_min, " + stem + "_mean, " + stem + "_max";
    }
    return c + ", pcie_replay_count, ecc_sbe, ecc_dbe, throttle_reasons_seen, xid_count";
  }();
  return columns;
}
constexpr int kRollupColumnCount = 4 + 3 * kRollupMetricCount + 5;

// A second rollup of a stored minute (the daemon restarted within it) is
// merged into the first rather than refused, so that a restart never costs
// the batch it lands in: counts add up, min and max widen, means are weighted
// by samples and the cumulative counters take the later reading.
const std::string& InsertRollupSql() {
  static const std::string sql = [] {
    std::string placeholders = "?";
    for (int i = 1; i < kRollupColumnCount; ++i) placeholders += ", ?";
    std::string merge =
        "samples = samples + excluded.samples, failures = failures + excluded.failures";
    for (int i = 0; i < kRollupMetricCount; ++i) {
      const std::string stem = RollupMetricName(static_cast<RollupMetric>(i));
      const std::string min = stem + "_min", mean = stem + "_mean", max = stem + "_max";
      // SQLite's two-argument min() and max() are NULL if either side is.
      merge += ", " + min + " = COALESCE(min(" + min + ", excluded." + min + "), " + min +
               ", excluded." + min + ")";
      merge += ", " + max + " = COALESCE(max(" + max + ", excluded." + max + "), " + max +
               ", excluded." + max + ")";
      merge += ", " + mean + " = CASE WHEN excluded." + mean + " IS NULL THEN " + mean + " WHEN " +
               mean + " IS NULL OR samples + excluded.samples = 0 THEN excluded." + mean +
               " ELSE (" + mean + " * samples + excluded." + mean +
               " * excluded.samples) / (samples + excluded.samples) END";
    }
    for (const char* counter : {"pcie_replay_count", "ecc_sbe", "ecc_dbe"}) {
      merge +=
          std::string(", ") + counter + " = COALESCE(excluded." + counter + ", " + counter + ")";
    }
    merge += ", throttle_reasons_seen = throttle_reasons_seen | excluded.throttle_reasons_seen";
    merge += ", xid_count = xid_count + excluded.xid_count";
    return "INSERT INTO rollups (" + RollupColumns() + ") VALUES (" + placeholders +
           ") ON CONFLICT (uuid, minute) DO UPDATE SET " + merge;
  }();
  return sql;
}

constexpr const char* kUpsertGpuSql =
    "INSERT INTO gpus (uuid, gpu_index, name, serial, pci_bus_id, memory_total_bytes, info_json,"
    " first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (uuid) DO UPDATE SET gpu_index = excluded.gpu_index, name = excluded.name,"
    " serial = excluded.serial, pci_bus_id = excluded.pci_bus_id,"
    " memory_total_bytes = excluded.memory_total_bytes, info_json = excluded.info_json,"
    " last_seen = excluded.last_seen";
constexpr const char* kInsertEventSql =
    "INSERT INTO events (time, kind, severity, gpu_uuid, message, data_json)"
    " VALUES (?, ?, ?, ?, ?, ?)";
constexpr const char* kGpuColumns =
    "uuid, gpu_index, name, serial, pci_bus_id, memory_total_bytes, info_json, first_seen,"
    " last_seen";
constexpr const char* kEventColumns = "id, time, kind, severity, gpu_uuid, message, data_json";

// Unsigned counters and bit sets are stored as the int64 of the same bits.
int64_t ToSql(uint64_t v) { return static_cast<int64_t>(v); }
uint64_t FromSql(int64_t v) { return static_cast<uint64_t>(v); }

GpuRecord ReadGpu(SQLite::Statement& q) {
  GpuRecord g;
  g.uuid = q.getColumn(0).getString();
  g.index = q.getColumn(1).getInt();
  g.name = q.getColumn(2).getString();
  g.serial = q.getColumn(3).getString();
  g.pci_bus_id = q.getColumn(4).getString();
  g.memory_total_bytes = FromSql(q.getColumn(5).getInt64());
  g.info_json = q.getColumn(6).getString();
  g.first_seen = q.getColumn(7).getInt64();
  g.last_seen = q.getColumn(8).getInt64();
  return g;
}

std::optional<uint64_t> ReadOptionalCounter(SQLite::Statement& q, int column) {
  SQLite::Column c = q.getColumn(column);
  if (c.isNull()) return std::nullopt;
  return FromSql(c.getInt64());
}

RollupRecord ReadRollup(SQLite::Statement& q) {
  RollupRecord r;
  int col = 0;
  r.uuid = q.getColumn(col++).getString();
  r.minute = q.getColumn(col++).getInt64();
  r.samples = q.getColumn(col++).getInt();
  r.failures = q.getColumn(col++).getInt();
  for (int i = 0; i < kRollupMetricCount; ++i, col += 3) {
    // The three columns of a stat are written together, so one NULL means all.
    if (q.getColumn(col).isNull()) continue;
    r.stats[i] = RollupStat{q.getColumn(col).getDouble(), q.getColumn(col + 1).getDouble(),
                            q.getColumn(col + 2).getDouble()};
  }
  r.pcie_replay_count = ReadOptionalCounter(q, col++);
  r.ecc_sbe = ReadOptionalCounter(q, col++);
  r.ecc_dbe = ReadOptionalCounter(q, col++);
  r.throttle_reasons_seen = FromSql(q.getColumn(col++).getInt64());
  r.xid_count = q.getColumn(col++).getInt();
  return r;
}

Result<EventRecord> ReadEvent(SQLite::Statement& q) {
  EventRecord e;
  e.id = q.getColumn(0).getInt64();
  e.time = q.getColumn(1).getInt64();
  e.kind = q.getColumn(2).getString();
  const std::string severity = q.getColumn(3).getString();
  std::optional<Severity> parsed = ParseSeverity(severity);
  if (!parsed) {
    return Status(Code::kDataLoss,
                  "event " + std::to_string(e.id) + " has unknown severity '" + severity + "'");
  }
  e.severity = *parsed;
  e.gpu_uuid = q.getColumn(4).getString();
  e.message = q.getColumn(5).getString();
  e.data_json = q.getColumn(6).getString();
  return e;
}

// Bad input is refused before anything is written, with the row it is in.
Status ValidateBatch(const WriteBatch& batch) {
  for (size_t i = 0; i < batch.gpus.size(); ++i) {
    if (batch.gpus[i].uuid.empty()) {
      return InvalidArgument("GPU " + std::to_string(i) + " of the batch has an empty uuid");
    }
  }
  for (size_t i = 0; i < batch.rollups.size(); ++i) {
    const RollupRecord& r = batch.rollups[i];
    if (r.uuid.empty()) {
      return InvalidArgument("rollup " + std::to_string(i) + " of the batch has an empty uuid");
    }
    if (r.samples < 0 || r.failures < 0 || r.xid_count < 0) {
      return InvalidArgument("rollup of GPU " + r.uuid + " at minute " + FormatTimeUtc(r.minute) +
                             " has a negative count of samples, failures or XIDs");
    }
  }
  for (size_t i = 0; i < batch.events.size(); ++i) {
    if (batch.events[i].kind.empty()) {
      return InvalidArgument("event " + std::to_string(i) + " of the batch has an empty kind");
    }
  }
  for (const JobRecord& job : batch.jobs) {
    if (job.id <= 0) return InvalidArgument("a job of the batch has no id (ids start at 1)");
  }
  for (size_t i = 0; i < batch.burnin_runs.size(); ++i) {
    const BurnInRecord& r = batch.burnin_runs[i];
    const std::string which = "burn-in run " + std::to_string(i) + " of the batch";
    if (r.gpu_uuid.empty()) return InvalidArgument(which + " has an empty GPU uuid");
    if (r.level < 1 || r.level > 3) {
      return InvalidArgument(which + " has level " + std::to_string(r.level) + "; levels are 1, 2 and 3");
    }
    if (r.score < 0 || r.score > 100) {
      return InvalidArgument(which + " has score " + std::to_string(r.score) + "; scores are 0 to 100");
    }
    if (r.outcome.empty() || r.verdict.empty()) return InvalidArgument(which + " has no outcome or verdict");
    if (r.json.empty()) return InvalidArgument(which + " has no JSON record");
  }
  for (size_t i = 0; i < batch.alerts.size(); ++i) {
    const AlertRecord& a = batch.alerts[i];
    const std::string which = "alert " + std::to_string(i) + " of the batch";
    if (a.rule.empty() || a.subject.empty()) return InvalidArgument(which + " has no rule or subject");
    if (a.state != "pending" && a.state != "firing" && a.state != "resolved" && a.state != "inactive") {
      return InvalidArgument(which + " has state '" + a.state +
                             "'; states are pending, firing, resolved and inactive");
    }
  }
  return Status::Ok();
}

}  // namespace

Store::Store(std::string path, bool read_only, int schema_version,
             std::unique_ptr<SQLite::Database> db)
    : path_(std::move(path)),
      read_only_(read_only),
      schema_version_(schema_version),
      db_(std::move(db)) {}

Store::~Store() = default;

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  std::error_code ec;
  if (options.read_only && !std::filesystem::exists(path, ec)) {
    return NotFound("cannot open " + path +
                    " read-only: no such file; check --home, or start the gpuherd daemon once "
                    "to create it");
  }
  std::unique_ptr<SQLite::Database> db;
  int version = 0;
  try {
    const int flags =
        options.read_only ? SQLite::OPEN_READONLY : SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE;
    db = std::make_unique<SQLite::Database>(path, flags, kBusyTimeoutMs);
    if (!options.read_only) {
      // WAL: readers (the CLI) never block the daemon's commits, and a commit
      // costs one fsync of the log.
      const std::string mode = db->execAndGet("PRAGMA journal_mode = WAL").getString();
      if (mode != "wal") {
        return FailedPrecondition("cannot put " + path + " in WAL mode (it stays in '" + mode +
                                  "' mode); keep the state directory on a local file system");
      }
      db->exec(options.synchronous_full ? "PRAGMA synchronous = FULL"
                                        : "PRAGMA synchronous = NORMAL");
    }
    db->exec("PRAGMA foreign_keys = ON");
    version = db->execAndGet("PRAGMA user_version").getInt();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot open " + path);
  }

  const int latest = LatestSchemaVersion();
  if (options.read_only) {
    if (version > latest) {
      return FailedPrecondition("database " + path + " has schema version " +
                                std::to_string(version) + " but this gpuherd knows up to " +
                                std::to_string(latest) + "; upgrade gpuherd");
    }
    if (version < latest) {
      return FailedPrecondition("database " + path + " has schema version " +
                                std::to_string(version) + ", older than this gpuherd's " +
                                std::to_string(latest) +
                                "; open it once read-write (start the daemon) to upgrade it");
    }
  } else {
    GPUHERD_RETURN_IF_ERROR(Migrate(*db, path));
    Result<int> migrated = ReadSchemaVersion(*db);
    if (!migrated.ok()) return migrated.status();
    version = *migrated;
  }
  return std::unique_ptr<Store>(new Store(path, options.read_only, version, std::move(db)));
}

Status Store::SimulateFullDiskForTest(bool full) {
  try {
    // SQLite never lowers the limit below the current page count.
    db_->exec(full ? "PRAGMA max_page_count = 1" : "PRAGMA max_page_count = 4294967294");
    return Status::Ok();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot change the page limit of " + path_);
  }
}

Status Store::CheckWritable(const char* what) const {
  if (!read_only_) return Status::Ok();
  return FailedPrecondition(std::string("cannot ") + what + ": " + path_ + " was opened read-only");
}

void Store::UpsertGpu(const GpuRecord& gpu) {
  SQLite::Statement& q = Prepared(&upsert_gpu_, kUpsertGpuSql);
  q.bind(1, gpu.uuid);
  q.bind(2, gpu.index);
  q.bind(3, gpu.name);
  q.bind(4, gpu.serial);
  q.bind(5, gpu.pci_bus_id);
  q.bind(6, ToSql(gpu.memory_total_bytes));
  q.bind(7, gpu.info_json);
  q.bind(8, gpu.first_seen);
  q.bind(9, gpu.last_seen);
  q.exec();
}

void Store::InsertRollup(const RollupRecord& r) {
  SQLite::Statement& q = Prepared(&insert_rollup_, InsertRollupSql().c_str());
  int p = 1;
  q.bind(p++, r.uuid);
  q.bind(p++, r.minute);
  q.bind(p++, r.samples);
  q.bind(p++, r.failures);
  for (const std::optional<RollupStat>& stat : r.stats) {
    if (stat) {
      q.bind(p++, stat->min);
      q.bind(p++, stat->mean);
      q.bind(p++, stat->max);
    } else {
      q.bind(p++);
      q.bind(p++);
      q.bind(p++);
    }
  }
  for (const std::optional<uint64_t>& counter : {r.pcie_replay_count, r.ecc_sbe, r.ecc_dbe}) {
    if (counter) {
      q.bind(p++, ToSql(*counter));
    } else {
      q.bind(p++);
    }
  }
  q.bind(p++, ToSql(r.throttle_reasons_seen));
  q.bind(p++, r.xid_count);
  q.exec();
}

int64_t Store::InsertEvent(const EventRecord& e) {
  SQLite::Statement& q = Prepared(&insert_event_, kInsertEventSql);
  q.bind(1, e.time);
  q.bind(2, e.kind);
  q.bind(3, SeverityName(e.severity));
  q.bind(4, e.gpu_uuid);
  q.bind(5, e.message);
  q.bind(6, e.data_json.empty() ? std::string("{}") : e.data_json);
  q.exec();
  return db_->getLastInsertRowid();
}

Status Store::Commit(WriteBatch* batch) {
  GPUHERD_RETURN_IF_ERROR(CheckWritable("commit"));
  GPUHERD_RETURN_IF_ERROR(ValidateBatch(*batch));
  for (EventRecord& e : batch->events) e.id = 0;
  for (BurnInRecord& r : batch->burnin_runs) r.id = 0;
  if (batch->empty()) return Status::Ok();

  // Which row is being written, for the error message only.
  enum class Stage { kBegin, kGpu, kRollup, kEvent, kJob, kDrain, kBurnIn, kAlert, kPipeline, kIdempotency, kHealth, kAttempt, kCommit } stage = Stage::kBegin;
  size_t row = 0;
  std::vector<int64_t> ids;
  ids.reserve(batch->events.size());
  std::vector<int64_t> burnin_ids;
  std::string doing_pipeline;  // which pipeline row, for the error message
  burnin_ids.reserve(batch->burnin_runs.size());
  try {
    SQLite::Transaction txn(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    stage = Stage::kGpu;
    for (row = 0; row < batch->gpus.size(); ++row) UpsertGpu(batch->gpus[row]);
    stage = Stage::kRollup;
    for (row = 0; row < batch->rollups.size(); ++row) InsertRollup(batch->rollups[row]);
    stage = Stage::kEvent;
    for (row = 0; row < batch->events.size(); ++row) ids.push_back(InsertEvent(batch->events[row]));
    stage = Stage::kJob;
    for (row = 0; row < batch->jobs.size(); ++row) UpsertJob(batch->jobs[row]);
    stage = Stage::kDrain;
    for (row = 0; row < batch->drains.size(); ++row) WriteDrain(batch->drains[row]);
    stage = Stage::kBurnIn;
    for (row = 0; row < batch->burnin_runs.size(); ++row) {
      burnin_ids.push_back(InsertBurnIn(batch->burnin_runs[row]));
    }
    stage = Stage::kAlert;
    for (row = 0; row < batch->alerts.size(); ++row) WriteAlert(batch->alerts[row]);
    stage = Stage::kPipeline;
    WritePipelines(*batch, &doing_pipeline);
    stage = Stage::kIdempotency;
    WriteIdempotency(*batch);
    stage = Stage::kHealth;
    for (row = 0; row < batch->health_transitions.size(); ++row) {
      InsertHealthTransition(&batch->health_transitions[row]);
    }
    stage = Stage::kAttempt;
    for (row = 0; row < batch->attempts.size(); ++row) UpsertAttempt(batch->attempts[row]);
    stage = Stage::kCommit;
    txn.commit();
  } catch (const SQLite::Exception& e) {
    std::string doing;
    switch (stage) {
      case Stage::kBegin: doing = "starting a transaction"; break;
      case Stage::kGpu: doing = "storing GPU " + batch->gpus[row].uuid; break;
      case Stage::kRollup: {
        const RollupRecord& r = batch->rollups[row];
        doing = "storing the rollup of GPU " + r.uuid + " for minute " + FormatTimeUtc(r.minute);
        if (e.getExtendedErrorCode() == SQLITE_CONSTRAINT_FOREIGNKEY) {
          doing += " (the GPU is not stored; put it in WriteBatch::gpus)";
        }
        break;
      }
      case Stage::kEvent: doing = "storing event '" + batch->events[row].kind + "'"; break;
      case Stage::kJob: doing = "storing job " + std::to_string(batch->jobs[row].id); break;
      case Stage::kDrain: doing = "storing the drain of GPU " + batch->drains[row].uuid; break;
      case Stage::kBurnIn: doing = "storing the burn-in of GPU " + batch->burnin_runs[row].gpu_uuid; break;
      case Stage::kAlert:
        doing = "storing alert " + batch->alerts[row].rule + " of " + batch->alerts[row].subject;
        break;
      case Stage::kPipeline: doing = doing_pipeline; break;
      case Stage::kIdempotency: doing = "storing the outcome of a request's idempotency key"; break;
      case Stage::kHealth:
        doing = "storing a health transition of GPU " + batch->health_transitions[row].gpu_uuid;
        break;
      case Stage::kAttempt:
        doing = "storing attempt " + std::to_string(batch->attempts[row].attempt) + " of job " +
                std::to_string(batch->attempts[row].job_id);
        break;
      case Stage::kCommit: doing = "committing"; break;
    }
    Status st = StatusFromSqlite(e, "cannot commit to " + path_ + " while " + doing);
    return Status(st.code(), st.message() + " (nothing of the batch was kept)");
  }
  for (size_t i = 0; i < ids.size(); ++i) batch->events[i].id = ids[i];
  for (size_t i = 0; i < burnin_ids.size(); ++i) batch->burnin_runs[i].id = burnin_ids[i];
  return Status::Ok();
}

Result<std::vector<GpuRecord>> Store::ListGpus() {
  try {
    SQLite::Statement q(
        *db_, std::string("SELECT ") + kGpuColumns + " FROM gpus ORDER BY gpu_index, uuid");
    std::vector<GpuRecord> gpus;
    while (q.executeStep()) gpus.push_back(ReadGpu(q));
    return gpus;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list GPUs in " + path_);
  }
}

Result<std::optional<GpuRecord>> Store::GetGpu(const std::string& uuid) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kGpuColumns + " FROM gpus WHERE uuid = ?");
    q.bind(1, uuid);
    if (!q.executeStep()) return std::optional<GpuRecord>();
    return std::optional<GpuRecord>(ReadGpu(q));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read GPU " + uuid + " from " + path_);
  }
}

Result<std::vector<RollupRecord>> Store::QueryRollups(const std::string& uuid, TimeMs from,
                                                      TimeMs to, int limit) {
  if (limit <= 0) {
    return InvalidArgument("rollup limit must be positive, got " + std::to_string(limit));
  }
  try {
    SQLite::Statement q(*db_, "SELECT " + RollupColumns() +
                                  " FROM rollups WHERE uuid = ? AND minute >= ? AND minute < ?"
                                  " ORDER BY minute LIMIT ?");
    q.bind(1, uuid);
    q.bind(2, from);
    q.bind(3, to);
    q.bind(4, limit);
    std::vector<RollupRecord> rollups;
    while (q.executeStep()) rollups.push_back(ReadRollup(q));
    return rollups;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read rollups of GPU " + uuid + " from " + path_);
  }
}

Result<std::vector<Store::RollupBucket>> Store::QueryRollupBuckets(const std::string& uuid, TimeMs from, TimeMs to,
                                                                   DurationMs step) {
  if (step <= 0) return InvalidArgument("rollup bucket must be positive, got " + std::to_string(step));
  try {
    std::string sql = "SELECT (minute - ?2) / ?4 AS b, COUNT(*)";
    for (int i = 0; i < kRollupMetricCount; ++i) {
      sql += std::string(", AVG(") + RollupMetricName(static_cast<RollupMetric>(i)) + "_mean)";
    }
    sql += " FROM rollups WHERE uuid = ?1 AND minute >= ?2 AND minute < ?3 GROUP BY b ORDER BY b";
    SQLite::Statement q(*db_, sql);
    q.bind(1, uuid);
    q.bind(2, from);
    q.bind(3, to);
    q.bind(4, step);
    std::vector<RollupBucket> buckets;
    while (q.executeStep()) {
      RollupBucket& b = buckets.emplace_back();
      b.start = from + q.getColumn(0).getInt64() * step;
      b.minutes = q.getColumn(1).getInt();
      for (int i = 0; i < kRollupMetricCount; ++i) {
        const SQLite::Column c = q.getColumn(2 + i);
        if (!c.isNull()) b.means[i] = c.getDouble();
      }
    }
    return buckets;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read rollups of GPU " + uuid + " from " + path_);
  }
}

Result<std::vector<EventRecord>> Store::ListEvents(const EventFilter& filter) {
  if (filter.limit <= 0) {
    return InvalidArgument("event limit must be positive, got " + std::to_string(filter.limit));
  }
  // Only the conditions in use go into the query, so that the planner walks
  // the id order (or the gpu index) instead of sorting a time range.
  std::string sql = std::string("SELECT ") + kEventColumns + " FROM events WHERE 1";
  if (filter.after_id > 0) sql += " AND id > :after_id";
  if (filter.since > 0) sql += " AND time >= :since";
  if (!filter.gpu_uuid.empty()) sql += " AND gpu_uuid = :gpu";
  if (!filter.kind_prefix.empty()) sql += " AND substr(kind, 1, length(:prefix)) = :prefix";
  sql += " ORDER BY id DESC LIMIT :limit";
  try {
    SQLite::Statement q(*db_, sql);
    if (filter.after_id > 0) q.bind(":after_id", filter.after_id);
    if (filter.since > 0) q.bind(":since", filter.since);
    if (!filter.gpu_uuid.empty()) q.bind(":gpu", filter.gpu_uuid);
    if (!filter.kind_prefix.empty()) q.bind(":prefix", filter.kind_prefix);
    q.bind(":limit", filter.limit);
    std::vector<EventRecord> events;
    while (q.executeStep()) {
      Result<EventRecord> e = ReadEvent(q);
      if (!e.ok()) return e.status();
      events.push_back(std::move(*e));
    }
    std::reverse(events.begin(), events.end());
    return events;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list events in " + path_);
  }
}

Result<int64_t> Store::LastEventId() {
  try {
    return db_->execAndGet("SELECT COALESCE(MAX(id), 0) FROM events").getInt64();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the last event id from " + path_);
  }
}

Status Store::PruneRollups(TimeMs older_than) {
  GPUHERD_RETURN_IF_ERROR(CheckWritable("prune rollups"));
  try {
    // One GPU at a time so that each delete is a range of the primary key
    // (uuid, minute) rather than a scan of the whole table; the foreign key
    // guarantees that every rollup belongs to a stored GPU.
    SQLite::Transaction txn(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    SQLite::Statement uuids(*db_, "SELECT uuid FROM gpus");
    SQLite::Statement del(*db_, "DELETE FROM rollups WHERE uuid = ? AND minute < ?");
    while (uuids.executeStep()) {
      del.reset();
      del.bind(1, uuids.getColumn(0).getString());
      del.bind(2, older_than);
      del.exec();
    }
    txn.commit();
    return Status::Ok();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot prune rollups in " + path_);
  }
}

}  // namespace gpuherd::store
