#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

class JobsTest : public StoreFileTest {
 protected:
  static JobRecord Job(int64_t id, const std::string& state) {
    JobRecord j;
    j.id = id;
    j.name = "train-" + std::to_string(id);
    j.user = "ada";
    j.uid = 1000;
    j.state = state;
    j.priority = 5;
    j.spec_json = R"({"command":["python3","train.py"]})";
    j.submitted = 1000 + id;
    return j;
  }
};

TEST_F(JobsTest, JobsRoundTripAndUpsert) {
  auto store = Open();
  EXPECT_GE(store->schema_version(), 2);
  WriteBatch batch;
  batch.jobs = {Job(1, "pending"), Job(2, "running")};
  batch.jobs[1].gpus_json = R"(["GPU-a","GPU-b"])";
  batch.jobs[1].attempt = 1;
  ASSERT_TRUE(store->Commit(&batch).ok());

  WriteBatch done;
  JobRecord finished = Job(2, "completed");
  finished.exit_code = 0;
  finished.ended = 9000;
  finished.attempt = 2;
  finished.restarts = 1;
  done.jobs = {finished};
  ASSERT_TRUE(store->Commit(&done).ok());

  auto one = store->GetJob(2);
  ASSERT_TRUE(one.ok() && one->has_value());
  EXPECT_EQ((*one)->state, "completed");
  EXPECT_EQ((*one)->exit_code, 0);
  EXPECT_FALSE((*one)->exit_signal.has_value());
  EXPECT_EQ((*one)->restarts, 1);
  EXPECT_EQ((*one)->submitted, 1002);  // kept from the first insert's values

  auto unfinished = store->ListUnfinishedJobs();
  ASSERT_TRUE(unfinished.ok());
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].id, 1);
  auto finished_list = store->ListFinishedJobs(0, 10);
  ASSERT_TRUE(finished_list.ok());
  ASSERT_EQ(finished_list->size(), 1u);
  EXPECT_EQ((*finished_list)[0].id, 2);
  EXPECT_FALSE(store->GetJob(3)->has_value());
}

TEST_F(JobsTest, JobStatesOfAnIdRange) {
  auto store = Open();
  WriteBatch batch;
  batch.jobs = {Job(1, "completed"), Job(2, "held"), Job(4, "failed"), Job(5, "pending")};
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto range = store->ListJobStates(2, 4);
  ASSERT_TRUE(range.ok()) << range.status().ToString();
  ASSERT_EQ(range->size(), 2u);  // 3 is not there
  EXPECT_EQ((*range)[0].id, 2);
  EXPECT_EQ((*range)[0].state, "held");
  EXPECT_EQ((*range)[0].name, "train-2");
  EXPECT_EQ((*range)[1].id, 4);
  EXPECT_EQ((*range)[1].state, "failed");
  EXPECT_TRUE(store->ListJobStates(6, 9)->empty());
}

TEST_F(JobsTest, JobIdsAreNeverReusedAcrossReopen) {
  {
    auto store = Open();
    EXPECT_EQ(*store->LastJobId(), 0);
    WriteBatch batch;
    batch.jobs = {Job(1, "pending"), Job(7, "pending")};
    ASSERT_TRUE(store->Commit(&batch).ok());
  }
  auto store = Open();
  EXPECT_EQ(*store->LastJobId(), 7);
}

TEST_F(JobsTest, BadStateOrMissingIdRejectsTheWholeBatch) {
  auto store = Open();
  WriteBatch batch;
  batch.jobs = {Job(1, "pending"), Job(2, "exploded")};
  batch.events.push_back(EventRecord{0, 5, "job.submitted", Severity::kInfo, "", "x", "{}"});
  Status s = store->Commit(&batch);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("job 2"), std::string::npos) << s.message();
  EXPECT_TRUE(store->ListUnfinishedJobs()->empty());
  EXPECT_EQ(*store->LastEventId(), 0);

  WriteBatch no_id;
  no_id.jobs = {Job(0, "pending")};
  EXPECT_EQ(store->Commit(&no_id).code(), Code::kInvalidArgument);
}

TEST_F(JobsTest, DrainsPersistUntilLifted) {
  {
    auto store = Open();
    WriteBatch batch;
    batch.drains = {{"GPU-a", true, "XID 79", 100}, {"GPU-b", true, "operator", 200}};
    ASSERT_TRUE(store->Commit(&batch).ok());
  }
  auto store = Open();
  auto drains = store->ListDrains();
  ASSERT_TRUE(drains.ok());
  ASSERT_EQ(drains->size(), 2u);
  EXPECT_EQ((*drains)[0].reason, "XID 79");
  WriteBatch lift;
  lift.drains = {{"GPU-a", false, "", 300}};
  ASSERT_TRUE(store->Commit(&lift).ok());
  drains = store->ListDrains();
  ASSERT_EQ(drains->size(), 1u);
  EXPECT_EQ((*drains)[0].uuid, "GPU-b");
}

TEST_F(JobsTest, ReservedIdsOnlyRiseAndOutliveTheStore) {
  {
    auto store = Open();
    EXPECT_EQ(*store->LastJobId(), 0);
    EXPECT_EQ(*store->LastPipelineRunId(), 0);
    ASSERT_TRUE(store->ReserveIdsThrough(40, 7).ok());
    EXPECT_EQ(*store->LastJobId(), 40);
    EXPECT_EQ(*store->LastPipelineRunId(), 7);
    // Lower values never take ids back.
    ASSERT_TRUE(store->ReserveIdsThrough(10, 0).ok());
    EXPECT_EQ(*store->LastJobId(), 40);
    EXPECT_EQ(*store->LastPipelineRunId(), 7);
  }
  auto store = Open();
  EXPECT_EQ(*store->LastJobId(), 40);
  WriteBatch batch;
  batch.jobs = {Job(41, "pending")};
  ASSERT_TRUE(store->Commit(&batch).ok());
  EXPECT_EQ(*store->LastJobId(), 41);
  ASSERT_TRUE(store->ReserveIdsThrough(45, 9).ok());
  EXPECT_EQ(*store->LastJobId(), 45);
  EXPECT_EQ(*store->LastPipelineRunId(), 9);

  StoreOptions read_only;
  read_only.read_only = true;
  auto reader = Store::Open(path_, read_only);
  ASSERT_TRUE(reader.ok());
  EXPECT_FALSE((*reader)->ReserveIdsThrough(50, 0).ok());
}

}  // namespace
}  // namespace gpuherd::store
