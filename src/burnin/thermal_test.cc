// The pure parts of the levels: the curve analysis, the idle checks and the
// PCIe arithmetic.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "burnin/idle_checks.h"
#include "burnin/pcie.h"
#include "burnin/thermal.h"

namespace gpuherd::burnin {
namespace {

using ::testing::HasSubstr;

// One point a second for `minutes`, stress from the first minute on.
std::vector<TempPoint> Curve(int minutes, double (*temp)(double minutes_into_stress),
                             uint64_t throttle_from_minute = 1000) {
  std::vector<TempPoint> curve;
  for (DurationMs t = 0; t <= minutes * kMinuteMs; t += kSecondMs) {
    const double m = static_cast<double>(t - kMinuteMs) / kMinuteMs;
    TempPoint p;
    p.t = t;
    p.temp_c = t < kMinuteMs ? 35.0 : temp(m);
    p.power_w = t < kMinuteMs ? 60.0 : 400.0;
    p.throttle_reasons = gpu::throttle::kSwPowerCap;
    if (m >= throttle_from_minute) p.throttle_reasons |= gpu::throttle::kSwThermalSlowdown;
    curve.push_back(p);
  }
  return curve;
}

double Settling(double m) { return 70 - 35 * std::exp(-m * 60 / 100); }  // τ = 100 s
double Climbing(double m) { return Settling(m) + 1.5 * m; }

TEST(ThermalTest, ASettlingCardReachesItsPlateau) {
  const auto curve = Curve(16, Settling);
  const ThermalAnalysis a = AnalyzeCurve(curve, StressSpan{kMinuteMs, 16 * kMinuteMs});
  EXPECT_EQ(a.summary.idle_temp_c, 35);
  EXPECT_NEAR(*a.summary.max_temp_c, 70, 0.01);
  EXPECT_EQ(a.summary.max_power_w, 400);
  // Within 1 °C of 70 once 35·e^(−t/100 s) < 1: after about 356 s.
  ASSERT_TRUE(a.summary.time_to_steady_s);
  EXPECT_NEAR(*a.summary.time_to_steady_s, 356, 3);
  ASSERT_TRUE(a.summary.max_slope_c_per_min);
  EXPECT_NEAR(*a.summary.max_slope_c_per_min, 35 * (1 - std::exp(-0.6)), 0.5);  // the first minute
  ASSERT_TRUE(a.end_trend_c_per_min);
  EXPECT_LT(std::abs(*a.end_trend_c_per_min), 0.1);
  EXPECT_EQ(a.summary.throttled_fraction, 0);
  EXPECT_EQ(a.power_capped_fraction, 1);
  for (const Check& c : ThermalChecks(a, 89.0, 15 * kMinuteMs)) {
    EXPECT_EQ(c.outcome, CheckOutcome::kPass) << c.name;
  }
}

TEST(ThermalTest, AClimbAtTheEndIsRunaway) {
  const auto curve = Curve(16, Climbing, 12);
  const ThermalAnalysis a = AnalyzeCurve(curve, StressSpan{kMinuteMs, 16 * kMinuteMs});
  ASSERT_TRUE(a.end_trend_c_per_min);
  EXPECT_NEAR(*a.end_trend_c_per_min, 1.5, 0.05);
  EXPECT_FALSE(a.summary.time_to_steady_s);
  EXPECT_NEAR(a.summary.throttled_fraction, 3.0 / 15, 0.01);
  const auto checks = ThermalChecks(a, 89.0, 15 * kMinuteMs);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_EQ(checks[0].reason, "over_slowdown");  // 70 + 22.5 > 89
  EXPECT_EQ(checks[0].outcome, CheckOutcome::kFail);
  EXPECT_EQ(checks[1].reason, "thermal_runaway");
  EXPECT_EQ(checks[2].reason, "thermal_throttle");
  EXPECT_NEAR(checks[2].values.at("throttled_fraction"), 0.2, 0.01);
}

TEST(ThermalTest, ShortStressIsNotJudgedForTrend) {
  const auto curve = Curve(4, Settling);
  const ThermalAnalysis a = AnalyzeCurve(curve, StressSpan{kMinuteMs, 4 * kMinuteMs});
  EXPECT_FALSE(a.end_trend_c_per_min);
  const auto checks = ThermalChecks(a, 68.0, 3 * kMinuteMs);
  EXPECT_EQ(checks[0].reason, "low_headroom");  // 64.2 °C against 68
  EXPECT_EQ(checks[1].outcome, CheckOutcome::kSkipped);
  EXPECT_EQ(checks[1].reason, "too_short");
  EXPECT_THAT(checks[1].message, HasSubstr("at least 10m"));
}

TEST(ThermalTest, ThinningKeepsTheHottestPointAndTheEnds) {
  std::vector<TempPoint> curve;
  for (int i = 0; i < 10000; ++i) curve.push_back({i * 1000, 40.0 + (i == 4567 ? 30 : 0), {}, {}, 0});
  const auto thin = ThinCurve(curve, 500);
  EXPECT_LE(thin.size(), 500u);
  EXPECT_GE(thin.size(), 400u);
  EXPECT_EQ(thin.front().t, 0);
  EXPECT_EQ(thin.back().t, 9999 * 1000);
  EXPECT_TRUE(std::any_of(thin.begin(), thin.end(), [](const TempPoint& p) { return *p.temp_c == 70; }));
  EXPECT_EQ(ThinCurve(thin, 1000).size(), thin.size());
}

TEST(PcieTest, TheoreticalBandwidthFollowsGenerationAndEncoding) {
  EXPECT_NEAR(PcieLinkGbs(3, 16), 15.75, 0.01);
  EXPECT_NEAR(PcieLinkGbs(1, 16), 4.0, 1e-9);   // 2.5 GT/s, 8b/10b
  EXPECT_NEAR(PcieLinkGbs(2, 8), 4.0, 1e-9);
  EXPECT_NEAR(PcieLinkGbs(4, 16), 31.5, 0.01);
  EXPECT_NEAR(PcieLinkGbs(5, 16), 63.0, 0.02);
  EXPECT_EQ(PcieLinkGbs(6, 16), 0);
}

gpu::GpuInfo Card() {
  gpu::GpuInfo info;
  info.name = "NVIDIA A100-SXM4-40GB";
  info.driver_version = "550.54.15";
  info.max_pcie_gen = 4;
  info.max_pcie_width = 16;
  info.ecc_enabled = true;
  info.power_limit_default_w = 400;
  info.temp_slowdown_c = 89;
  return info;
}

gpu::GpuSample Idle() {
  gpu::GpuSample s;
  s.temp_c = 34;
  s.power_w = 55;
  s.power_limit_w = 400;
  s.gpu_util_pct = 0;
  s.pcie_gen = 4;
  s.pcie_width = 16;
  s.ecc_sbe_volatile = 0;
  s.ecc_dbe_volatile = 0;
  s.remapped_rows_uncorrectable = 0;
  s.remapped_rows_pending = false;
  s.remapped_rows_failure = false;
  s.throttle_reasons = gpu::throttle::kGpuIdle;
  return s;
}

TEST(PcieTest, GenerationIsJudgedUnderLoadOnly) {
  gpu::GpuSample idle = Idle();
  idle.pcie_gen = 1;  // an idle card saving power
  Check quick = PcieLinkCheck(Card(), idle, std::nullopt, 1);
  EXPECT_EQ(quick.outcome, CheckOutcome::kPass);
  EXPECT_THAT(quick.message, HasSubstr("generation not checked at idle"));
  EXPECT_EQ(PcieLinkCheck(Card(), idle, 4, 2).outcome, CheckOutcome::kPass);
  Check slow = PcieLinkCheck(Card(), idle, 3, 2);
  EXPECT_EQ(slow.outcome, CheckOutcome::kWarn);
  EXPECT_EQ(slow.reason, "pcie_downtrained");
  EXPECT_THAT(slow.message, HasSubstr("gen 3 of gen 4"));
  idle.pcie_width = 8;
  Check narrow = PcieLinkCheck(Card(), idle, std::nullopt, 1);
  EXPECT_EQ(narrow.reason, "pcie_downtrained");
  EXPECT_THAT(narrow.message, HasSubstr("x8 of x16"));
  idle.pcie_width.reset();
  EXPECT_EQ(PcieLinkCheck(Card(), idle, std::nullopt, 1).outcome, CheckOutcome::kSkipped);
}

const Check& Named(const std::vector<Check>& checks, const std::string& name) {
  for (const Check& c : checks) {
    if (c.name == name) return c;
  }
  static const Check kNone;
  ADD_FAILURE() << "no check " << name;
  return kNone;
}

TEST(IdleChecksTest, AHealthyIdleCardPasses) {
  for (const Check& c : IdleChecks(Card(), Idle())) {
    EXPECT_EQ(c.outcome, CheckOutcome::kPass) << c.name << ": " << c.message;
    EXPECT_EQ(c.level, 1);
  }
}

TEST(IdleChecksTest, EachAnomalyHasItsReason) {
  struct Case {
    const char* check;
    void (*spoil)(gpu::GpuInfo&, gpu::GpuSample&);
    CheckOutcome outcome;
    const char* reason;
  };
  const Case kCases[] = {
      {"ecc", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.ecc_dbe_volatile = 2; }, CheckOutcome::kFail, "ecc_dbe"},
      {"ecc", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.ecc_sbe_volatile = 7; }, CheckOutcome::kWarn, "ecc_sbe"},
      {"ecc", [](gpu::GpuInfo& i, gpu::GpuSample&) { i.ecc_enabled = false; }, CheckOutcome::kWarn,
       "ecc_disabled"},
      {"ecc",
       [](gpu::GpuInfo& i, gpu::GpuSample& s) {
         i.ecc_enabled.reset();
         s.ecc_sbe_volatile.reset();
         s.ecc_dbe_volatile.reset();
       },
       CheckOutcome::kSkipped, "not_supported"},
      {"memory_repair", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.remapped_rows_pending = true; },
       CheckOutcome::kFail, "repair_pending"},
      {"memory_repair", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.remapped_rows_failure = true; },
       CheckOutcome::kFail, "remap_failure"},
      {"memory_repair", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.remapped_rows_uncorrectable = 3; },
       CheckOutcome::kWarn, "memory_repaired"},
      {"throttle_idle",
       [](gpu::GpuInfo&, gpu::GpuSample& s) { s.throttle_reasons = gpu::throttle::kHwSlowdown; },
       CheckOutcome::kWarn, "throttled_at_idle"},
      {"idle_temp", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.temp_c = 72; }, CheckOutcome::kWarn,
       "hot_at_idle"},
      {"idle_temp", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.temp_c = -40; }, CheckOutcome::kWarn,
       "implausible_reading"},
      {"idle_power", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.power_w = 250; }, CheckOutcome::kWarn,
       "high_idle_power"},
      {"idle_power", [](gpu::GpuInfo&, gpu::GpuSample& s) { s.gpu_util_pct = 80; }, CheckOutcome::kWarn,
       "gpu_busy"},
  };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.reason);
    gpu::GpuInfo info = Card();
    gpu::GpuSample sample = Idle();
    c.spoil(info, sample);
    const std::vector<Check> checks = IdleChecks(info, sample);
    const Check& check = Named(checks, c.check);
    EXPECT_EQ(check.outcome, c.outcome);
    EXPECT_EQ(check.reason, c.reason);
    EXPECT_FALSE(check.message.empty());
  }
}

}  // namespace
}  // namespace gpuherd::burnin
