#include "pipeline/progress.h"

#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Kind = NodeAction::Kind;

Plan MustPlan(const std::string& yaml) {
  auto spec = ParsePipeline(yaml, "p.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (!spec.ok()) return Plan();
  auto plan = Expand(*spec, {}, "/runs/1");
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : Plan();
}

// prepare → train (12 points, 2 retries) → evaluate, and a report that
// always runs after train.
constexpr const char* kSweep = R"(
steps:
  prepare: {run: prep}
  train:
    needs: [prepare]
    matrix: {lr: [0.3, 0.1, 0.03, 0.01], seed: [1, 2, 3]}
    run: train --lr ${{ matrix.lr }} --seed ${{ matrix.seed }}
    retries: 2
  evaluate: {needs: [train], run: eval}
  report: {needs: [train], if: always, run: report}
)";

// Plays the daemon's driver: applies actions and decides each job's fate
// from a script (node id → exit of attempt 1, 2, ...: true = success).
class FakeDriver {
 public:
  FakeDriver(const Plan& plan, std::map<std::string, std::vector<bool>> script)
      : plan_(plan), script_(std::move(script)), statuses_(plan.nodes.size()) {}

  // Runs until kFinish; returns it. Every submitted job finishes before the
  // next call, the simplest interleaving that still exercises every rule.
  NodeAction Run() {
    for (int round = 0; round < 100; ++round) {
      std::vector<NodeAction> actions = NextActions(plan_, statuses_);
      log_.insert(log_.end(), actions.begin(), actions.end());
      for (const NodeAction& a : actions) {
        if (a.kind == Kind::kFinish) return a;
        NodeStatus& s = statuses_[a.node];
        if (a.kind == Kind::kSkip) {
          s.state = NodeState::kSkipped;
          continue;
        }
        EXPECT_EQ(a.attempt, s.attempts + 1);
        EXPECT_EQ(a.resume, a.kind == Kind::kRetry);
        s.attempts = a.attempt;
        s.state = NodeState::kActive;
      }
      for (size_t i = 0; i < statuses_.size(); ++i) {
        NodeStatus& s = statuses_[i];
        if (s.state != NodeState::kActive) continue;
        const auto& outcomes = script_[plan_.nodes[i].id];
        const bool ok = s.attempts > static_cast<int>(outcomes.size()) || outcomes[s.attempts - 1];
        s.state = ok ? NodeState::kCompleted : NodeState::kFailed;
      }
    }
    ADD_FAILURE() << "the run did not finish";
    return {};
  }

  int Count(Kind kind, const std::string& id = "") const {
    int n = 0;
    for (const NodeAction& a : log_) {
      n += a.kind == kind && (id.empty() || plan_.nodes[a.node].id == id);
    }
    return n;
  }
  const std::vector<NodeStatus>& statuses() const { return statuses_; }
  const std::vector<NodeAction>& log() const { return log_; }

 private:
  const Plan& plan_;
  std::map<std::string, std::vector<bool>> script_;
  std::vector<NodeStatus> statuses_;
  std::vector<NodeAction> log_;
};

TEST(NextActionsTest, StartsWithTheNodesThatNeedNothing) {
  Plan plan = MustPlan(kSweep);
  ASSERT_EQ(plan.nodes.size(), 15u);
  auto actions = NextActions(plan, {});
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Kind::kSubmit);
  EXPECT_EQ(plan.nodes[actions[0].node].id, "prepare");
  EXPECT_EQ(actions[0].attempt, 1);
  EXPECT_FALSE(actions[0].resume);
}

TEST(NextActionsTest, ASweepWhereEveryPointSucceeds) {
  Plan plan = MustPlan(kSweep);
  FakeDriver driver(plan, {});
  NodeAction finish = driver.Run();
  EXPECT_EQ(finish.outcome, Outcome::kSucceeded);
  EXPECT_EQ(finish.reason, "15 completed, 0 failed, 0 cancelled, 0 skipped");
  EXPECT_EQ(driver.Count(Kind::kSubmit), 15);
  EXPECT_EQ(driver.Count(Kind::kRetry), 0);
  // All twelve points go out together, once prepare completed.
  EXPECT_EQ(driver.log()[1].kind, Kind::kSubmit);
  EXPECT_EQ(plan.nodes[driver.log()[12].node].id, "train[lr=0.01,seed=3]");
}

