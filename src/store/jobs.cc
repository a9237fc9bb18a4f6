// The Store's job and drain tables (schema version 2). Same class as
// store.cc; kept apart so that each file holds one family of tables.
#include <utility>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <SQLiteCpp/Transaction.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {
namespace {

constexpr const char* kJobColumns =
    "id, name, user, uid, state, priority, spec_json, submitted, started, ended, attempt, restarts, "
    "gpus_json, exit_code, exit_signal, reason";

constexpr const char* kUpsertJobSql =
    "INSERT INTO jobs (id, name, user, uid, state, priority, spec_json, submitted, started, ended, "
    "attempt, restarts, gpus_json, exit_code, exit_signal, reason) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET name = excluded.name, state = excluded.state, "
    "priority = excluded.priority, spec_json = excluded.spec_json, started = excluded.started, "
    "ended = excluded.ended, attempt = excluded.attempt, restarts = excluded.restarts, "
    "gpus_json = excluded.gpus_json, exit_code = excluded.exit_code, "
    "exit_signal = excluded.exit_signal, reason = excluded.reason";

JobRecord ReadJob(SQLite::Statement& q) {
  JobRecord j;
  j.id = q.getColumn(0).getInt64();
  j.name = q.getColumn(1).getString();
  j.user = q.getColumn(2).getString();
  j.uid = static_cast<uint32_t>(q.getColumn(3).getInt64());
  j.state = q.getColumn(4).getString();
  j.priority = q.getColumn(5).getInt();
  j.spec_json = q.getColumn(6).getString();
  j.submitted = q.getColumn(7).getInt64();
  j.started = q.getColumn(8).getInt64();
  j.ended = q.getColumn(9).getInt64();
  j.attempt = q.getColumn(10).getInt();
  j.restarts = q.getColumn(11).getInt();
  j.gpus_json = q.getColumn(12).getString();
  if (!q.getColumn(13).isNull()) j.exit_code = q.getColumn(13).getInt();
  if (!q.getColumn(14).isNull()) j.exit_signal = q.getColumn(14).getInt();
  j.reason = q.getColumn(15).getString();
  return j;
}

}  // namespace

void Store::UpsertJob(const JobRecord& j) {
  SQLite::Statement& q = Prepared(&upsert_job_, kUpsertJobSql);
  q.bind(1, j.id);
  q.bind(2, j.name);
  q.bind(3, j.user);
  q.bind(4, static_cast<int64_t>(j.uid));
  q.bind(5, j.state);
  q.bind(6, j.priority);
  q.bind(7, j.spec_json);
  q.bind(8, j.submitted);
  q.bind(9, j.started);
  q.bind(10, j.ended);
  q.bind(11, j.attempt);
  q.bind(12, j.restarts);
  q.bind(13, j.gpus_json);
  if (j.exit_code) q.bind(14, *j.exit_code); else q.bind(14);
  if (j.exit_signal) q.bind(15, *j.exit_signal); else q.bind(15);
  q.bind(16, j.reason);
  q.exec();
}

void Store::WriteDrain(const DrainRecord& d) {
  if (d.drained) {
    SQLite::Statement q(*db_,
                        "INSERT INTO gpu_drains (uuid, reason, since, origin) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (uuid) DO UPDATE SET reason = excluded.reason, since = excluded.since, "
                        "origin = excluded.origin");
    q.bind(1, d.uuid);
    q.bind(2, d.reason);
    q.bind(3, d.since);
    q.bind(4, d.origin);
    q.exec();
  } else {
    SQLite::Statement q(*db_, "DELETE FROM gpu_drains WHERE uuid = ?");
    q.bind(1, d.uuid);
    q.exec();
  }
}

Result<std::vector<JobRecord>> Store::ListUnfinishedJobs() {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kJobColumns +
                                  " FROM jobs WHERE state NOT IN ('completed', 'failed', 'cancelled') ORDER BY id");
    std::vector<JobRecord> jobs;
    while (q.executeStep()) jobs.push_back(ReadJob(q));
    return jobs;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list jobs in " + path_);
  }
}

Result<std::vector<JobRecord>> Store::ListFinishedJobs(TimeMs since, int limit) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kJobColumns +
                                  " FROM jobs WHERE state IN ('completed', 'failed', 'cancelled') AND ended >= ?"
                                  " ORDER BY ended DESC, id DESC LIMIT ?");
    q.bind(1, since);
    q.bind(2, limit);
    std::vector<JobRecord> jobs;
    while (q.executeStep()) jobs.push_back(ReadJob(q));
    return jobs;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list finished jobs in " + path_);
  }
}

Result<std::vector<JobStateRecord>> Store::ListJobStates(int64_t first, int64_t last) {
  try {
    SQLite::Statement q(*db_, "SELECT id, name, state FROM jobs WHERE id BETWEEN ? AND ? ORDER BY id");
    q.bind(1, first);
    q.bind(2, last);
    std::vector<JobStateRecord> jobs;
    while (q.executeStep()) {
      jobs.push_back({q.getColumn(0).getInt64(), q.getColumn(1).getString(), q.getColumn(2).getString()});
    }
    return jobs;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list jobs " + std::to_string(first) + " to " + std::to_string(last) + " in " +
                                   path_);
  }
}

Result<std::optional<JobRecord>> Store::GetJob(int64_t id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?");
    q.bind(1, id);
    if (!q.executeStep()) return std::optional<JobRecord>();
    return std::optional<JobRecord>(ReadJob(q));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read job " + std::to_string(id) + " from " + path_);
  }
}

Result<int64_t> Store::LastJobId() {
  try {
    // sqlite_sequence keeps the highest id AUTOINCREMENT ever saw, even when
    // explicit ids were inserted, so ids stay monotonic.
    SQLite::Statement q(*db_, "SELECT seq FROM sqlite_sequence WHERE name = 'jobs'");
    if (!q.executeStep()) return int64_t{0};
    return q.getColumn(0).getInt64();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the last job id from " + path_);
  }
}

Status Store::ReserveIdsThrough(int64_t last_job_id, int64_t last_pipeline_run_id) {
  GPUHERD_RETURN_IF_ERROR(CheckWritable("reserve ids"));
  try {
    // sqlite_sequence has no unique constraint on name: update the row, and
    // insert one only where the table has never had an id.
    SQLite::Transaction txn(*db_, SQLite::TransactionBehavior::IMMEDIATE);
    for (const auto& [table, last] : {std::pair<const char*, int64_t>{"jobs", last_job_id},
                                      std::pair<const char*, int64_t>{"pipeline_runs", last_pipeline_run_id}}) {
      if (last <= 0) continue;
      SQLite::Statement update(*db_, "UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = ?");
      update.bind(1, last);
      update.bind(2, table);
      if (update.exec() == 0) {
        SQLite::Statement insert(*db_, "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)");
        insert.bind(1, table);
        insert.bind(2, last);
        insert.exec();
      }
    }
    txn.commit();
    return Status::Ok();
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot reserve job and pipeline ids in " + path_);
  }
}

Result<std::vector<DrainRecord>> Store::ListDrains() {
  try {
    SQLite::Statement q(*db_, "SELECT uuid, reason, since, origin FROM gpu_drains ORDER BY uuid");
    std::vector<DrainRecord> drains;
    while (q.executeStep()) {
      drains.push_back({q.getColumn(0).getString(), true, q.getColumn(1).getString(), q.getColumn(2).getInt64(),
                        q.getColumn(3).getString()});
    }
    return drains;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list drained GPUs in " + path_);
  }
}

}  // namespace gpuherd::store
