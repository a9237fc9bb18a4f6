#include "burnin/node_health.h"

#include <gtest/gtest.h>

namespace gpuherd::burnin {
namespace {

Check Failing(const std::string& name, const std::string& reason) {
  Check c;
  c.name = name;
  c.outcome = CheckOutcome::kFail;
  c.reason = reason;
  return c;
}

Health Scored(int score, Verdict verdict) {
  Health h;
  h.score = score;
  h.verdict = verdict;
  return h;
}

TEST(JudgeGpuTest, ALevelOneFailureOrAnUnhealthyBurnInMakesAGpuUnhealthy) {
  Check warn;
  warn.name = "idle_temperature";
  warn.outcome = CheckOutcome::kWarn;
  EXPECT_FALSE(JudgeGpu(0, "u0", {warn}, Scored(70, Verdict::kDegraded)).unhealthy);
  EXPECT_FALSE(JudgeGpu(0, "u0", {}, std::nullopt).unhealthy);

  GpuJudgement burnin = JudgeGpu(3, "u3", {}, Scored(42, Verdict::kUnhealthy));
  EXPECT_TRUE(burnin.unhealthy);
  EXPECT_EQ(burnin.why, "score 42");

  GpuJudgement both = JudgeGpu(1, "u1", {Failing("pcie_link", "pcie_downtrained")}, Scored(12, Verdict::kUnhealthy));
  EXPECT_EQ(both.why, "score 12, pcie_downtrained");
}

TEST(DecideNodeActionTest, DrainsWithTheSickGpusNamed) {
  std::vector<GpuJudgement> gpus = {{0, "u0", false, ""}, {3, "u3", true, "score 42"}};
  NodeAction a = DecideNodeAction("gpu07", "IDLE", "", gpus);
  EXPECT_EQ(a.kind, NodeAction::Kind::kDrain);
  EXPECT_EQ(a.reason, "gpuherd: GPU 3 unhealthy (score 42)");

  // Already drained by us for the same reason: nothing to do; for another: updated.
  EXPECT_EQ(DecideNodeAction("gpu07", "IDLE+DRAIN", a.reason, gpus).kind, NodeAction::Kind::kNone);
  EXPECT_EQ(DecideNodeAction("gpu07", "IDLE+DRAIN", "gpuherd: GPU 1 unhealthy (xid)", gpus).kind,
            NodeAction::Kind::kDrain);
  // Someone else's drain is left alone, reason and all.
  NodeAction theirs = DecideNodeAction("gpu07", "MIXED+DRAIN", "bad DIMM, ticket 123", gpus);
  EXPECT_EQ(theirs.kind, NodeAction::Kind::kNone);
  EXPECT_NE(theirs.message.find("bad DIMM"), std::string::npos);
}

TEST(DecideNodeActionTest, ResumesOnlyItsOwnDrain) {
  std::vector<GpuJudgement> well = {{0, "u0", false, ""}, {1, "u1", false, ""}};
  EXPECT_EQ(DecideNodeAction("n", "IDLE+DRAIN", "gpuherd: GPU 1 unhealthy (score 30)", well).kind,
            NodeAction::Kind::kResume);
  EXPECT_EQ(DecideNodeAction("n", "IDLE+DRAIN", "maintenance", well).kind, NodeAction::Kind::kNone);
  EXPECT_EQ(DecideNodeAction("n", "DOWN", "Not responding", well).kind, NodeAction::Kind::kNone);
  EXPECT_EQ(DecideNodeAction("n", "IDLE", "", well).kind, NodeAction::Kind::kNone);
}

}  // namespace
}  // namespace gpuherd::burnin
