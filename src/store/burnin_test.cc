#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "store/migrations.h"
#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

constexpr TimeMs kT0 = 1767225600000;  // 2026-01-01T00:00:00Z
constexpr const char* kGtx = "NVIDIA GeForce GTX 1070 Ti";
constexpr const char* kH100 = "NVIDIA H100 80GB HBM3";

class BurnInStoreTest : public StoreFileTest {
 protected:
  static BurnInRecord Run(const std::string& uuid, const std::string& model, TimeMs finished,
                          const std::string& outcome = "passed", int score = 97) {
    BurnInRecord r;
    r.gpu_uuid = uuid;
    r.gpu_name = model;
    r.level = 2;
    r.started = finished - 60000;
    r.finished = finished;
    r.outcome = outcome;
    r.verdict = outcome == "passed" ? "healthy" : outcome == "faults_found" ? "unhealthy" : "unknown";
    r.score = score;
    r.json = R"({"gpu_uuid":")" + uuid + R"(","finished":)" + std::to_string(finished) + "}";
    return r;
  }

  // Commits `runs` one batch each (as separate burn-ins would) and returns their ids.
  std::vector<int64_t> CommitEach(Store& store, const std::vector<BurnInRecord>& runs) {
    std::vector<int64_t> ids;
    for (const BurnInRecord& r : runs) {
      WriteBatch batch;
      batch.burnin_runs = {r};
      Status s = store.Commit(&batch);
      EXPECT_TRUE(s.ok()) << s.ToString();
      ids.push_back(batch.burnin_runs[0].id);
    }
    return ids;
  }

  static std::vector<int64_t> Ids(const Result<std::vector<BurnInRecord>>& runs) {
    EXPECT_TRUE(runs.ok()) << runs.status().ToString();
    std::vector<int64_t> ids;
    if (runs.ok()) {
      for (const BurnInRecord& r : *runs) ids.push_back(r.id);
    }
    return ids;
  }
};