TEST(NextActionsTest, RetriesFailedPointsAndSkipsWhatNeedsAPointThatFailedForGood) {
  Plan plan = MustPlan(kSweep);
  FakeDriver driver(plan, {
                              {"train[lr=0.3,seed=1]", {false, true}},          // one retry
                              {"train[lr=0.1,seed=2]", {false, false, true}},   // two retries
                              {"train[lr=0.01,seed=3]", {false, false, false}}, // out of retries
                          });
  NodeAction finish = driver.Run();
  EXPECT_EQ(finish.outcome, Outcome::kFailed);
  EXPECT_EQ(finish.reason, "13 completed, 1 failed, 0 cancelled, 1 skipped");
  EXPECT_EQ(driver.Count(Kind::kRetry, "train[lr=0.3,seed=1]"), 1);
  EXPECT_EQ(driver.Count(Kind::kRetry, "train[lr=0.1,seed=2]"), 2);
  EXPECT_EQ(driver.Count(Kind::kRetry, "train[lr=0.01,seed=3]"), 2);
  EXPECT_EQ(driver.Count(Kind::kRetry), 5);
  EXPECT_EQ(driver.Count(Kind::kSkip, "evaluate"), 1);
  EXPECT_EQ(driver.Count(Kind::kSubmit, "evaluate"), 0);
  EXPECT_EQ(driver.Count(Kind::kSubmit, "report"), 1);  // if: always
  const int failed = plan.Find("train[lr=0.01,seed=3]");
  EXPECT_EQ(driver.statuses()[failed].attempts, 3);
  for (const NodeAction& a : driver.log()) {
    if (a.kind == Kind::kSkip) {
      EXPECT_EQ(a.reason, "it needs train[lr=0.01,seed=3], which failed");
    }
    if (a.kind == Kind::kRetry && a.node == failed && a.attempt == 3) {
      EXPECT_EQ(a.reason, "attempt 2 failed; retry 2 of 2");
    }
  }
}

TEST(NextActionsTest, AnAlwaysStepWaitsWhileRetriesArePending) {
  Plan plan = MustPlan(kSweep);
  std::vector<NodeStatus> s(plan.nodes.size(), {NodeState::kCompleted, 1});
  const int report = plan.Find("report"), evaluate = plan.Find("evaluate");
  const int point = plan.Find("train[lr=0.1,seed=1]");
  s[report] = s[evaluate] = {NodeState::kWaiting, 0};
  s[point] = {NodeState::kFailed, 1};
  auto actions = NextActions(plan, s);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind, Kind::kRetry);
  EXPECT_EQ(actions[0].node, point);
  EXPECT_EQ(actions[0].attempt, 2);
  EXPECT_TRUE(actions[0].resume);

  s[point] = {NodeState::kActive, 2};
  EXPECT_THAT(NextActions(plan, s), IsEmpty());

  s[point] = {NodeState::kFailed, 3};  // the last of its 2 retries failed
  actions = NextActions(plan, s);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].kind, Kind::kSkip);
  EXPECT_EQ(actions[0].node, evaluate);
  EXPECT_EQ(actions[1].kind, Kind::kSubmit);
  EXPECT_EQ(actions[1].node, report);
}

TEST(NextActionsTest, SkipsCascadeAndTheRunFinishesInOneCall) {
  Plan plan = MustPlan(R"(
steps:
  a: {run: x}
  b: {run: x, needs: [a]}
  c: {run: x, needs: [b]}
  d: {run: x, needs: [c]}
)");
  std::vector<NodeStatus> s(4);
  s[0] = {NodeState::kFailed, 1};
  auto actions = NextActions(plan, s);
  ASSERT_EQ(actions.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(actions[i].kind, Kind::kSkip);
    EXPECT_EQ(actions[i].node, i + 1);
  }
  EXPECT_EQ(actions[1].reason, "it needs b, which was skipped");
  EXPECT_EQ(actions[3].kind, Kind::kFinish);
  EXPECT_EQ(actions[3].outcome, Outcome::kFailed);
  EXPECT_EQ(actions[3].node, -1);
}

