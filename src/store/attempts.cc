// The Store's job_attempts table: one row per run of a job. Same class as
// store.cc; kept apart so that each file holds one family of tables.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {
namespace {

constexpr const char* kAttemptColumns =
    "job_id, attempt, user, gpus_json, gpu_twentieths, started, ended, end_cause, exit_code, exit_signal, reason, "
    "util_samples, gpu_util_mean, peak_gpu_mem_bytes";

AttemptRecord ReadAttempt(SQLite::Statement& q) {
  AttemptRecord a;
  a.job_id = q.getColumn(0).getInt64();
  a.attempt = q.getColumn(1).getInt();
  a.user = q.getColumn(2).getString();
  a.gpus_json = q.getColumn(3).getString();
  a.gpu_twentieths = q.getColumn(4).getInt();
  a.started = q.getColumn(5).getInt64();
  a.ended = q.getColumn(6).getInt64();
  a.end_cause = q.getColumn(7).getString();
  if (!q.getColumn(8).isNull()) a.exit_code = q.getColumn(8).getInt();
  if (!q.getColumn(9).isNull()) a.exit_signal = q.getColumn(9).getInt();
  a.reason = q.getColumn(10).getString();
  a.util_samples = q.getColumn(11).getInt();
  if (!q.getColumn(12).isNull()) a.gpu_util_mean = q.getColumn(12).getDouble();
  if (!q.getColumn(13).isNull()) a.peak_gpu_mem_bytes = static_cast<uint64_t>(q.getColumn(13).getInt64());
  return a;
}

// The jobs an AcctFilter selects, as a WHERE clause over `jobs` with the
// parameters since (twice) and user (twice).
constexpr const char* kAcctJobsWhere =
    " WHERE (state NOT IN ('completed', 'failed', 'cancelled') OR submitted >= ?1 OR ended >= ?1)"
    " AND (?2 = '' OR user = ?2)";

}  // namespace

void Store::UpsertAttempt(const AttemptRecord& a) {
  // Prepared once: every job's start and end writes one.
  SQLite::Statement& q = Prepared(&upsert_attempt_,
                      "INSERT INTO job_attempts (job_id, attempt, user, gpus_json, gpu_twentieths, started, ended, "
                      "end_cause, exit_code, exit_signal, reason, util_samples, gpu_util_mean, peak_gpu_mem_bytes) "
                      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                      "ON CONFLICT (job_id, attempt) DO UPDATE SET user = excluded.user, "
                      "gpus_json = excluded.gpus_json, gpu_twentieths = excluded.gpu_twentieths, "
                      "started = excluded.started, ended = excluded.ended, end_cause = excluded.end_cause, "
                      "exit_code = excluded.exit_code, exit_signal = excluded.exit_signal, "
                      "reason = excluded.reason, util_samples = excluded.util_samples, "
                      "gpu_util_mean = excluded.gpu_util_mean, peak_gpu_mem_bytes = excluded.peak_gpu_mem_bytes");
  q.bind(1, a.job_id);
  q.bind(2, a.attempt);
  q.bind(3, a.user);
  q.bind(4, a.gpus_json);
  q.bind(5, a.gpu_twentieths);
  q.bind(6, a.started);
  q.bind(7, a.ended);
  q.bind(8, a.end_cause);
  if (a.exit_code) q.bind(9, *a.exit_code); else q.bind(9);
  if (a.exit_signal) q.bind(10, *a.exit_signal); else q.bind(10);
  q.bind(11, a.reason);
  q.bind(12, a.util_samples);
  if (a.gpu_util_mean) q.bind(13, *a.gpu_util_mean); else q.bind(13);
  if (a.peak_gpu_mem_bytes) q.bind(14, static_cast<int64_t>(*a.peak_gpu_mem_bytes)); else q.bind(14);
  q.exec();
}

Result<std::vector<AttemptRecord>> Store::ListAttempts(int64_t job_id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kAttemptColumns +
                                  " FROM job_attempts WHERE job_id = ? ORDER BY attempt");
    q.bind(1, job_id);
    std::vector<AttemptRecord> rows;
    while (q.executeStep()) rows.push_back(ReadAttempt(q));
    return rows;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list the attempts of job " + std::to_string(job_id) + " in " + path_);
  }
}

Result<std::vector<AttemptRecord>> Store::ListOpenAttempts() {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kAttemptColumns +
                                  " FROM job_attempts WHERE ended = 0 ORDER BY job_id, attempt");
    std::vector<AttemptRecord> rows;
    while (q.executeStep()) rows.push_back(ReadAttempt(q));
    return rows;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list running attempts in " + path_);
  }
}

Result<std::pair<std::vector<JobRecord>, std::vector<AttemptRecord>>> Store::ListAccounting(
    const AcctFilter& filter) {
  try {
    std::pair<std::vector<JobRecord>, std::vector<AttemptRecord>> out;
    // The newest `limit` jobs, returned oldest first.
    SQLite::Statement jobs(*db_, std::string("SELECT * FROM (SELECT id, name, user, uid, state, priority, '', "
                                             "submitted, started, ended, attempt, restarts, gpus_json, exit_code, "
                                             "exit_signal, reason FROM jobs") +
                                     kAcctJobsWhere + " ORDER BY id DESC LIMIT ?3) ORDER BY id");
    jobs.bind(1, filter.since);
    jobs.bind(2, filter.user);
    jobs.bind(3, filter.limit);
    while (jobs.executeStep()) {
      JobRecord j;
      j.id = jobs.getColumn(0).getInt64();
      j.name = jobs.getColumn(1).getString();
      j.user = jobs.getColumn(2).getString();
      j.uid = static_cast<uint32_t>(jobs.getColumn(3).getInt64());
      j.state = jobs.getColumn(4).getString();
      j.priority = jobs.getColumn(5).getInt();
      j.submitted = jobs.getColumn(7).getInt64();
      j.started = jobs.getColumn(8).getInt64();
      j.ended = jobs.getColumn(9).getInt64();
      j.attempt = jobs.getColumn(10).getInt();
      j.restarts = jobs.getColumn(11).getInt();
      j.gpus_json = jobs.getColumn(12).getString();
      if (!jobs.getColumn(13).isNull()) j.exit_code = jobs.getColumn(13).getInt();
      if (!jobs.getColumn(14).isNull()) j.exit_signal = jobs.getColumn(14).getInt();
      j.reason = jobs.getColumn(15).getString();
      out.first.push_back(std::move(j));
    }
    if (out.first.empty()) return out;
    SQLite::Statement attempts(*db_, std::string("SELECT ") + kAttemptColumns +
                                         " FROM job_attempts WHERE job_id BETWEEN ? AND ? ORDER BY job_id, attempt");
    attempts.bind(1, out.first.front().id);
    attempts.bind(2, out.first.back().id);
    size_t next = 0;  // both lists are ordered by job id: keep the selected jobs' attempts only
    while (attempts.executeStep()) {
      AttemptRecord a = ReadAttempt(attempts);
      while (next < out.first.size() && out.first[next].id < a.job_id) ++next;
      if (next < out.first.size() && out.first[next].id == a.job_id) out.second.push_back(std::move(a));
    }
    return out;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the accounting of jobs in " + path_);
  }
}

}  // namespace gpuherd::store
