#include "burnin/health.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::burnin {
namespace {

using ::testing::HasSubstr;

constexpr const char* kA100 = "NVIDIA A100-SXM4-40GB";

BurnInRun Finished(double tflops) {
  BurnInRun run;
  run.gpu_name = kA100;
  run.level = 3;
  run.outcome = RunOutcome::kPassed;
  run.rates.fp32_tflops = tflops;
  run.rates.mem_bandwidth_gbs = 1320;
  return run;
}

Check WithReason(const char* name, CheckOutcome outcome, const char* reason,
                 std::map<std::string, double> values = {}) {
  return Check{name, 1, outcome, reason, "seen", std::move(values)};
}

double Penalty(const Health& h, const std::string& factor) {
  double sum = 0;
  for (const HealthFactor& f : h.factors) {
    if (f.name == factor) sum += f.penalty;
  }
  return sum;
}

ModelReference Fleet(double tflops) {
  ModelReference ref;
  ref.fleet_fp32_tflops = tflops;
  ref.fleet_runs = 5;
  ref.nominal_fp32_tflops = 19.5;
  return ref;
}

TEST(HealthTest, VerdictThresholds) {
  EXPECT_EQ(VerdictForScore(100), Verdict::kHealthy);
  EXPECT_EQ(VerdictForScore(80), Verdict::kHealthy);
  EXPECT_EQ(VerdictForScore(79), Verdict::kDegraded);
  EXPECT_EQ(VerdictForScore(60), Verdict::kDegraded);
  EXPECT_EQ(VerdictForScore(59), Verdict::kUnhealthy);
  EXPECT_EQ(VerdictForScore(0), Verdict::kUnhealthy);
}

TEST(HealthTest, UnfinishedRunsAreNotScored) {
  for (RunOutcome outcome : {RunOutcome::kCouldNotRun, RunOutcome::kAborted}) {
    BurnInRun run = Finished(15);
    run.outcome = outcome;
    const Health h = ScoreRun(run, Fleet(15));
    EXPECT_EQ(h.verdict, Verdict::kUnknown);
    EXPECT_TRUE(h.factors.empty());
  }
}

TEST(HealthTest, AnyMemoryComputeOrNanErrorDisqualifies) {
  for (int kind = 0; kind < 3; ++kind) {
    BurnInRun run = Finished(15);
    (kind == 0 ? run.memory_errors : kind == 1 ? run.compute_errors : run.nan_count) = 1;
    const Health h = ScoreRun(run, Fleet(15));
    EXPECT_TRUE(h.disqualified);
    EXPECT_EQ(h.score, 0);
    EXPECT_EQ(h.verdict, Verdict::kUnhealthy);
    EXPECT_EQ(Penalty(h, kind == 0 ? "memory_errors" : kind == 1 ? "compute_errors" : "nan"), 100);
  }
}

TEST(HealthTest, ThroughputAgainstTheFleetMedian) {
  struct Case {
    double ratio, penalty;
  };
  for (const Case& c : {Case{1.02, 0}, Case{0.95, 0}, Case{0.90, 7.5}, Case{0.80, 22.5},
                        Case{0.50, 50}}) {
    SCOPED_TRACE(c.ratio);
    const Health h = ScoreRun(Finished(15 * c.ratio), Fleet(15));
    ASSERT_TRUE(h.ratio_to_fleet);
    EXPECT_NEAR(*h.ratio_to_fleet, c.ratio, 1e-9);
    EXPECT_NEAR(*h.ratio_to_nominal, 15 * c.ratio / 19.5, 1e-9);
    EXPECT_NEAR(Penalty(h, "throughput"), c.penalty, 1e-9);
    EXPECT_EQ(h.score, static_cast<int>(std::lround(100 - c.penalty)));
    EXPECT_EQ(h.fleet_reference_runs, 5);
  }
  EXPECT_EQ(ScoreRun(Finished(12), Fleet(15)).verdict, Verdict::kDegraded);  // 80 %
}

TEST(HealthTest, WithoutHistoryTheDataSheetIsALooseYardstick) {
  ModelReference nominal_only = ReferenceFromHistory(kA100, {});
  EXPECT_EQ(nominal_only.fleet_runs, 0);
  // 60 % of the data sheet is normal for a card at its power cap.
  Health h = ScoreRun(Finished(0.6 * 19.5), nominal_only);
  EXPECT_FALSE(h.ratio_to_fleet);
  EXPECT_EQ(Penalty(h, "throughput"), 0);
  h = ScoreRun(Finished(0.45 * 19.5), nominal_only);
  EXPECT_NEAR(Penalty(h, "throughput"), 15, 1e-9);
  // Level 2 measured no TFLOPS: memory bandwidth stands in.
  BurnInRun level2 = Finished(0);
  level2.rates.fp32_tflops.reset();
  h = ScoreRun(level2, nominal_only);
  ASSERT_TRUE(h.ratio_to_nominal);
  EXPECT_NEAR(*h.ratio_to_nominal, 1320.0 / 1555, 1e-9);
}

TEST(HealthTest, ThermalHeadroomTrendAndThrottling) {
  struct Case {
    double headroom, penalty;
  };
  for (const Case& c : {Case{15, 0}, Case{10, 0}, Case{6, 8}, Case{0.5, 19}, Case{0, 30},
                        Case{-2, 30}}) {
    BurnInRun run = Finished(15);
    run.checks.push_back(WithReason("thermal.headroom", CheckOutcome::kPass, "",
                                    {{"headroom_c", c.headroom}, {"max_temp_c", 89 - c.headroom}}));
    EXPECT_NEAR(Penalty(ScoreRun(run, Fleet(15)), "thermal_headroom"), c.penalty, 1e-9) << c.headroom;
  }
  BurnInRun run = Finished(15);
  run.checks.push_back(WithReason("thermal.trend", CheckOutcome::kWarn, "thermal_runaway"));
  run.checks.push_back(WithReason("throttle", CheckOutcome::kWarn, "thermal_throttle",
                                  {{"throttled_fraction", 0.25}}));
  const Health h = ScoreRun(run, Fleet(15));
  EXPECT_EQ(Penalty(h, "thermal_trend"), 15);
  EXPECT_EQ(Penalty(h, "throttling"), 10);
  EXPECT_EQ(h.score, 75);
  run.checks.back().values["throttled_fraction"] = 0.9;
  EXPECT_EQ(Penalty(ScoreRun(run, Fleet(15)), "throttling"), 20);  // capped
}

TEST(HealthTest, LinkAndCopiesCountOnce) {
  BurnInRun run = Finished(15);
  run.checks.push_back(WithReason("pcie_link", CheckOutcome::kWarn, "pcie_downtrained",
                                  {{"width", 8}, {"max_width", 16}, {"gen", 3}, {"max_gen", 4}}));
  run.checks.push_back(WithReason("copy.h2d", CheckOutcome::kWarn, "copy_bandwidth_low"));
  run.checks.push_back(WithReason("copy.d2h", CheckOutcome::kWarn, "copy_bandwidth_low"));
  EXPECT_EQ(Penalty(ScoreRun(run, Fleet(15)), "pcie"), 20);  // width and gen, copies explained

  BurnInRun slow_host = Finished(15);
  slow_host.checks.push_back(WithReason("copy.h2d", CheckOutcome::kWarn, "copy_bandwidth_low"));
  EXPECT_EQ(Penalty(ScoreRun(slow_host, Fleet(15)), "pcie"), 5);
}

TEST(HealthTest, EccAndMemoryRepairHistory) {
  BurnInRun run = Finished(15);
  run.outcome = RunOutcome::kFaultsFound;
  run.checks.push_back(WithReason("ecc", CheckOutcome::kFail, "ecc_dbe"));
  run.checks.push_back(WithReason("memory_repair", CheckOutcome::kFail, "repair_pending"));
  Health h = ScoreRun(run, Fleet(15));
  EXPECT_EQ(h.score, 65);
  EXPECT_EQ(h.verdict, Verdict::kDegraded);
  EXPECT_FALSE(h.disqualified);
  run.checks.push_back(WithReason("memory_repair", CheckOutcome::kFail, "remap_failure"));
  EXPECT_EQ(ScoreRun(run, Fleet(15)).verdict, Verdict::kUnhealthy);
}

TEST(HealthTest, LostGpusAndChecksThatCouldNotRun) {
  BurnInRun run = Finished(15);
  run.checks.push_back(WithReason("stress.fp32", CheckOutcome::kFail, "gpu_lost"));
  run.checks.push_back(WithReason("driver", CheckOutcome::kFail, "gpu_lost"));
  Health h = ScoreRun(run, Fleet(15));
  EXPECT_EQ(Penalty(h, "gpu_lost"), 60);  // once
  EXPECT_EQ(h.verdict, Verdict::kUnhealthy);
  BurnInRun partial = Finished(15);
  partial.checks.push_back(WithReason("membw", CheckOutcome::kError, "device_error"));
  h = ScoreRun(partial, Fleet(15));
  EXPECT_EQ(Penalty(h, "incomplete"), 10);
  EXPECT_THAT(h.factors.back().detail, HasSubstr("membw could not run"));
}

TEST(HealthTest, ReferenceIsTheMedianOfFinishedCleanRunsOfTheModel) {
  std::vector<BurnInRun> history = {Finished(15), Finished(16), Finished(14.5), Finished(30)};
  BurnInRun disqualified = Finished(1);
  disqualified.health.disqualified = true;
  BurnInRun aborted = Finished(2);
  aborted.outcome = RunOutcome::kAborted;
  BurnInRun other = Finished(3);
  other.gpu_name = "Tesla T4";
  history.push_back(disqualified);
  history.push_back(aborted);
  history.push_back(other);
  const ModelReference ref = ReferenceFromHistory(kA100, history);
  EXPECT_EQ(ref.fleet_runs, 4);
  EXPECT_EQ(ref.fleet_fp32_tflops, 15.5);  // median of 14.5, 15, 16, 30
  EXPECT_EQ(ref.fleet_mem_bandwidth_gbs, 1320);
  EXPECT_EQ(ref.nominal_fp32_tflops, 19.5);
  EXPECT_EQ(ref.nominal_mem_bandwidth_gbs, 1555);
  const ModelReference unknown = ReferenceFromHistory("Some Future GPU", history);
  EXPECT_EQ(unknown.fleet_runs, 0);
  EXPECT_FALSE(unknown.nominal_fp32_tflops);
}

}  // namespace
}  // namespace gpuherd::burnin