TEST_F(BurnInStoreTest, CommitAssignsIdsInOrderAndEveryFieldRoundTrips) {
  auto store = Open();
  WriteBatch batch;
  BurnInRecord a = Run("GPU-a", kGtx, kT0 + 5000);
  a.level = 3;
  a.job_id = 42;
  a.json = R"({"checks":[{"name":"memtest.walking_ones","outcome":"fail"}],"note":"ü"})";
  batch.burnin_runs = {a, Run("GPU-b", kGtx, kT0 + 5000, "faults_found", 0)};
  ASSERT_TRUE(store->Commit(&batch).ok());
  ASSERT_GT(batch.burnin_runs[0].id, 0);
  EXPECT_EQ(batch.burnin_runs[1].id, batch.burnin_runs[0].id + 1);

  store.reset();
  auto reopened = Open({.read_only = true});
  auto got = reopened->GetBurnInRun(batch.burnin_runs[0].id);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  const BurnInRecord& r = **got;
  EXPECT_EQ(r.id, batch.burnin_runs[0].id);
  EXPECT_EQ(r.gpu_uuid, "GPU-a");
  EXPECT_EQ(r.gpu_name, kGtx);
  EXPECT_EQ(r.level, 3);
  EXPECT_EQ(r.started, kT0 - 55000);
  EXPECT_EQ(r.finished, kT0 + 5000);
  EXPECT_EQ(r.outcome, "passed");
  EXPECT_EQ(r.verdict, "healthy");
  EXPECT_EQ(r.score, 97);
  EXPECT_EQ(r.job_id, 42);
  EXPECT_EQ(r.json, a.json);

  auto missing = reopened->GetBurnInRun(batch.burnin_runs[1].id + 1);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_F(BurnInStoreTest, ListsNewestFirstAndFiltersByGpuAndModel) {
  auto store = Open();
  // Committed out of time order: the list follows `finished`, not insertion.
  std::vector<int64_t> ids = CommitEach(*store, {Run("GPU-a", kGtx, kT0 + 3000), Run("GPU-a", kGtx, kT0 + 1000),
                                                 Run("GPU-b", kGtx, kT0 + 2000), Run("GPU-h", kH100, kT0 + 4000)});
  EXPECT_EQ(Ids(store->ListBurnInRuns({})), (std::vector<int64_t>{ids[3], ids[0], ids[2], ids[1]}));

  BurnInFilter by_gpu;
  by_gpu.gpu_uuid = "GPU-a";
  EXPECT_EQ(Ids(store->ListBurnInRuns(by_gpu)), (std::vector<int64_t>{ids[0], ids[1]}));

  BurnInFilter by_model;
  by_model.gpu_name = kGtx;
  by_model.limit = 2;
  EXPECT_EQ(Ids(store->ListBurnInRuns(by_model)), (std::vector<int64_t>{ids[0], ids[2]}));

  BurnInFilter both;
  both.gpu_uuid = "GPU-h";
  both.gpu_name = kGtx;
  EXPECT_TRUE(Ids(store->ListBurnInRuns(both)).empty());

  BurnInFilter bad;
  bad.limit = 0;
  auto refused = store->ListBurnInRuns(bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
}

TEST_F(BurnInStoreTest, RunsFinishedInTheSameMillisecondListTheLaterCommitFirst) {
  auto store = Open();
  std::vector<int64_t> ids = CommitEach(*store, {Run("GPU-a", kGtx, kT0), Run("GPU-a", kGtx, kT0)});
  EXPECT_EQ(Ids(store->ListBurnInRuns({})), (std::vector<int64_t>{ids[1], ids[0]}));
}

TEST_F(BurnInStoreTest, LatestPerGpuPassesOverRunsThatSayNothingAboutTheCard) {
  auto store = Open();
  std::vector<int64_t> ids = CommitEach(
      *store, {
                  Run("GPU-a", kGtx, kT0 + 1000, "passed"),
                  Run("GPU-a", kGtx, kT0 + 2000, "faults_found", 0),  // the verdict of GPU-a
                  Run("GPU-a", kGtx, kT0 + 3000, "aborted", 0),
                  Run("GPU-a", kGtx, kT0 + 4000, "could_not_run", 0),
                  Run("GPU-b", kGtx, kT0 + 9000, "passed"),           // the verdict of GPU-b
                  Run("GPU-b", kGtx, kT0 + 5000, "faults_found", 0),
                  Run("GPU-c", kGtx, kT0 + 1000, "aborted", 0),       // never finished: no verdict
              });
  auto latest = store->LatestBurnInPerGpu();
  ASSERT_TRUE(latest.ok()) << latest.status().ToString();
  ASSERT_EQ(latest->size(), 2u);
  EXPECT_EQ((*latest)[0].gpu_uuid, "GPU-a");
  EXPECT_EQ((*latest)[0].id, ids[1]);
  EXPECT_EQ((*latest)[0].verdict, "unhealthy");
  EXPECT_EQ((*latest)[1].gpu_uuid, "GPU-b");
  EXPECT_EQ((*latest)[1].id, ids[4]);
}

TEST_F(BurnInStoreTest, BadRunsAreRefusedBeforeAnythingIsWritten) {
  auto store = Open();
  auto refuse = [&](BurnInRecord bad, const std::string& expected) {
    WriteBatch batch;
    batch.events.push_back(EventRecord{0, kT0, "operator.note", Severity::kInfo, "", "hello", "{}"});
    batch.burnin_runs = {Run("GPU-ok", kGtx, kT0), bad};
    Status s = store->Commit(&batch);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find(expected), std::string::npos) << s.message();
    EXPECT_EQ(batch.burnin_runs[0].id, 0);
  };
  BurnInRecord level = Run("GPU-a", kGtx, kT0);
  level.level = 4;
  refuse(level, "burn-in run 1 of the batch has level 4; levels are 1, 2 and 3");
  BurnInRecord score = Run("GPU-a", kGtx, kT0);
  score.score = 101;
  refuse(score, "has score 101");
  refuse(Run("", kGtx, kT0), "empty GPU uuid");
  BurnInRecord no_json = Run("GPU-a", kGtx, kT0);
  no_json.json.clear();
  refuse(no_json, "no JSON record");

  EXPECT_TRUE(Ids(store->ListBurnInRuns({})).empty());
  EXPECT_EQ(*store->LastEventId(), 0);
}

TEST_F(BurnInStoreTest, AFailingBatchKeepsNoRunAndLeavesTheIdsAtZero) {
  auto store = Open();
  WriteBatch batch;
  batch.burnin_runs = {Run("GPU-a", kGtx, kT0)};
  RollupRecord orphan;  // names a GPU that is not stored: the foreign key fails
  orphan.uuid = "GPU-unknown";
  orphan.minute = kT0;
  batch.rollups = {orphan};
  Status s = store->Commit(&batch);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(batch.burnin_runs[0].id, 0);
  EXPECT_TRUE(Ids(store->ListBurnInRuns({})).empty());
}

TEST_F(BurnInStoreTest, AReadOnlyStoreRefusesToRecordARun) {
  Open();  // creates the file
  auto store = Open({.read_only = true});
  WriteBatch batch;
  batch.burnin_runs = {Run("GPU-a", kGtx, kT0)};
  Status s = store->Commit(&batch);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(batch.burnin_runs[0].id, 0);
}

TEST_F(BurnInStoreTest, AVersion2FileUpgradesWithItsJobsIntact) {
  {
    SQLite::Database raw(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    ASSERT_TRUE(Migrate(raw, path_, Migrations().first(2)).ok());
    ASSERT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), 2);
    raw.exec(
        "INSERT INTO jobs (id, name, user, uid, state, priority, spec_json, submitted, started, ended, "
        "attempt, restarts, gpus_json, exit_code, exit_signal, reason) VALUES "
        "(7, 'train', 'ada', 1000, 'completed', 5, '{\"command\":[\"true\"]}', 100, 200, 300, 1, 0, "
        "'[\"GPU-a\"]', 0, NULL, ''), "
        "(8, 'eval', 'ada', 1000, 'pending', 3, '{\"command\":[\"true\"]}', 400, 0, 0, 0, 0, '[]', NULL, "
        "NULL, '')");
    ASSERT_FALSE(raw.tableExists("burnin_runs"));
  }
  // Read-only never upgrades: it says how to.
  StoreOptions read_only;
  read_only.read_only = true;
  auto refused = Store::Open(path_, read_only);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("schema version 2, older than"), std::string::npos)
      << refused.status().message();

  auto store = Open();
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  auto done = store->GetJob(7);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ((*done)->state, "completed");
  EXPECT_EQ((*done)->exit_code, 0);
  EXPECT_EQ((*done)->gpus_json, R"(["GPU-a"])");
  auto unfinished = store->ListUnfinishedJobs();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].id, 8);
  EXPECT_EQ(*store->LastJobId(), 8);

  std::vector<int64_t> ids = CommitEach(*store, {Run("GPU-a", kGtx, kT0)});
  EXPECT_EQ(Ids(store->ListBurnInRuns({})), ids);
}

}  // namespace
}  // namespace gpuherd::store
