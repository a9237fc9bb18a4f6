#include "store/migrations.h"

#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "store/records.h"

namespace gpuherd::store {
namespace {

namespace fs = std::filesystem;

class MigrationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("gpuherd_migrations_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    db_ = std::make_unique<SQLite::Database>((dir_ / "state.db").string(),
                                             SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  }
  void TearDown() override {
    db_.reset();
    fs::remove_all(dir_);
  }

  int UserVersion() { return db_->execAndGet("PRAGMA user_version").getInt(); }
  std::set<std::string> Columns(const std::string& table) {
    std::set<std::string> names;
    SQLite::Statement q(*db_, "SELECT name FROM pragma_table_info(?)");
    q.bind(1, table);
    while (q.executeStep()) names.insert(q.getColumn(0).getString());
    return names;
  }

  fs::path dir_;
  std::unique_ptr<SQLite::Database> db_;
};

// Steps for the tests of the upgrade machinery itself.
std::string CreateT() { return "CREATE TABLE t (x INTEGER NOT NULL);"; }
std::string AddY() { return "ALTER TABLE t ADD COLUMN y INTEGER NOT NULL DEFAULT 7;"; }
std::string Broken() { return "CREATE TABLE u (a); INSERT INTO no_such_table VALUES (1);"; }

TEST(MigrationListTest, IsNumberedFromOneWithoutGaps) {
  std::span<const Migration> steps = Migrations();
  ASSERT_FALSE(steps.empty());
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].version, static_cast<int>(i) + 1);
    EXPECT_NE(std::string(steps[i].summary), "");
  }
  EXPECT_EQ(LatestSchemaVersion(), static_cast<int>(steps.size()));
}

TEST_F(MigrationsTest, FreshFileGetsTheLatestSchema) {
  ASSERT_EQ(UserVersion(), 0);
  Status st = Migrate(*db_, "state.db");
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(UserVersion(), LatestSchemaVersion());
  EXPECT_TRUE(db_->tableExists("gpus"));
  EXPECT_TRUE(db_->tableExists("events"));

  std::set<std::string> rollup_columns = Columns("rollups");
  for (int i = 0; i < kRollupMetricCount; ++i) {
    const std::string stem = RollupMetricName(static_cast<RollupMetric>(i));
    for (const char* suffix : {"_min", "_mean", "_max"}) {
      EXPECT_TRUE(rollup_columns.count(stem + suffix)) << stem + suffix;
    }
  }
  for (const char* c : {"uuid", "minute", "samples", "failures", "pcie_replay_count", "ecc_sbe",
                        "ecc_dbe", "throttle_reasons_seen", "xid_count"}) {
    EXPECT_TRUE(rollup_columns.count(c)) << c;
  }

  // Running again finds nothing to do.
  st = Migrate(*db_, "state.db");
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(UserVersion(), LatestSchemaVersion());
}

TEST_F(MigrationsTest, UpgradesAnOlderFileAndKeepsItsRows) {
  const Migration steps[] = {{1, "table t", &CreateT}, {2, "column y", &AddY}};
  ASSERT_TRUE(Migrate(*db_, "state.db", std::span(steps, 1)).ok());
  ASSERT_EQ(UserVersion(), 1);
  db_->exec("INSERT INTO t (x) VALUES (42)");

  Status st = Migrate(*db_, "state.db", steps);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(UserVersion(), 2);
  SQLite::Statement q(*db_, "SELECT x, y FROM t");
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getInt(), 42);
  EXPECT_EQ(q.getColumn(1).getInt(), 7);
}

