#include "telemetry/rollup.h"

#include <optional>

#include <gtest/gtest.h>

namespace gpuherd::telemetry {
namespace {

using store::RollupMetric;

constexpr TimeMs kMinute0 = 1'699'999'980'000;  // the start of a minute
constexpr uint64_t kMib = 1024 * 1024;

gpu::GpuSample At(TimeMs t) {
  gpu::GpuSample s;
  s.time = t;
  return s;
}

TEST(RollupTest, MinMeanMaxAreExact) {
  Rollup rollup("GPU-a");
  const double utils[] = {10, 60, 20};
  const uint64_t mem[] = {1 * kMib, 3 * kMib, 5 * kMib};
  for (int i = 0; i < 3; ++i) {
    gpu::GpuSample s = At(kMinute0 + i * 5000);
    s.gpu_util_pct = utils[i];
    s.mem_used_bytes = mem[i];
    s.sm_clock_mhz = 1000 + i * 300;
    EXPECT_FALSE(rollup.AddSample(s).has_value());
  }
  std::optional<store::RollupRecord> r = rollup.Flush();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->uuid, "GPU-a");
  EXPECT_EQ(r->minute, kMinute0);
  EXPECT_EQ(r->samples, 3);
  EXPECT_EQ(r->failures, 0);
  const auto& util = r->stat(RollupMetric::kGpuUtil);
  ASSERT_TRUE(util.has_value());
  EXPECT_DOUBLE_EQ(util->min, 10);
  EXPECT_DOUBLE_EQ(util->mean, 30);
  EXPECT_DOUBLE_EQ(util->max, 60);
  const auto& mem_mib = r->stat(RollupMetric::kMemUsedMib);
  ASSERT_TRUE(mem_mib.has_value());
  EXPECT_DOUBLE_EQ(mem_mib->min, 1);
  EXPECT_DOUBLE_EQ(mem_mib->mean, 3);
  EXPECT_DOUBLE_EQ(mem_mib->max, 5);
  const auto& clock = r->stat(RollupMetric::kSmClockMhz);
  ASSERT_TRUE(clock.has_value());
  EXPECT_DOUBLE_EQ(clock->min, 1000);
  EXPECT_DOUBLE_EQ(clock->mean, 1300);
  EXPECT_DOUBLE_EQ(clock->max, 1600);
}

TEST(RollupTest, AbsentMetricStaysAbsentAndPartialOnesAverageOverTheirReadings) {
  Rollup rollup("GPU-a");
  gpu::GpuSample first = At(kMinute0);
  first.temp_c = 50;
  first.fan_pct = 30;
  gpu::GpuSample second = At(kMinute0 + 5000);
  second.temp_c = 70;  // no fan reading this time
  (void)rollup.AddSample(first);
  (void)rollup.AddSample(second);
  std::optional<store::RollupRecord> r = rollup.Flush();
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->stat(RollupMetric::kPowerW).has_value());
  EXPECT_FALSE(r->stat(RollupMetric::kGpuUtil).has_value());
  ASSERT_TRUE(r->stat(RollupMetric::kFanPct).has_value());
  EXPECT_DOUBLE_EQ(r->stat(RollupMetric::kFanPct)->mean, 30);
  EXPECT_DOUBLE_EQ(r->stat(RollupMetric::kTempC)->mean, 60);
  EXPECT_FALSE(r->pcie_replay_count.has_value());
  EXPECT_FALSE(r->ecc_sbe.has_value());
}

