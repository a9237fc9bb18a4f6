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

// Rungs at steps 1, 3, 9; reduction 3; lower is better. By hand:
//   rung 1 arrivals: A 0.5 (1st, top 1 of 1 go on), B 0.4 (top 1 of 2: B is best),
//   C 0.6 (3rd of 3, only the top 1 go on: stop), D 0.3 (1st of 4, top 2),
//   E 0.35 (2nd of 5, top 2), F 0.45 (4th of 6, top 2: stop).
std::vector<PointHistory> AshaSweep() {
  return {
      Point(0, {{1, 0.5, 1}, {3, 0.45, 10}}),
      Point(1, {{1, 0.4, 2}, {3, 0.2, 11}}),
      Point(2, {{1, 0.6, 3}}),
      Point(3, {{1, 0.3, 4}}),
      Point(4, {{1, 0.35, 5}}),
      Point(5, {{1, 0.45, 6}}),
  };
}

TEST(EarlyStopTest, AshaKeepsTheTopThirdOfEachRungInArrivalOrder) {
  auto points = AshaSweep();
  const bool expected_stop[] = {false, false, true, false, false, true};
  for (size_t i = 0; i < points.size(); ++i) {
    StopDecision d = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, i);
    EXPECT_EQ(d.stop, expected_stop[i]) << "point " << i << ": " << d.reason;
  }
  StopDecision c = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 2);
  EXPECT_EQ(c.at_step, 1);
  EXPECT_NE(c.reason.find("ranks 3 of 3"), std::string::npos) << c.reason;
  StopDecision f = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 5);
  EXPECT_NE(f.reason.find("ranks 4 of 6 (only the top 2 go on)"), std::string::npos) << f.reason;
}

TEST(EarlyStopTest, AshaDecisionAtARungDoesNotChangeWhenLaterPointsArrive) {
  auto points = AshaSweep();
  // Three much better points reach rung 1 after A: A's decision stands.
  for (int i = 0; i < 3; ++i) points.push_back(Point(6 + i, {{1, 0.01, 20 + i}}));
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 0).stop);
}

TEST(EarlyStopTest, AshaSecondRungJudgesOnlyThoseThatReachedIt) {
  auto points = AshaSweep();
  // At rung 3: B (0.2) arrived at t=11 after A (0.45, t=10): 2 arrivals, top 1.
  // A was first: goes on. G arrives third, worse than both: stops at rung 3.
  // G: 0.3 at rung 1 (ties the best: goes on); best so far 0.3 at rung 3,
  // where A (0.45) and B (0.2) arrived first: 2nd of 3, only the top 1 go on.
  points.push_back(Point(6, {{1, 0.3, 7}, {3, 0.5, 12}}));
  StopDecision g = DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 6);
  EXPECT_TRUE(g.stop);
  EXPECT_EQ(g.at_step, 3);
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 3), ObjectiveMode::kMin, points, 1).stop);
}

TEST(EarlyStopTest, AshaUsesTheFirstLineAtOrPastTheRung) {
  // Reduction 2: rungs at 1, 2, 4, 8. Lines at steps 2 and 5 only: rungs 1
  // and 2 are reached with the line of step 2 (point 1's 0.5 is worse than
  // point 0's 1.0, higher being better, and it arrived second): stopped at 1.
  std::vector<PointHistory> points = {Point(0, {{2, 1.0, 1}, {5, 1.0, 5}}),
                                      Point(1, {{2, 0.5, 2}, {5, 3.0, 6}})};
  StopDecision d = DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 1);
  EXPECT_TRUE(d.stop);
  EXPECT_EQ(d.at_step, 1) << d.reason;
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 0).stop);
}

TEST(EarlyStopTest, AshaRanksTheBestValueReachedByTheRung) {
  // Point 1's latest value at rung 4 (0.5) is worse than point 0's 1.0, but
  // its best by then (2.0, at step 1) is better: it goes on at every rung.
  std::vector<PointHistory> points = {Point(0, {{1, 1.0, 1}, {4, 1.0, 5}}),
                                      Point(1, {{1, 2.0, 2}, {4, 0.5, 6}})};
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 1).stop);
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 0).stop);
}

TEST(EarlyStopTest, AshaMaxModeAndNaNRanksWorst) {
  std::vector<PointHistory> points = {Point(0, {{1, 0.9, 1}}), Point(1, {{1, NAN, 2}}),
                                      Point(2, {{1, 0.8, 3}})};
  // Reduction 2: arrivals 1, 2, 3 keep 1, 1, 2.
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 0).stop);
  EXPECT_TRUE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 1).stop);
  EXPECT_FALSE(DecideEarlyStop(Asha(1, 2), ObjectiveMode::kMax, points, 2).stop);
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
  EXPECT_NE(d.reason.find("median 0.9 of 3"), std::string::npos) << d.reason;
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 4).stop);
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 5).stop);
}

TEST(EarlyStopTest, MedianWaitsForEnoughCompletedPoints) {
  auto points = MedianSweep();
  points[2].completed = false;  // only two completed, three needed
  points.push_back(Point(3, {{1, 9.0, 5}, {2, 9.0, 6}}));
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 3).stop);
  EXPECT_TRUE(DecideEarlyStop(Median(2, 2), ObjectiveMode::kMin, points, 3).stop);
}

TEST(EarlyStopTest, MedianNeverStopsACompletedPointOrOneEqualToTheMedian) {
  auto points = MedianSweep();
  EXPECT_FALSE(DecideEarlyStop(Median(1, 2), ObjectiveMode::kMin, points, 2).stop);
  points.push_back(Point(3, {{2, 0.9, 5}}));  // equal, not strictly worse
  EXPECT_FALSE(DecideEarlyStop(Median(2, 3), ObjectiveMode::kMin, points, 3).stop);
}

}  // namespace
}  // namespace gpuherd::pipeline
