// The Store's burn-in table (schema version 3). Same class as store.cc; kept
// apart so that each file holds one family of tables.
#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>

#include "store/migrations.h"
#include "store/store.h"

namespace gpuherd::store {
namespace {

constexpr const char* kBurnInColumns =
    "id, gpu_uuid, gpu_name, level, started, finished, outcome, verdict, score, job_id, json";

// Newest first; the id breaks ties between runs that finished in the same
// millisecond (the GPUs of one burn-in finish together).
constexpr const char* kNewestFirst = " ORDER BY finished DESC, id DESC";

BurnInRecord ReadBurnIn(SQLite::Statement& q) {
  BurnInRecord r;
  r.id = q.getColumn(0).getInt64();
  r.gpu_uuid = q.getColumn(1).getString();
  r.gpu_name = q.getColumn(2).getString();
  r.level = q.getColumn(3).getInt();
  r.started = q.getColumn(4).getInt64();
  r.finished = q.getColumn(5).getInt64();
  r.outcome = q.getColumn(6).getString();
  r.verdict = q.getColumn(7).getString();
  r.score = q.getColumn(8).getInt();
  r.job_id = q.getColumn(9).getInt64();
  r.json = q.getColumn(10).getString();
  return r;
}

}  // namespace

int64_t Store::InsertBurnIn(const BurnInRecord& r) {
  SQLite::Statement q(*db_,
                      "INSERT INTO burnin_runs (gpu_uuid, gpu_name, level, started, finished, outcome, "
                      "verdict, score, job_id, json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  q.bind(1, r.gpu_uuid);
  q.bind(2, r.gpu_name);
  q.bind(3, r.level);
  q.bind(4, r.started);
  q.bind(5, r.finished);
  q.bind(6, r.outcome);
  q.bind(7, r.verdict);
  q.bind(8, r.score);
  q.bind(9, r.job_id);
  q.bind(10, r.json);
  q.exec();
  return db_->getLastInsertRowid();
}

Result<std::vector<BurnInRecord>> Store::ListBurnInRuns(const BurnInFilter& filter) {
  if (filter.limit <= 0) {
    return InvalidArgument("burn-in run limit must be positive, got " + std::to_string(filter.limit));
  }
  std::string sql = std::string("SELECT ") + kBurnInColumns + " FROM burnin_runs WHERE 1";
  if (!filter.gpu_uuid.empty()) sql += " AND gpu_uuid = :gpu";
  if (!filter.gpu_name.empty()) sql += " AND gpu_name = :model";
  sql += std::string(kNewestFirst) + " LIMIT :limit";
  try {
    SQLite::Statement q(*db_, sql);
    if (!filter.gpu_uuid.empty()) q.bind(":gpu", filter.gpu_uuid);
    if (!filter.gpu_name.empty()) q.bind(":model", filter.gpu_name);
    q.bind(":limit", filter.limit);
    std::vector<BurnInRecord> runs;
    while (q.executeStep()) runs.push_back(ReadBurnIn(q));
    return runs;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot list burn-in runs in " + path_);
  }
}

Result<std::optional<BurnInRecord>> Store::GetBurnInRun(int64_t id) {
  try {
    SQLite::Statement q(*db_, std::string("SELECT ") + kBurnInColumns + " FROM burnin_runs WHERE id = ?");
    q.bind(1, id);
    if (!q.executeStep()) return std::optional<BurnInRecord>();
    return std::optional<BurnInRecord>(ReadBurnIn(q));
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read burn-in run " + std::to_string(id) + " from " + path_);
  }
}

Result<std::vector<BurnInRecord>> Store::LatestBurnInPerGpu() {
  // One index lookup per GPU: the distinct uuids come from the
  // (gpu_uuid, finished) index, and each GPU's newest finished run from a
  // walk down the same index.
  const std::string sql = std::string("SELECT ") + kBurnInColumns +
                          " FROM burnin_runs WHERE id IN (SELECT (SELECT id FROM burnin_runs AS n"
                          " WHERE n.gpu_uuid = g.gpu_uuid AND n.outcome IN ('passed', 'faults_found')" +
                          kNewestFirst +
                          " LIMIT 1) FROM (SELECT DISTINCT gpu_uuid FROM burnin_runs) AS g)"
                          " ORDER BY gpu_uuid";
  try {
    SQLite::Statement q(*db_, sql);
    std::vector<BurnInRecord> runs;
    while (q.executeStep()) runs.push_back(ReadBurnIn(q));
    return runs;
  } catch (const SQLite::Exception& e) {
    return StatusFromSqlite(e, "cannot read the latest burn-in of each GPU from " + path_);
  }
}

}  // namespace gpuherd::store
