#include "pipeline/early_stop.h"

#include <cmath>

#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

PointHistory Point(int index, std::vector<Observation> values, bool completed = false) {
  PointHistory h;
  h.point = index;
  h.values = std::move(values);
  h.completed = completed;
  return h;
}

EarlyStopPolicy Asha(int64_t grace, int reduction) {
  EarlyStopPolicy p;
  p.kind = EarlyStopPolicy::Kind::kAsha;
  p.grace = grace;
  p.reduction = reduction;
  return p;
}

TEST(EarlyStopTest, AshaRungsGrowByTheReduction) {
  EXPECT_EQ(AshaRungs(Asha(1, 3), 27), (std::vector<int64_t>{1, 3, 9, 27}));
  EXPECT_EQ(AshaRungs(Asha(2, 2), 9), (std::vector<int64_t>{2, 4, 8, 16}));
  EXPECT_EQ(AshaRungs(Asha(5, 3), 1), (std::vector<int64_t>{5}));
}

// Grace 1, reduction 3: rungs at steps 1, 3, 9; lower is better. Every
// point below is between rungs 1 and 3, so it is judged at rung 1.
std::vector<PointHistory> RungOneSweep() {
  return {
      Point(0, {{1, 0.5, 1}, {2, 0.45, 10}}),
      Point(1, {{1, 0.4, 2}, {2, 0.2, 11}}),
      Point(2, {{1, 0.6, 3}}),
      Point(3, {{1, 0.3, 4}}),
      Point(4, {{1, 0.35, 5}}),
      Point(5, {{1, 0.45, 6}}),
  };
}

TEST(EarlyStopTest, AshaKeepsTheTopFractionOfAllValuesRecordedAtTheRung) {
  // Six values at rung 1, so the top 6 / 3 = 2 go on: 0.3 (D) and 0.35 (E).
  // A (0.5) ranks 5, B (0.4) 3, C (0.6) 6, F (0.45) 4: stopped.
  auto points = RungOneSweep();
  const bool expected_stop[] = {true, true, true, false, false, true};
  for (size_t i = 0; i < points.size(); ++i) {
    StopDecision d = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, i);
    EXPECT_EQ(d.stop, expected_stop[i]) << "point " << i << ": " << d.reason;
  }
  StopDecision a = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 0);
  EXPECT_EQ(a.at_step, 1);
  EXPECT_EQ(a.rank, 5);
  EXPECT_EQ(a.of, 6);
  EXPECT_NE(a.reason.find("ranks 5 of 6 (only the top 2 go on)"), std::string::npos) << a.reason;
  EXPECT_EQ(StoppedEarlyText(EarlyStopPolicy::Kind::kAsha, a, "val_loss"),
            "stopped early by ASHA at rung 1 (rank 5 of 6 on val_loss)");
}

TEST(EarlyStopTest, AshaDecidesNothingBeforeReductionValuesExistAtTheRung) {
  auto points = RungOneSweep();
  points.resize(2);  // A 0.5 and B 0.4: two values, three needed
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 0).stop);
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 1).stop);
}

TEST(EarlyStopTest, AshaPointPassedWhileFewPeersReportedIsStoppedWhenBetterOnesArrive) {
  // First wave A 0.5, B 0.4, C 0.6: 3 values, the top 1 goes on: B.
  auto points = RungOneSweep();
  points.resize(3);
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 1).stop);
  EXPECT_TRUE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 0).stop);
  // Second wave D 0.3, E 0.35, F 0.45 reaches rung 1 while B is still
  // before rung 3: B now ranks 3 of 6 and only the top 2 go on.
  points = RungOneSweep();
  StopDecision b = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 1);
  EXPECT_TRUE(b.stop);
  EXPECT_EQ(b.rank, 3);
  EXPECT_EQ(b.of, 6);
}

TEST(EarlyStopTest, AshaJudgesAPointOnlyAtTheHighestRungItReached) {
  // B went past rung 3 before the second wave came: it is judged at rung 3,
  // where it holds the only value (fewer than 3), so it goes on although
  // rung 1 now ranks it 3rd of 6.
  auto points = RungOneSweep();
  points[1].values.push_back({3, 0.2, 12});
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 1).stop);
}

TEST(EarlyStopTest, AshaUsesTheFirstLineAtOrPastTheRung) {
  // Reduction 2: rungs at 1, 2, 4, 8. Both points are at step 3, between
  // rungs 2 and 4: their rung-2 values are those of their step-2 lines
  // (point 1's later 3.0 does not count there). Higher is better: point 1's
  // 0.5 ranks 2 of 2 and only the top 1 goes on.
  std::vector<PointHistory> points = {Point(0, {{2, 1.0, 1}, {3, 1.0, 5}}),
                                      Point(1, {{2, 0.5, 2}, {3, 3.0, 6}})};
  StopDecision d = DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 1);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.at_step, 2) << d.reason;
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 0).stop);
}