TEST_F(MigrationsTest, PipelineNodesKeepTheirRowsAndMayEndStopped) {
  // A version-6 file with a finished node: the rebuild of pipeline_nodes
  // keeps it, and 'stopped' is a state from version 7 on.
  std::span<const Migration> all = Migrations();
  ASSERT_TRUE(Migrate(*db_, "state.db", all.first(6)).ok());
  db_->exec("INSERT INTO pipeline_runs VALUES (1, 'p', 'p.yaml', '/', 'steps: {}', '{}', '/r', 'running', '', 1, 0, "
            "'u', 1000, 1000)");
  db_->exec("INSERT INTO pipeline_nodes VALUES (1, 'train[lr=1]', 'train/0', 'train', 'completed', 1, 5, 10, 20, '', "
            "2.5)");
  EXPECT_THROW(db_->exec("UPDATE pipeline_nodes SET state = 'stopped'"), SQLite::Exception);
  ASSERT_TRUE(Migrate(*db_, "state.db").ok());
  SQLite::Statement q(*db_, "SELECT node_id, state, job_id, gpu_seconds FROM pipeline_nodes");
  ASSERT_TRUE(q.executeStep());
  EXPECT_EQ(q.getColumn(0).getString(), "train[lr=1]");
  EXPECT_EQ(q.getColumn(1).getString(), "completed");
  EXPECT_EQ(q.getColumn(2).getInt(), 5);
  EXPECT_DOUBLE_EQ(q.getColumn(3).getDouble(), 2.5);
  db_->exec("UPDATE pipeline_nodes SET state = 'stopped'");
  EXPECT_THROW(db_->exec("UPDATE pipeline_nodes SET state = 'halted'"), SQLite::Exception);
}

// A version-11 file's jobs, events and attempts survive the rebuild of
// version 12 with their ids and id counters, the constraints still hold, and
// no statement the queue runs for every job builds a temporary b-tree
// (SQLite did, for each row, for an IN list in a CHECK or a partial index).
TEST_F(MigrationsTest, HotTablesKeepRowsAndCountersAndWriteWithoutTemporaryTrees) {
  std::span<const Migration> all = Migrations();
  ASSERT_TRUE(Migrate(*db_, "state.db", all.first(11)).ok());
  db_->exec("INSERT INTO jobs VALUES (7, 'train', 'ana', 1000, 'completed', 0, '{}', 1, 2, 3, 1, 0, '[]', 0, NULL, "
            "'exited with code 0')");
  db_->exec("INSERT INTO jobs VALUES (9, 'gone', 'ana', 1000, 'cancelled', 0, '{}', 1, 0, 3, 0, 0, '[]', NULL, NULL, '')");
  db_->exec("DELETE FROM jobs WHERE id = 9");  // the counter stays at 9
  db_->exec("INSERT INTO events VALUES (41, 5, 'job.completed', 'info', '', 'job 7', '{}')");
  db_->exec("INSERT INTO job_attempts VALUES (7, 1, 'ana', '[]', 20, 2, 3, 'completed', 0, NULL, '', 4, 55.5, 1024)");
  db_->exec("INSERT INTO pipeline_runs VALUES (1, 'p', 'p.yaml', '/', 'steps: {}', '{}', '/r', 'running', '', 1, 0, "
            "'u', 1000, 1000)");
  db_->exec("INSERT INTO pipeline_nodes VALUES (1, 'train[lr=1]', 'train/0', 'train', 'stopped', 1, 7, 10, 20, '', "
            "2.5, '[\"early_stop\"]')");
  ASSERT_TRUE(Migrate(*db_, "state.db").ok());
  EXPECT_EQ(db_->execAndGet("SELECT state || ' ' || history_json FROM pipeline_nodes").getString(),
            "stopped [\"early_stop\"]");
  EXPECT_EQ(db_->execAndGet("SELECT name || ' ' || state || ' ' || reason FROM jobs WHERE id = 7").getString(),
            "train completed exited with code 0");
  EXPECT_EQ(db_->execAndGet("SELECT message FROM events WHERE id = 41").getString(), "job 7");
  EXPECT_DOUBLE_EQ(db_->execAndGet("SELECT gpu_util_mean FROM job_attempts WHERE job_id = 7").getDouble(), 55.5);
  db_->exec("INSERT INTO jobs (name, user, uid, state, priority, spec_json, submitted, started, ended, attempt, "
            "restarts, gpus_json, reason) VALUES ('next', 'ana', 1000, 'pending', 0, '{}', 4, 0, 0, 0, 0, '[]', '')");
  EXPECT_EQ(db_->execAndGet("SELECT max(id) FROM jobs").getInt(), 10);
  db_->exec("INSERT INTO events (time, kind, severity, gpu_uuid, message, data_json) "
            "VALUES (6, 'job.submitted', 'info', '', 'job 10', '{}')");
  EXPECT_EQ(db_->execAndGet("SELECT max(id) FROM events").getInt(), 42);
  EXPECT_THROW(db_->exec("UPDATE jobs SET state = 'lost' WHERE id = 7"), SQLite::Exception);
  EXPECT_THROW(db_->exec("UPDATE events SET severity = 'loud'"), SQLite::Exception);
  EXPECT_THROW(db_->exec("UPDATE job_attempts SET end_cause = 'bored'"), SQLite::Exception);
  EXPECT_THROW(db_->exec("UPDATE pipeline_nodes SET state = 'halted'"), SQLite::Exception);
  // The unfinished jobs' index still holds exactly the unfinished ones.
  EXPECT_EQ(db_->execAndGet("SELECT count(*) FROM jobs INDEXED BY jobs_unfinished WHERE state <> 'completed' AND "
                            "state <> 'failed' AND state <> 'cancelled'").getInt(), 1);
  for (const char* sql : {
           "INSERT INTO events (time, kind, severity, gpu_uuid, message, data_json) VALUES (1, 'k', 'info', '', '', '')",
           "INSERT INTO jobs (id, name, user, uid, state, priority, spec_json, submitted, started, ended, attempt, "
           "restarts, gpus_json, exit_code, exit_signal, reason) VALUES (1, '', '', 0, 'running', 0, '', 0, 0, 0, 0, 0, "
           "'', NULL, NULL, '') ON CONFLICT (id) DO UPDATE SET state = excluded.state",
           "INSERT OR REPLACE INTO job_attempts VALUES (1, 1, '', '', 0, 0, 0, 'failed', NULL, NULL, '', 0, NULL, NULL)",
       }) {
    SQLite::Statement explain(*db_, std::string("EXPLAIN ") + sql);
    while (explain.executeStep()) EXPECT_NE(explain.getColumn(1).getString(), "OpenEphemeral") << sql;
  }
}

