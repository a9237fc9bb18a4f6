#include "predict/features.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace gpuherd::predict {
namespace {

using store::RollupMetric;
using store::RollupRecord;

constexpr TimeMs kT0 = 1767225600000;

// A minute with every gauge at one value (min = mean = max).
RollupRecord Minute(int i, double temp, double power, double util = 80) {
  RollupRecord r;
  r.uuid = "GPU-test";
  r.minute = kT0 + i * kMinuteMs;
  r.samples = 3;
  r.stat(RollupMetric::kTempC) = store::RollupStat{temp, temp, temp};
  r.stat(RollupMetric::kPowerW) = store::RollupStat{power, power, power};
  r.stat(RollupMetric::kGpuUtil) = store::RollupStat{util, util, util};
  r.stat(RollupMetric::kSmClockMhz) = store::RollupStat{1800, 1800, 1800};
  r.ecc_sbe = 0;
  r.pcie_replay_count = 0;
  r.ecc_dbe = 0;
  return r;
}

float F(const FeatureRow& row, Feature f) { return row[static_cast<int>(f)]; }

TEST(FeaturesTest, FlatSeriesHasNoSlopeAndNoErrors) {
  std::vector<RollupRecord> m;
  for (int i = 0; i < 60; ++i) m.push_back(Minute(i, 70, 300));
  auto row = ExtractFeatures(m, 59, {90.0});
  ASSERT_TRUE(row);
  EXPECT_FLOAT_EQ(F(*row, Feature::kTempMean), 70);
  EXPECT_FLOAT_EQ(F(*row, Feature::kTempHeadroom), 20);
  EXPECT_NEAR(F(*row, Feature::kTempSlope), 0, 1e-6);
  EXPECT_NEAR(F(*row, Feature::kTempCreep), 0, 1e-6);
  EXPECT_EQ(F(*row, Feature::kSbeWindow), 0);
  EXPECT_EQ(F(*row, Feature::kReplayWindow), 0);
  EXPECT_NEAR(F(*row, Feature::kThermalRatioChange), 0, 1e-6);
  EXPECT_TRUE(std::isnan(F(*row, Feature::kFanMean)));  // no fan reported
}

TEST(FeaturesTest, TemperatureCreepAtConstantPower) {
  std::vector<RollupRecord> m;
  for (int i = 0; i < 60; ++i) m.push_back(Minute(i, 60 + 0.5 * i, 300));
  auto row = ExtractFeatures(m, 59, {90.0});
  ASSERT_TRUE(row);
  EXPECT_NEAR(F(*row, Feature::kTempSlope), 0.5, 1e-4);
  EXPECT_NEAR(F(*row, Feature::kTempSlope15), 0.5, 1e-4);
  EXPECT_NEAR(F(*row, Feature::kTempCreep), 0.5, 1e-4);
  EXPECT_GT(F(*row, Feature::kThermalRatioChange), 0.5);  // 35/275 -> 64.5/275 per W
  EXPECT_NEAR(F(*row, Feature::kTempHeadroom), 90 - 89.5, 1e-4);
}

TEST(FeaturesTest, HeatThatFollowsPowerIsNoCreep) {
  // The temperature rises because the power does: 0.1 °C per W, no drift.
  std::vector<RollupRecord> m;
  for (int i = 0; i < 60; ++i) {
    const double power = 100 + 4 * i + (i % 7) * 10;
    m.push_back(Minute(i, 30 + 0.1 * power, power));
  }
  auto row = ExtractFeatures(m, 59, {});
  ASSERT_TRUE(row);
  EXPECT_GT(F(*row, Feature::kTempSlope), 0.3);
  EXPECT_NEAR(F(*row, Feature::kTempCreep), 0, 1e-3);
  EXPECT_TRUE(std::isnan(F(*row, Feature::kTempHeadroom)));  // slowdown unknown
}

TEST(FeaturesTest, CounterRatesAccelerationAndReset) {
  std::vector<RollupRecord> m;
  uint64_t sbe = 0, replays = 0;
  for (int i = 0; i < 60; ++i) {
    RollupRecord r = Minute(i, 70, 300);
    if (i >= 30) sbe += (i >= 45 ? 3 : 1);  // 15 in minutes 30-44, 45 in 45-59
    if (i == 40) replays = 0;               // driver reload: counter restarts
    else replays += 2;
    r.ecc_sbe = sbe;
    r.pcie_replay_count = replays;
    m.push_back(r);
  }
  auto row = ExtractFeatures(m, 59, {});
  ASSERT_TRUE(row);
  EXPECT_EQ(F(*row, Feature::kSbeWindow), 60);
  EXPECT_EQ(F(*row, Feature::kSbe15), 45);
  EXPECT_NEAR(F(*row, Feature::kSbeAccel), std::log1p(45.0) - std::log1p(15.0), 1e-5);
  // 59 deltas of 2 except the reset minute, which counts from 0.
  EXPECT_EQ(F(*row, Feature::kReplayWindow), 58 * 2);
  // The last 15 minutes: 15 deltas of 2; the 15 before hold the reset (0).
  EXPECT_NEAR(F(*row, Feature::kReplayAccel), std::log1p(30.0) - std::log1p(28.0), 1e-5);
}

TEST(FeaturesTest, WindowSlidesAndNeedsEnoughMinutes) {
  std::vector<RollupRecord> m;
  for (int i = 0; i < 120; ++i) {
    RollupRecord r = Minute(i, 70, 300);
    r.xid_count = i < 50 ? 1 : 0;  // XIDs only long ago
    m.push_back(r);
  }
  EXPECT_FALSE(ExtractFeatures(m, 5, {}));  // 6 minutes < min_minutes
  auto early = ExtractFeatures(m, 59, {});
  auto late = ExtractFeatures(m, 119, {});
  ASSERT_TRUE(early && late);
  EXPECT_EQ(F(*early, Feature::kXidWindow), 50);
  EXPECT_EQ(F(*late, Feature::kXidWindow), 0);
  FeatureOptions wide;
  wide.window = 120 * kMinuteMs;
  EXPECT_EQ(F(*ExtractFeatures(m, 119, {}, wide), Feature::kXidWindow), 50);
  EXPECT_FALSE(ExtractFeatures(m, 120, {}));  // past the end
}

TEST(FeaturesTest, ClockAndFanWobble) {
  std::vector<RollupRecord> m;
  for (int i = 0; i < 60; ++i) {
    RollupRecord r = Minute(i, 70, 300);
    const double swing = i >= 45 ? 200 : 0;  // the clock swings in the last 15 minutes
    r.stat(RollupMetric::kSmClockMhz) = store::RollupStat{1800 - swing, 1800 - swing / 2, 1800};
    r.stat(RollupMetric::kFanPct) = store::RollupStat{i >= 45 ? 52.0 : 60.0, 58, 60};
    m.push_back(r);
  }
  auto row = ExtractFeatures(m, 59, {});
  ASSERT_TRUE(row);
  EXPECT_NEAR(F(*row, Feature::kClockWobble15), 200.0 / 1700, 1e-5);
  EXPECT_NEAR(F(*row, Feature::kClockWobbleChange), 200.0 / 1700, 1e-5);
  EXPECT_NEAR(F(*row, Feature::kClockWobble), 200.0 / 1700 / 4, 1e-5);
  EXPECT_NEAR(F(*row, Feature::kFanWobble), 8, 1e-5);
  EXPECT_FLOAT_EQ(F(*row, Feature::kFanMean), 58);
}

TEST(FeaturesTest, MinutesWhenAJobStartsOrStopsAreNoWobble) {
  // Idle for 50 minutes, a job starts halfway through minute 50 (idle and
  // loaded readings in that minute), then a steady load.
  std::vector<RollupRecord> m;
  for (int i = 0; i < 60; ++i) {
    RollupRecord r = i < 50 ? Minute(i, 33, 30, 0) : Minute(i, 60, 350, 100);
    if (i < 50) r.stat(RollupMetric::kSmClockMhz) = store::RollupStat{210, 210, 210};
    if (i == 50) {
      r.stat(RollupMetric::kGpuUtil) = store::RollupStat{0, 50, 100};
      r.stat(RollupMetric::kPowerW) = store::RollupStat{30, 190, 350};
      r.stat(RollupMetric::kSmClockMhz) = store::RollupStat{210, 1000, 1800};
    }
    m.push_back(r);
  }
  auto row = ExtractFeatures(m, 59, {});
  ASSERT_TRUE(row);
  EXPECT_NEAR(F(*row, Feature::kPowerWobble), 0, 1e-6);
  EXPECT_NEAR(F(*row, Feature::kClockWobble15), 0, 1e-6);
  EXPECT_NEAR(F(*row, Feature::kClockWobble), 0, 1e-6);
  // The same swings in a minute loaded throughout do count.
  m[55].stat(RollupMetric::kSmClockMhz) = store::RollupStat{900, 1350, 1800};
  row = ExtractFeatures(m, 59, {});
  ASSERT_TRUE(row);
  EXPECT_NEAR(F(*row, Feature::kClockWobble15), 900.0 / 1350 / 9, 1e-5);
}

TEST(FeaturesTest, NamesAreStable) {
  EXPECT_STREQ(FeatureName(Feature::kTempMean), "temp_mean");
  EXPECT_STREQ(FeatureName(Feature::kDbeWindow), "dbe_window");
  EXPECT_STREQ(FeatureName(Feature::kCount), "unknown");
}

}  // namespace
}  // namespace gpuherd::predict
