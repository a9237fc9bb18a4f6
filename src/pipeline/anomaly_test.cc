#include "pipeline/anomaly.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pipeline/metric_line.h"

namespace gpuherd::pipeline {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

AnomalyConfig NanOnly(AnomalyAction action) {
  AnomalyConfig c;
  c.nan.enabled = true;
  c.nan.action = action;
  return c;
}

AnomalyConfig SpikeOnly(double k, int window) {
  AnomalyConfig c;
  c.spike.enabled = true;
  c.spike.k = k;
  c.spike.window = window;
  return c;
}

nlohmann::json Line(int step, double loss) { return {{"step", step}, {"loss", loss}}; }

TEST(AnomalyDetectorTest, NanFiresOncePerEpisode) {
  AnomalyDetector d(NanOnly(AnomalyAction::kRestart));
  EXPECT_THAT(d.Observe(1000, Line(1, 0.5)), IsEmpty());
  auto found = d.Observe(2000, Line(2, kNan));
  ASSERT_THAT(found, SizeIs(1));
  EXPECT_EQ(found[0].kind, AnomalyKind::kNan);
  EXPECT_EQ(found[0].metric, "loss");
  EXPECT_TRUE(std::isnan(found[0].value));
  EXPECT_EQ(found[0].action, AnomalyAction::kRestart);
  EXPECT_EQ(found[0].at, 2000);
  EXPECT_THAT(found[0].message, HasSubstr("'loss' is NaN at step 2"));
  // Still NaN, now infinite: the same episode.
  EXPECT_THAT(d.Observe(3000, Line(3, kNan)), IsEmpty());
  EXPECT_THAT(d.Observe(4000, Line(4, kInf)), IsEmpty());
  // Recovers, then diverges again: a new episode.
  EXPECT_THAT(d.Observe(5000, Line(5, 0.4)), IsEmpty());
  auto again = d.Observe(6000, Line(6, -kInf));
  ASSERT_THAT(again, SizeIs(1));
  EXPECT_THAT(again[0].message, HasSubstr("-Inf"));
}

TEST(AnomalyDetectorTest, NanWatchesNestedFieldsAndHonoursTheMetricList) {
  AnomalyDetector all(NanOnly(AnomalyAction::kStop));
  auto found = all.Observe(1, {{"eval", {{"loss", kInf}}}, {"grads", {1.0, kNan}}});
  ASSERT_THAT(found, SizeIs(2));
  EXPECT_EQ(found[0].metric, "eval.loss");
  EXPECT_EQ(found[1].metric, "grads[1]");

  AnomalyConfig only_loss = NanOnly(AnomalyAction::kStop);
  only_loss.nan.metrics = {"loss"};
  AnomalyDetector some(only_loss);
  EXPECT_THAT(some.Observe(1, {{"grad_norm", kNan}, {"loss", 1.0}}), IsEmpty());
  EXPECT_THAT(some.Observe(2, {{"loss", kNan}}), SizeIs(1));
}

TEST(AnomalyDetectorTest, SpikeWaitsForAFullWindowThenComparesWithTheMedian) {
  AnomalyDetector d(SpikeOnly(/*k=*/10, /*window=*/5));
  // A huge first value is not a spike: there is no history yet.
  EXPECT_THAT(d.Observe(0, Line(0, 100)), IsEmpty());
  for (int step = 1; step <= 4; ++step) EXPECT_THAT(d.Observe(step, Line(step, 1.0)), IsEmpty());
  // History {100, 1, 1, 1, 1}: median 1, threshold 10.
  EXPECT_THAT(d.Observe(5, Line(5, 9.9)), IsEmpty());
  // History {1, 1, 1, 1, 9.9}: median 1.
  auto found = d.Observe(6, Line(6, 10.5));
  ASSERT_THAT(found, SizeIs(1));
  EXPECT_EQ(found[0].kind, AnomalyKind::kSpike);
  EXPECT_DOUBLE_EQ(found[0].value, 10.5);
  EXPECT_DOUBLE_EQ(found[0].threshold, 10);
  EXPECT_EQ(found[0].action, AnomalyAction::kCheckpoint);
  EXPECT_THAT(found[0].message, HasSubstr("more than 10 × the median 1 of its last 5 values"));
}

TEST(AnomalyDetectorTest, SpikeFiresOncePerEpisode) {
  AnomalyDetector d(SpikeOnly(3, 4));
  for (int step = 0; step < 4; ++step) d.Observe(step, Line(step, 1.0));
  EXPECT_THAT(d.Observe(4, Line(4, 50)), SizeIs(1));
  EXPECT_THAT(d.Observe(5, Line(5, 60)), IsEmpty());  // above 3 × median(1, 1, 1, 50)
  EXPECT_THAT(d.Observe(6, Line(6, 1.0)), IsEmpty());  // back to normal: episode over
  for (int step = 7; step < 12; ++step) d.Observe(step, Line(step, 1.0));
  EXPECT_THAT(d.Observe(12, Line(12, 40)), SizeIs(1));
}

TEST(AnomalyDetectorTest, SpikeIgnoresValuesThatAreNotPositive) {
  AnomalyDetector d(SpikeOnly(2, 3));
  for (int step = 0; step < 3; ++step) d.Observe(step, Line(step, 1.0));
  EXPECT_THAT(d.Observe(3, Line(3, 0)), IsEmpty());
  EXPECT_THAT(d.Observe(4, Line(4, -5)), IsEmpty());
  // The zero and the negative value were not remembered: the median is still 1.
  EXPECT_THAT(d.Observe(5, Line(5, 2.5)), SizeIs(1));
}

TEST(AnomalyDetectorTest, SpikeWatchesLossFieldsByDefaultOrTheListedOnes) {
  AnomalyDetector d(SpikeOnly(2, 2));
  auto line = [](double v) {
    return nlohmann::json{{"loss", v}, {"val_loss", v}, {"acc", v}, {"eval", {{"loss", v}}}};
  };
  d.Observe(0, line(1));
  d.Observe(1, line(1));
  auto found = d.Observe(2, line(9));
  ASSERT_THAT(found, SizeIs(3));
  for (const Anomaly& a : found) EXPECT_NE(a.metric, "acc");

  AnomalyConfig listed = SpikeOnly(2, 2);
  listed.spike.metrics = {"acc"};
  AnomalyDetector only_acc(listed);
  only_acc.Observe(0, line(1));
  only_acc.Observe(1, line(1));
  auto acc = only_acc.Observe(2, line(9));
  ASSERT_THAT(acc, SizeIs(1));
  EXPECT_EQ(acc[0].metric, "acc");
}

TEST(AnomalyDetectorTest, StallStartsAtTheFirstLineAndFiresOnce) {
  AnomalyConfig c;
  c.stall.enabled = true;
  c.stall.after = 15 * kMinuteMs;
  c.stall.action = AnomalyAction::kStop;
  AnomalyDetector d(c);
  // No line yet: a step that writes no metrics is never stalled.
  EXPECT_THAT(d.Tick(60 * kMinuteMs), IsEmpty());
  const TimeMs t0 = 100 * kMinuteMs;
  d.Observe(t0, Line(1, 1.0));
  EXPECT_THAT(d.Tick(t0 + 15 * kMinuteMs - 1), IsEmpty());
  auto found = d.Tick(t0 + 16 * kMinuteMs);
  ASSERT_THAT(found, SizeIs(1));
  EXPECT_EQ(found[0].kind, AnomalyKind::kStall);
  EXPECT_DOUBLE_EQ(found[0].value, 16 * 60);
  EXPECT_DOUBLE_EQ(found[0].threshold, 15 * 60);
  EXPECT_EQ(found[0].action, AnomalyAction::kStop);
  EXPECT_THAT(found[0].message, HasSubstr("no metric line for 16m"));
  EXPECT_THAT(d.Tick(t0 + 30 * kMinuteMs), IsEmpty());
  // A new line ends the episode; silence again is a new stall.
  d.Observe(t0 + 31 * kMinuteMs, Line(2, 1.0));
  EXPECT_THAT(d.Tick(t0 + 40 * kMinuteMs), IsEmpty());
  EXPECT_THAT(d.Tick(t0 + 46 * kMinuteMs), SizeIs(1));
}

TEST(AnomalyDetectorTest, DisabledRulesFindNothing) {
  AnomalyDetector d{AnomalyConfig()};
  for (int step = 0; step < 30; ++step) d.Observe(step, Line(step, 1.0));
  EXPECT_THAT(d.Observe(30, Line(30, kNan)), IsEmpty());
  EXPECT_THAT(d.Observe(31, Line(31, 1e9)), IsEmpty());
  EXPECT_THAT(d.Tick(1'000'000'000), IsEmpty());
}

TEST(AnomalyDetectorTest, WorksOnLinesAsPythonWritesThem) {
  AnomalyDetector d(NanOnly(AnomalyAction::kCheckpoint));
  auto line = ParseMetricLine(R"({"step": 7, "loss": NaN})");
  ASSERT_TRUE(line.ok());
  auto found = d.Observe(0, *line);
  ASSERT_THAT(found, SizeIs(1));
  EXPECT_THAT(found[0].message, HasSubstr("at step 7"));
}

TEST(AnomalyActionTest, NamesRoundTrip) {
  for (AnomalyAction a : {AnomalyAction::kNone, AnomalyAction::kCheckpoint, AnomalyAction::kStop,
                          AnomalyAction::kRestart}) {
    EXPECT_EQ(ParseAnomalyAction(AnomalyActionName(a)), a);
  }
  EXPECT_FALSE(ParseAnomalyAction("reboot").has_value());
}

}  // namespace
}  // namespace gpuherd::pipeline