TEST_F(MigrationsTest, FailingStepLeavesTheLastGoodVersion) {
  const Migration steps[] = {{1, "table t", &CreateT}, {2, "broken step", &Broken}};
  Status st = Migrate(*db_, "state.db", steps);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("schema version 2 (broken step)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("no_such_table"), std::string::npos) << st.message();
  EXPECT_EQ(UserVersion(), 1);
  EXPECT_TRUE(db_->tableExists("t"));
  EXPECT_FALSE(db_->tableExists("u"));  // the failed step's first statement was rolled back
}

TEST_F(MigrationsTest, RefusesANewerFileUntouched) {
  db_->exec("PRAGMA user_version = 9");
  const Migration steps[] = {{1, "table t", &CreateT}};
  Status st = Migrate(*db_, "/x/state.db", steps);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            "database /x/state.db has schema version 9 but this gpuherd knows up to 1; "
            "upgrade gpuherd");
  EXPECT_EQ(UserVersion(), 9);
  EXPECT_FALSE(db_->tableExists("t"));
}

TEST_F(MigrationsTest, RefusesAListWithAGap) {
  const Migration steps[] = {{1, "table t", &CreateT}, {3, "column y", &AddY}};
  Status st = Migrate(*db_, "state.db", steps);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_EQ(UserVersion(), 0);
}

TEST(StatusFromSqliteTest, PicksTheCodeAndAddsWhatToDo) {
  Status busy = StatusFromSqlite(SQLite::Exception("database is locked", SQLITE_BUSY), "cannot x");
  EXPECT_EQ(busy.code(), Code::kUnavailable);
  EXPECT_EQ(busy.message().rfind("cannot x: database is locked; another process", 0), 0u)
      << busy.message();

  Status cant = StatusFromSqlite(SQLite::Exception("unable to open database file", SQLITE_CANTOPEN),
                                 "cannot open /x/state.db");
  EXPECT_EQ(cant.code(), Code::kIoError);
  EXPECT_EQ(cant.message(),
            "cannot open /x/state.db: unable to open database file; check that the directory "
            "exists and is writable");

  Status full = StatusFromSqlite(SQLite::Exception("database or disk is full", SQLITE_FULL), "c");
  EXPECT_EQ(full.code(), Code::kIoError);
  Status constraint =
      StatusFromSqlite(SQLite::Exception("UNIQUE constraint failed", SQLITE_CONSTRAINT), "c");
  EXPECT_EQ(constraint.code(), Code::kInvalidArgument);
  Status corrupt = StatusFromSqlite(SQLite::Exception("malformed", SQLITE_CORRUPT), "c");
  EXPECT_EQ(corrupt.code(), Code::kDataLoss);
}

}  // namespace
}  // namespace gpuherd::store