TEST(RollupTest, MinuteClosesWhenALaterMinuteArrives) {
  Rollup rollup("GPU-a");
  gpu::GpuSample last_of_first = At(kMinute0 + 59'999);
  last_of_first.power_w = 100;
  EXPECT_FALSE(rollup.AddSample(last_of_first).has_value());

  gpu::GpuSample first_of_second = At(kMinute0 + 60'000);
  first_of_second.power_w = 300;
  std::optional<store::RollupRecord> closed = rollup.AddSample(first_of_second);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->minute, kMinute0);
  EXPECT_EQ(closed->samples, 1);
  EXPECT_DOUBLE_EQ(closed->stat(RollupMetric::kPowerW)->max, 100);

  std::optional<store::RollupRecord> open = rollup.Flush();
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->minute, kMinute0 + 60'000);
  EXPECT_EQ(open->samples, 1);
  EXPECT_DOUBLE_EQ(open->stat(RollupMetric::kPowerW)->min, 300);
  EXPECT_FALSE(rollup.Flush().has_value());
}

TEST(RollupTest, MinutesWithoutReadingsProduceNoRows) {
  Rollup rollup("GPU-a");
  (void)rollup.AddSample(At(kMinute0 + 1000));
  std::optional<store::RollupRecord> closed = rollup.AddSample(At(kMinute0 + 5 * kMinuteMs));
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->minute, kMinute0);
  EXPECT_EQ(rollup.Flush()->minute, kMinute0 + 5 * kMinuteMs);
}

TEST(RollupTest, EarlierMinuteIsFoldedIntoTheOpenOne) {
  Rollup rollup("GPU-a");
  (void)rollup.AddSample(At(kMinute0 + kMinuteMs));
  // The wall clock stepped back a minute.
  EXPECT_FALSE(rollup.AddSample(At(kMinute0 + 10)).has_value());
  std::optional<store::RollupRecord> r = rollup.Flush();
  EXPECT_EQ(r->minute, kMinute0 + kMinuteMs);
  EXPECT_EQ(r->samples, 2);
}

TEST(RollupTest, CountersAreTakenAtTheMinutesEndAndThrottleBitsOred) {
  Rollup rollup("GPU-a");
  gpu::GpuSample a = At(kMinute0);
  a.pcie_replay_count = 5;
  a.ecc_sbe_volatile = 1;
  a.ecc_dbe_volatile = 0;
  a.throttle_reasons = gpu::throttle::kSwPowerCap;
  a.xids = {{kMinute0, 13, ""}, {kMinute0, 31, ""}};
  gpu::GpuSample b = At(kMinute0 + 5000);
  b.pcie_replay_count = 7;
  b.ecc_sbe_volatile = 4;
  b.ecc_dbe_volatile = 0;
  b.throttle_reasons = gpu::throttle::kHwThermalSlowdown;
  b.xids = {{kMinute0 + 5000, 79, ""}};
  gpu::GpuSample c = At(kMinute0 + 10'000);  // reports no counters
  c.throttle_reasons = 0;
  (void)rollup.AddSample(a);
  (void)rollup.AddSample(b);
  (void)rollup.AddSample(c);
  std::optional<store::RollupRecord> r = rollup.Flush();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->pcie_replay_count, 7u);
  EXPECT_EQ(r->ecc_sbe, 4u);
  EXPECT_EQ(r->ecc_dbe, 0u);
  EXPECT_EQ(r->throttle_reasons_seen,
            gpu::throttle::kSwPowerCap | gpu::throttle::kHwThermalSlowdown);
  EXPECT_EQ(r->xid_count, 3);
}

TEST(RollupTest, FailuresAreCountedAndCloseMinutesToo) {
  Rollup rollup("GPU-a");
  gpu::GpuSample s = At(kMinute0);
  s.temp_c = 40;
  (void)rollup.AddSample(s);
  EXPECT_FALSE(rollup.AddFailure(kMinute0 + 5000).has_value());
  std::optional<store::RollupRecord> closed = rollup.AddFailure(kMinute0 + kMinuteMs);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->samples, 1);
  EXPECT_EQ(closed->failures, 1);

  (void)rollup.AddFailure(kMinute0 + kMinuteMs + 5000);
  std::optional<store::RollupRecord> lost_minute = rollup.Flush();
  ASSERT_TRUE(lost_minute.has_value());
  EXPECT_EQ(lost_minute->samples, 0);
  EXPECT_EQ(lost_minute->failures, 2);
  for (const auto& stat : lost_minute->stats) EXPECT_FALSE(stat.has_value());
}

TEST(RollupTest, FlushWithNothingOpenReturnsNothing) {
  Rollup rollup("GPU-a");
  EXPECT_FALSE(rollup.Flush().has_value());
}

}  // namespace
}  // namespace gpuherd::telemetry