TEST(EarlyStopTest, AshaRanksTheBestValueReachedByTheRung) {
  // At rung 4 point 1's latest value (0.5) is worse than point 0's 1.0, but
  // its best by then (2.0, at step 1) is better: point 0 is the one stopped.
  std::vector<PointHistory> points = {Point(0, {{1, 1.0, 1}, {4, 1.0, 5}}),
                                      Point(1, {{1, 2.0, 2}, {4, 0.5, 6}})};
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 1).stop);
  StopDecision d = DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 0);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.at_step, 4);
}

TEST(EarlyStopTest, AshaMaxModeAndNaNRanksWorst) {
  // Reduction 2, three values at rung 1: the top 1 goes on.
  std::vector<PointHistory> points = {Point(0, {{1, 0.9, 1}}), Point(1, {{1, NAN, 2}}),
                                      Point(2, {{1, 0.8, 3}})};
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 0).stop);
  EXPECT_EQ(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 1).rank, 3);
  EXPECT_TRUE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 2).stop);
}

// A sweep on a simulated clock: point i logs loss c_i + 1/step at every
// tick it runs, at most `slots` points run at once (in index order as slots
// free up), each up to `steps` steps, and every `every` ticks each running
// point is judged. Returns the steps spent in all and the points that ran
// to the end.
struct Simulated {
  int64_t steps_spent = 0;
  std::vector<int> finished;
};

Simulated SimulateSweep(const std::vector<double>& c, const EarlyStopPolicy& policy, int slots, int64_t steps,
                        int every) {
  std::vector<PointHistory> points;
  for (size_t i = 0; i < c.size(); ++i) points.push_back(Point(static_cast<int>(i), {}));
  enum class S { kWaiting, kRunning, kDone };
  std::vector<S> state(c.size(), S::kWaiting);
  Simulated out;
  for (int64_t tick = 1;; ++tick) {
    int running = 0;
    for (S s : state) running += s == S::kRunning;
    for (size_t i = 0; i < c.size() && running < slots; ++i) {
      if (state[i] == S::kWaiting) state[i] = S::kRunning, ++running;
    }
    if (running == 0) break;
    for (size_t i = 0; i < c.size(); ++i) {
      if (state[i] != S::kRunning) continue;
      const int64_t step = static_cast<int64_t>(points[i].values.size()) + 1;
      points[i].values.push_back({step, c[i] + 1.0 / static_cast<double>(step), tick});
      ++out.steps_spent;
      if (step == steps) {
        state[i] = S::kDone;
        points[i].completed = true;
        out.finished.push_back(static_cast<int>(i));
      }
    }
    if (tick % every != 0) continue;
    std::vector<size_t> stop;
    for (size_t i = 0; i < c.size(); ++i) {
      if (state[i] == S::kRunning && DecideEarlyStop(policy, ObjectiveMode::kMin, points, i).stop) stop.push_back(i);
    }
    for (size_t i : stop) state[i] = S::kDone;
  }
  return out;
}

// The sweep: learning rates 1.0 ... 0.003, the best at 0.1 (index 4).
const std::vector<double> kNineLossFloors = {0.9, 0.6, 0.35, 0.2, 0.05, 0.1, 0.3, 0.5, 0.8};

TEST(EarlyStopTest, AshaOnPointsThatStartTogetherIsSynchronousSuccessiveHalving) {
  // Grace 10, reduction 3, 90 steps, decisions at every step: 6 points stop
  // at 10, 2 at 30, 1 runs to 90 = 60 + 60 + 90 = 210 steps, successive
  // halving's count.
  Simulated every_step = SimulateSweep(kNineLossFloors, Asha(10, 3), 9, 90, 1);
  EXPECT_EQ(every_step.steps_spent, 210);
  EXPECT_EQ(every_step.finished, std::vector<int>{4});
  // Judged every 4 steps, the rungs are acted on at 12 and 32:
  // 6 x 12 + 2 x 32 + 90 = 226, within 1.3 x 210 = 273.
  Simulated every_four = SimulateSweep(kNineLossFloors, Asha(10, 3), 9, 90, 4);
  EXPECT_EQ(every_four.steps_spent, 226);
  EXPECT_LE(every_four.steps_spent, 273);
  EXPECT_EQ(every_four.finished, std::vector<int>{4});
}

TEST(EarlyStopTest, AshaOnPointsThatRunInWavesStaysAsynchronous) {
  // Three slots, so points 0-2 run first; a rung-10 value is c + 0.1.
  // Tick 10: 3 values, top 1 goes on: 2 (0.35); 0 and 1 stop (10 steps each).
  // Tick 20: 3 and 4 reach rung 10 (5 values, top 1): 4 (0.05) goes on, 3
  //   stops (10) and so does 2, now at step 20 (rank 3 of 5; 20 steps).
  // Tick 30: 5 and 6 reach it (7 values, top 2): 4 and 5 go on, 6 stops (10).
  // Tick 40: 7 (8 values, top 2) stops (10); tick 50: 8 (9, top 3) stops (10).
  // Rung 30 never holds 3 values (4 and 5 only): both run all 90 steps.
  Simulated waves = SimulateSweep(kNineLossFloors, Asha(10, 3), 3, 90, 1);
  EXPECT_EQ(waves.finished, (std::vector<int>{4, 5}));
  EXPECT_EQ(waves.steps_spent, 10 + 10 + 20 + 10 + 10 + 10 + 10 + 90 + 90);
}

