#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

class PipelinesStoreTest : public StoreFileTest {
 protected:
  static PipelineRunRecord Run(int64_t id, const std::string& state) {
    PipelineRunRecord r;
    r.id = id;
    r.name = "sweep";
    r.source_path = "/p/sweep.yaml";
    r.base_dir = "/p";
    r.yaml = "name: sweep\n";
    r.overrides_json = R"({"steps":"10"})";
    r.run_dir = "/home/pipelines/" + std::to_string(id);
    r.state = state;
    r.created = 100 + id;
    r.user = "ada";
    r.uid = 1000;
    r.gid = 100;
    return r;
  }

  static PipelineNodeRecord Node(int64_t run, const std::string& id, const std::string& state) {
    PipelineNodeRecord n;
    n.run_id = run;
    n.node_id = id;
    n.key = "train/0";
    n.step = "train";
    n.state = state;
    return n;
  }

  static MetricRecord Line(int64_t job, int64_t run, const std::string& node, std::optional<int64_t> step,
                           const std::string& json, int attempt = 1) {
    MetricRecord m;
    m.job_id = job;
    m.run_id = run;
    m.node_id = node;
    m.attempt = attempt;
    m.step = step;
    m.time = 5000 + step.value_or(0);
    m.line_json = json;
    return m;
  }
};

TEST_F(PipelinesStoreTest, RunsAndNodesRoundTripAndUpsert) {
  auto store = Open();
  WriteBatch batch;
  batch.pipeline_runs = {Run(1, "running"), Run(2, "running")};
  batch.pipeline_nodes = {Node(1, "train[lr=0.1]", "waiting"), Node(1, "report", "waiting")};
  ASSERT_TRUE(store->Commit(&batch).ok());

  WriteBatch update;
  PipelineRunRecord done = Run(1, "completed");
  done.outcome = "succeeded";
  done.finished = 900;
  done.yaml = "changed";  // the file of a run never changes: ignored by the upsert
  update.pipeline_runs = {done};
  PipelineNodeRecord node = Node(1, "train[lr=0.1]", "completed");
  node.attempts = 2;
  node.job_id = 17;
  node.started = 10;
  node.ended = 20;
  node.reason = "exited with code 0";
  update.pipeline_nodes = {node};
  ASSERT_TRUE(store->Commit(&update).ok());

  auto run = store->GetPipelineRun(1);
  ASSERT_TRUE(run.ok() && run->has_value());
  EXPECT_EQ((*run)->state, "completed");
  EXPECT_EQ((*run)->outcome, "succeeded");
  EXPECT_EQ((*run)->finished, 900);
  EXPECT_EQ((*run)->yaml, "name: sweep\n");
  EXPECT_EQ((*run)->overrides_json, R"({"steps":"10"})");
  EXPECT_EQ((*run)->gid, 100u);

  auto nodes = store->ListPipelineNodes(1);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  for (const auto& n : *nodes) {
    if (n.node_id != "train[lr=0.1]") continue;
    EXPECT_EQ(n.state, "completed");
    EXPECT_EQ(n.attempts, 2);
    EXPECT_EQ(n.job_id, 17);
    EXPECT_EQ(n.ended, 20);
    EXPECT_EQ(n.reason, "exited with code 0");
  }
  EXPECT_TRUE(store->ListPipelineNodes(2)->empty());
  EXPECT_FALSE(store->GetPipelineRun(3)->has_value());
}

TEST_F(PipelinesStoreTest, ListsRunningOrAllNewestFirstAndIdsAreNeverReused) {
  auto store = Open();
  EXPECT_EQ(*store->LastPipelineRunId(), 0);
  WriteBatch batch;
  batch.pipeline_runs = {Run(1, "failed"), Run(2, "running"), Run(3, "cancelled")};
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto running = store->ListPipelineRuns(false, 100);
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->size(), 1u);
  EXPECT_EQ((*running)[0].id, 2);
  auto all = store->ListPipelineRuns(true, 2);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, 3);
  EXPECT_EQ((*all)[1].id, 2);
  EXPECT_EQ(*store->LastPipelineRunId(), 3);
}