TEST(NextActionsTest, ACancelledNodeIsNeverRetried) {
  Plan plan = MustPlan("steps:\n  a: {run: x, retries: 5}\n  b: {run: x, needs: [a]}\n");
  auto actions = NextActions(plan, {{NodeState::kCancelled, 1}});
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].kind, Kind::kSkip);
  EXPECT_EQ(actions[0].reason, "it needs a, which was cancelled");
  EXPECT_EQ(actions[1].kind, Kind::kFinish);
  EXPECT_EQ(actions[1].outcome, Outcome::kCancelled);
}

TEST(NextActionsTest, APointStoppedEarlyIsDoneForWhatNeedsIt) {
  Plan plan = MustPlan(kSweep);
  // prepare completed; of train's 12 points, 3 completed and 9 stopped early.
  std::vector<NodeStatus> s(plan.nodes.size());
  s[0] = {NodeState::kCompleted, 1};
  for (int i = 1; i <= 12; ++i) s[i] = {i <= 3 ? NodeState::kCompleted : NodeState::kStopped, 1};
  auto actions = NextActions(plan, s);
  ASSERT_EQ(actions.size(), 2u);  // evaluate and report, neither skipped
  EXPECT_EQ(actions[0].kind, Kind::kSubmit);
  EXPECT_EQ(plan.nodes[actions[0].node].id, "evaluate");
  EXPECT_EQ(actions[1].kind, Kind::kSubmit);
  s[13] = {NodeState::kCompleted, 1};
  s[14] = {NodeState::kCompleted, 1};
  auto done = NextActions(plan, s);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].kind, Kind::kFinish);
  EXPECT_EQ(done[0].outcome, Outcome::kSucceeded);
  EXPECT_EQ(done[0].reason, "6 completed, 0 failed, 0 cancelled, 0 skipped, 9 stopped early");
}

TEST(NextActionsTest, SameStatusesGiveTheSameActions) {
  Plan plan = MustPlan(kSweep);
  std::vector<NodeStatus> s(plan.nodes.size());
  s[0] = {NodeState::kCompleted, 1};
  auto first = NextActions(plan, s);
  auto second = NextActions(plan, s);
  ASSERT_EQ(first.size(), 12u);
  ASSERT_EQ(second.size(), first.size());
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(first[i].kind, second[i].kind);
    EXPECT_EQ(first[i].node, second[i].node);
  }
}

TEST(IsFinalTest, FollowsTheRetryBudget) {
  Plan plan = MustPlan("steps: {a: {run: x, retries: 1}}");
  const PlanNode& a = plan.nodes[0];
  EXPECT_FALSE(IsFinal(a, {NodeState::kWaiting, 0}));
  EXPECT_FALSE(IsFinal(a, {NodeState::kActive, 1}));
  EXPECT_FALSE(IsFinal(a, {NodeState::kFailed, 1}));
  EXPECT_TRUE(IsFinal(a, {NodeState::kFailed, 2}));
  EXPECT_TRUE(IsFinal(a, {NodeState::kCompleted, 1}));
  EXPECT_TRUE(IsFinal(a, {NodeState::kSkipped, 0}));
  EXPECT_TRUE(IsFinal(a, {NodeState::kStopped, 1}));
}

TEST(JobSpecForTest, AsksARetryToResume) {
  Plan plan = MustPlan("steps: {a: {run: x, retries: 1}}");
  NodeAction submit{Kind::kSubmit, 0, 1, false, Outcome::kSucceeded, ""};
  EXPECT_EQ(JobSpecFor(plan, submit).env.count("GPUHERD_RESUME"), 0u);
  NodeAction retry{Kind::kRetry, 0, 2, true, Outcome::kSucceeded, ""};
  sched::JobSpec job = JobSpecFor(plan, retry);
  EXPECT_EQ(job.env.at("GPUHERD_RESUME"), "1");
  EXPECT_EQ(job.env.at("GPUHERD_CHECKPOINT_DIR"), plan.nodes[0].checkpoint_dir);
}

TEST(NamesTest, AreStable) {
  EXPECT_STREQ(NodeStateName(NodeState::kSkipped), "skipped");
  EXPECT_STREQ(NodeStateName(NodeState::kStopped), "stopped");
  EXPECT_STREQ(OutcomeName(Outcome::kCancelled), "cancelled");
  EXPECT_STREQ(NodeActionKindName(Kind::kRetry), "retry");
}

}  // namespace
}  // namespace gpuherd::pipeline