EarlyStopPolicy Median(int64_t grace, int min_completed) {
  EarlyStopPolicy p;
  p.kind = EarlyStopPolicy::Kind::kMedian;
  p.grace = grace;
  p.min_completed = min_completed;
  return p;
}

// Three completed points; running averages up to step 2: 0.9, 0.8, 1.9 → median 0.9.
std::vector<PointHistory> MedianSweep() {
  return {
      Point(0, {{1, 1.0, 1}, {2, 0.8, 2}, {3, 0.6, 3}, {4, 0.4, 4}}, true),
      Point(1, {{1, 0.9, 1}, {2, 0.7, 2}, {3, 0.5, 3}, {4, 0.3, 4}}, true),
      Point(2, {{1, 2.0, 1}, {2, 1.8, 2}, {3, 1.6, 3}, {4, 1.4, 4}}, true),
  };
}

TEST(EarlyStopTest, MedianStopsAPointWorseThanTheMedianOfRunningAverages) {
  auto points = MedianSweep();
  points.push_back(Point(3, {{1, 1.5, 5}, {2, 1.2, 6}}));   // best 1.2 > 0.9: stop
  points.push_back(Point(4, {{1, 0.95, 5}, {2, 0.85, 6}})); // best 0.85 < 0.9: go on
  points.push_back(Point(5, {{1, 5.0, 5}}));                // step 1 < grace 2: go on
  StopDecision d = DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 3);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.at_step, 2);
  // Point 4, running and at step 2, is a peer too: averages 0.8, 0.9, 0.9, 1.9.
  EXPECT_NE(d.reason.find("median 0.9 of 4"), std::string::npos) << d.reason;
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 4).stop);
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 5).stop);
}

TEST(EarlyStopTest, MedianWaitsForEnoughCompletedPoints) {
  auto points = MedianSweep();
  points[2].completed = false;  // running, not yet at step 2: two peers, three needed
  points[2].values.resize(1);
  points.push_back(Point(3, {{1, 9.0, 5}, {2, 9.0, 6}}));
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 3).stop);
  EXPECT_TRUE(DecideEarlyStop(Median(2, 2), ObjectiveMode::kMin, points, 3).stop);
}

TEST(EarlyStopTest, MedianComparesWithPeersRunningAtTheSameTime) {
  // Nobody has completed; the three sweep points are running and past step 2.
  auto points = MedianSweep();
  for (auto& p : points) p.completed = false;
  points.push_back(Point(3, {{1, 1.5, 5}, {2, 1.2, 6}}));  // 1.2 worse than the median 0.9
  EXPECT_TRUE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 3).stop);
}

TEST(EarlyStopTest, MedianNeverStopsACompletedPointOrOneEqualToTheMedian) {
  auto points = MedianSweep();
  EXPECT_FALSE(DecideEarlyStop(Median(1, 2), ObjectiveMode::kMin, points, 2).stop);
  points.push_back(Point(3, {{2, 0.9, 5}}));  // equal, not strictly worse
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 3).stop);
}

TEST(EarlyStopTest, SummaryLastRanksTheValueAtTheLastLoggedStep) {
  // A noisy early step (0.1 at step 2) would win under `best`.
  const std::vector<Observation> values = {{1, 0.9, 1}, {2, 0.1, 2}, {4, 0.5, 4}, {3, 0.4, 3}};
  Objective last{"loss", ObjectiveMode::kMin, ObjectiveSummary::kLast};
  Objective best{"loss", ObjectiveMode::kMin, ObjectiveSummary::kBest};
  ASSERT_TRUE(SummaryValue(values, last));
  EXPECT_EQ(SummaryValue(values, last)->step, 4);
  EXPECT_DOUBLE_EQ(SummaryValue(values, last)->value, 0.5);
  EXPECT_EQ(SummaryValue(values, best)->step, 2);
  EXPECT_DOUBLE_EQ(SummaryValue(values, best)->value, 0.1);
  EXPECT_FALSE(SummaryValue({}, last));
  // A resumed job writes a step again: the later line counts.
  EXPECT_DOUBLE_EQ(SummaryValue({{5, 0.3, 1}, {5, 0.2, 2}}, last)->value, 0.2);
}

TEST(EarlyStopTest, ObjectiveNotLoggedNamesWhatWasSeen) {
  EXPECT_EQ(ObjectiveNotLogged("accuracy", false, {"loss", "acc"}), "objective 'accuracy' not logged; seen: acc, loss");
  EXPECT_EQ(ObjectiveNotLogged("acc", true, {"loss", "acc"}), "");
  EXPECT_EQ(ObjectiveNotLogged("acc", false, {}), "");  // nothing logged yet
}

}  // namespace
}  // namespace gpuherd::pipeline
