#include <SQLiteCpp/Database.h>
#include <gtest/gtest.h>

#include "store/migrations.h"
#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

class AttemptsTest : public StoreFileTest {
 protected:
  static JobRecord Job(int64_t id, const std::string& user, const std::string& state, TimeMs submitted,
                       TimeMs ended = 0) {
    JobRecord j;
    j.id = id;
    j.name = "job-" + std::to_string(id);
    j.user = user;
    j.uid = 1000;
    j.state = state;
    j.spec_json = R"({"spec":{"command":["true"]},"gpu_twentieths":20})";
    j.submitted = submitted;
    j.ended = ended;
    return j;
  }
  static AttemptRecord Attempt(int64_t job, int n, TimeMs started, TimeMs ended, const std::string& cause) {
    AttemptRecord a;
    a.job_id = job;
    a.attempt = n;
    a.user = "ada";
    a.gpus_json = R"(["GPU-a"])";
    a.gpu_twentieths = 20;
    a.started = started;
    a.ended = ended;
    a.end_cause = cause;
    return a;
  }
};

TEST_F(AttemptsTest, RoundTripAndUpsertByJobAndAttempt) {
  auto store = Open();
  WriteBatch batch;
  batch.jobs = {Job(1, "ada", "running", 100)};
  batch.attempts = {Attempt(1, 1, 200, 0, "")};
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto open = store->ListOpenAttempts();
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  ASSERT_EQ(open->size(), 1u);
  EXPECT_FALSE((*open)[0].gpu_util_mean.has_value());

  WriteBatch end;
  AttemptRecord first = Attempt(1, 1, 200, 5000, "preempted");
  first.exit_code = 143;
  first.reason = "preempted for job 9";
  first.util_samples = 4;
  first.gpu_util_mean = 87.5;
  first.peak_gpu_mem_bytes = uint64_t{12} << 30;
  end.attempts = {first, Attempt(1, 2, 6000, 0, "")};
  ASSERT_TRUE(store->Commit(&end).ok());

  auto rows = store->ListAttempts(1);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  const AttemptRecord& a = (*rows)[0];
  EXPECT_EQ(a.end_cause, "preempted");
  EXPECT_EQ(a.ended, 5000);
  EXPECT_EQ(a.exit_code, 143);
  EXPECT_FALSE(a.exit_signal.has_value());
  EXPECT_EQ(a.reason, "preempted for job 9");
  EXPECT_EQ(a.util_samples, 4);
  EXPECT_DOUBLE_EQ(*a.gpu_util_mean, 87.5);
  EXPECT_EQ(*a.peak_gpu_mem_bytes, uint64_t{12} << 30);
  EXPECT_EQ((*rows)[1].attempt, 2);
  auto still_open = store->ListOpenAttempts();
  ASSERT_EQ(still_open->size(), 1u);
  EXPECT_EQ((*still_open)[0].attempt, 2);
}

TEST_F(AttemptsTest, UnknownEndCauseIsRefusedAndNothingOfTheBatchIsKept) {
  auto store = Open();
  WriteBatch batch;
  batch.jobs = {Job(1, "ada", "failed", 100, 900)};
  batch.attempts = {Attempt(1, 1, 200, 900, "exploded")};
  Status s = store->Commit(&batch);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("attempt 1 of job 1"), std::string::npos) << s.message();
  EXPECT_FALSE(store->GetJob(1)->has_value());
}

TEST_F(AttemptsTest, AccountingSelectsBySinceAndUserWithTheJobsAttempts) {
  auto store = Open();
  WriteBatch batch;
  batch.jobs = {Job(1, "ada", "completed", 100, 500),    // ended before `since`
                Job(2, "ada", "completed", 100, 5000),   // ended after
                Job(3, "bob", "running", 200),           // unfinished: always
                Job(4, "ada", "pending", 6000)};
  batch.attempts = {Attempt(1, 1, 150, 500, "completed"), Attempt(2, 1, 300, 2000, "gpu_fault"),
                    Attempt(2, 2, 2500, 5000, "completed"), Attempt(3, 1, 400, 0, "")};
  ASSERT_TRUE(store->Commit(&batch).ok());

  auto all = store->ListAccounting({.since = 1000, .user = ""});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->first.size(), 3u);
  EXPECT_EQ(all->first[0].id, 2);
  EXPECT_EQ(all->first[1].id, 3);
  EXPECT_EQ(all->first[2].id, 4);
  ASSERT_EQ(all->second.size(), 3u);  // job 1's attempt is not among them
  EXPECT_EQ(all->second[0].job_id, 2);
  EXPECT_EQ(all->second[1].attempt, 2);
  EXPECT_EQ(all->second[2].job_id, 3);

  auto bob = store->ListAccounting({.since = 0, .user = "bob"});
  ASSERT_EQ(bob->first.size(), 1u);
  EXPECT_EQ(bob->first[0].id, 3);
  ASSERT_EQ(bob->second.size(), 1u);

  auto newest = store->ListAccounting({.since = 0, .user = "", .limit = 2});
  ASSERT_EQ(newest->first.size(), 2u);
  EXPECT_EQ(newest->first[0].id, 3);
  EXPECT_EQ(newest->first[1].id, 4);
}

// A database of the previous schema: its jobs get their last attempt back.
TEST_F(AttemptsTest, UpgradeRebuildsTheLastAttemptOfJobsThatRan) {
  {
    SQLite::Database db(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    std::span<const Migration> steps = Migrations();
    // Version 10: before the attempts table (version 11).
    ASSERT_TRUE(Migrate(db, path_, steps.first(10)).ok());
    db.exec(
        "INSERT INTO jobs (id, name, user, uid, state, priority, spec_json, submitted, started, ended, attempt, "
        "restarts, gpus_json, exit_code, exit_signal, reason) VALUES "
        "(1, 'a', 'ada', 1000, 'failed', 0, '{\"spec\":{},\"gpu_tenths\":20}', 10, 20, 90, 2, 1, '[\"GPU-a\",\"GPU-b\"]', 3, NULL, 'exited with code 3'),"
        "(2, 'b', 'bob', 1001, 'running', 0, '{\"spec\":{},\"gpu_tenths\":5}', 10, 30, 0, 1, 0, '[\"GPU-c\"]', NULL, NULL, ''),"
        "(3, 'c', 'bob', 1001, 'pending', 0, '{\"spec\":{}}', 10, 0, 0, 0, 0, '[]', NULL, NULL, '')");
  }
  auto store = Open();
  auto failed = store->ListAttempts(1);
  ASSERT_TRUE(failed.ok());
  ASSERT_EQ(failed->size(), 1u);
  EXPECT_EQ((*failed)[0].attempt, 2);
  EXPECT_EQ((*failed)[0].gpu_twentieths, 40);  // stored in tenths before v11
  EXPECT_EQ((*failed)[0].end_cause, "failed");
  EXPECT_EQ((*failed)[0].exit_code, 3);
  EXPECT_EQ((*failed)[0].started, 20);
  EXPECT_EQ((*failed)[0].ended, 90);
  auto open = store->ListOpenAttempts();
  ASSERT_EQ(open->size(), 1u);
  EXPECT_EQ((*open)[0].job_id, 2);
  EXPECT_EQ((*open)[0].gpu_twentieths, 10);
  EXPECT_TRUE(store->ListAttempts(3)->empty());
}

}  // namespace
}  // namespace gpuherd::store