TEST_F(PipelinesStoreTest, BadStateIsRefusedAndNothingIsKept) {
  auto store = Open();
  WriteBatch batch;
  batch.pipeline_runs = {Run(1, "running")};
  batch.pipeline_nodes = {Node(1, "a", "sleeping")};
  Status s = store->Commit(&batch);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("node a of pipeline run 1"), std::string::npos) << s.message();
  EXPECT_FALSE(store->GetPipelineRun(1)->has_value());
}

TEST_F(PipelinesStoreTest, RepeatedStepReplacesTheEarlierLineOfItsNode) {
  auto store = Open();
  WriteBatch batch;
  batch.pipeline_runs = {Run(1, "running")};
  batch.metrics = {Line(10, 1, "a", 1, R"({"loss":0.9})"), Line(10, 1, "a", 2, R"({"loss":0.8})"),
                   Line(10, 1, "b", 1, R"({"loss":0.7})"), Line(10, 1, "a", std::nullopt, R"({"note":1})")};
  ASSERT_TRUE(store->Commit(&batch).ok());
  // A retry of node a (a new job) repeats step 2 after resuming.
  WriteBatch retry;
  retry.metrics = {Line(11, 1, "a", 2, R"({"loss":0.5})", 2), Line(11, 1, "a", 3, R"({"loss":0.4})", 2)};
  ASSERT_TRUE(store->Commit(&retry).ok());

  auto a = store->ListRunMetrics(1, "a");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 4u);
  EXPECT_EQ((*a)[0].step, 1);
  EXPECT_EQ((*a)[0].job_id, 10);
  EXPECT_EQ((*a)[1].step, 2);
  EXPECT_EQ((*a)[1].line_json, R"({"loss":0.5})");
  EXPECT_EQ((*a)[1].attempt, 2);
  EXPECT_EQ((*a)[1].job_id, 11);
  EXPECT_EQ((*a)[2].step, 3);
  EXPECT_FALSE((*a)[3].step.has_value());
  auto all = store->ListRunMetrics(1, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 5u);
  EXPECT_EQ((*all)[4].node_id, "b");
}

TEST_F(PipelinesStoreTest, PlainJobLinesAreTheirOwnSeries) {
  auto store = Open();
  WriteBatch batch;
  batch.metrics = {Line(5, 0, "", 1, R"({"loss":1})"), Line(6, 0, "", 1, R"({"loss":2})"),
                   Line(5, 0, "", 1, R"({"loss":3})", 2)};
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto five = store->ListJobMetrics(5);
  ASSERT_TRUE(five.ok());
  ASSERT_EQ(five->size(), 1u);
  EXPECT_EQ((*five)[0].line_json, R"({"loss":3})");
  EXPECT_EQ((*five)[0].attempt, 2);
  auto six = store->ListJobMetrics(6);
  ASSERT_TRUE(six.ok());
  ASSERT_EQ(six->size(), 1u);
  EXPECT_EQ((*six)[0].line_json, R"({"loss":2})");
}

TEST_F(PipelinesStoreTest, MetricIntakeCountsAreUpsertedByJob) {
  auto store = Open();
  auto none = store->GetMetricIntake(5);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  WriteBatch batch;
  batch.metric_intake = {{5, 20000, 1500, 2, true, 1000}, {6, 3, 3, 0, false, 1000}};
  ASSERT_TRUE(store->Commit(&batch).ok());
  batch = WriteBatch();
  batch.metric_intake = {{5, 190000, 3100, 2, false, 2000}};
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto five = store->GetMetricIntake(5);
  ASSERT_TRUE(five.ok());
  ASSERT_TRUE(five->has_value());
  EXPECT_EQ((*five)->lines_read, 190000);
  EXPECT_EQ((*five)->lines_kept, 3100);
  EXPECT_EQ((*five)->lines_skipped, 2);
  EXPECT_FALSE((*five)->behind);
  EXPECT_EQ((*five)->updated, 2000);
  auto six = store->GetMetricIntake(6);
  ASSERT_TRUE(six.ok() && six->has_value());
  EXPECT_EQ((*six)->lines_read, 3);
}

}  // namespace
}  // namespace gpuherd::store
