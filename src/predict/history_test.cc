#include "predict/history.h"

#include <gtest/gtest.h>

#include "gpu/sim/card.h"
#include "gpu/catalog.h"
#include "gpu/sim/scenario.h"
#include "predict/warm_ups_for_test.h"

namespace gpuherd::predict {
namespace {

using gpu::sim::FaultKind;

HistoryOptions Small(uint64_t seed) {
  HistoryOptions o;
  o.seed = seed;
  o.gpus = 6;
  o.days = 4;
  o.faults_per_gpu_day = 0.5;
  o.false_alarms_per_gpu_day = 0.5;
  return o;
}

TEST(HistoryTest, SameSeedSameHistory) {
  auto a = GenerateHistory(Small(7));
  auto b = GenerateHistory(Small(7));
  auto c = GenerateHistory(Small(8));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  ASSERT_EQ(a->series.size(), b->series.size());
  for (size_t k = 0; k < a->series.size(); ++k) {
    const Series& x = a->series[k];
    const Series& y = b->series[k];
    EXPECT_EQ(x.uuid, y.uuid);
    EXPECT_EQ(x.fault_time, y.fault_time);
    ASSERT_EQ(x.minutes.size(), y.minutes.size());
    for (size_t i = 0; i < x.minutes.size(); i += 97) {
      const auto& tx = x.minutes[i].stat(store::RollupMetric::kTempC);
      const auto& ty = y.minutes[i].stat(store::RollupMetric::kTempC);
      ASSERT_EQ(tx.has_value(), ty.has_value());
      if (tx) {
        EXPECT_EQ(tx->mean, ty->mean);
      }
      EXPECT_EQ(x.minutes[i].ecc_sbe, y.minutes[i].ecc_sbe);
    }
  }
  bool differs = a->series.size() != c->series.size();
  for (size_t k = 0; !differs && k < a->series.size(); ++k) {
    differs = a->series[k].fault_time != c->series[k].fault_time ||
              a->series[k].minutes.size() != c->series[k].minutes.size();
  }
  EXPECT_TRUE(differs);
}

TEST(HistoryTest, SeriesEndAtTheirFaultAndSignsComeFirst) {
  auto h = GenerateHistory(Small(3));
  ASSERT_TRUE(h.ok());
  EXPECT_GT(h->faults, 0);
  EXPECT_GT(h->false_alarms, 0);
  int faults = 0, signed_faults = 0;
  for (const Series& s : h->series) {
    ASSERT_FALSE(s.minutes.empty());
    for (size_t i = 1; i < s.minutes.size(); ++i) {
      ASSERT_EQ(s.minutes[i].minute - s.minutes[i - 1].minute, kMinuteMs);
    }
    if (!s.fault_time) continue;
    ++faults;
    EXPECT_LT(s.minutes.back().minute, *s.fault_time);
    EXPECT_GE(s.minutes.back().minute + kMinuteMs, *s.fault_time);
    for (const Sign& sign : s.signs) {
      if (sign.fades) continue;
      ++signed_faults;
      EXPECT_EQ(sign.peak, *s.fault_time);
      EXPECT_GE(*s.fault_time - sign.start, 60 * kMinuteMs);
    }
    EXPECT_EQ(s.sudden, s.signs.empty() || s.signs.back().fades);
  }
  EXPECT_EQ(faults, h->faults);
  EXPECT_GT(signed_faults, 0);
}

TEST(HistoryTest, CardsWarmUpAfterHoursIdleAndJobsStartWithinAMinute) {
  auto h = GenerateHistory(Small(3));
  ASSERT_TRUE(h.ok());
  int healthy_warm_ups = 0, failing_warm_ups = 0, longest_idle_warm_ups = 0, mixed_minutes = 0;
  for (const Series& s : h->series) {
    const bool healthy = s.signs.empty() && !s.fault_time;
    const int n = static_cast<int>(WarmUps(s, 60).size());
    (healthy ? healthy_warm_ups : failing_warm_ups) += n;
    longest_idle_warm_ups += static_cast<int>(WarmUps(s, 121).size());
    for (const auto& r : s.minutes) {
      const auto& util = r.stat(store::RollupMetric::kGpuUtil);
      mixed_minutes += util && util->min < 5 && util->max > 50;
    }
  }
  // Hour-long idles end in a job on healthy cards and on failing ones alike,
  // some after more than two hours.
  EXPECT_GE(healthy_warm_ups, 3);
  EXPECT_GE(failing_warm_ups, 3);
  EXPECT_GE(longest_idle_warm_ups, 1);
  // Jobs start and stop between the readings of a minute.
  EXPECT_GE(mixed_minutes, 20);
}

TEST(HistoryTest, RejectsBadOptions) {
  HistoryOptions o = Small(1);
  o.gpus = 0;
  EXPECT_FALSE(GenerateHistory(o).ok());
  o = Small(1);
  o.models = {"no-such-card"};
  auto r = GenerateHistory(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no-such-card"), std::string::npos);
}

// The precursor kinds as scenario files write them.
TEST(PrecursorScenarioTest, ParsesAndChecks) {
  auto s = gpu::sim::ParseScenario(R"(
gpus: [{model: rtx3090, count: 1}, {model: h100-sxm, count: 1}]
faults:
  - {at: 1m, gpu: 0, kind: fan_wear, duration: 2h}
  - {at: 1m, gpu: 0, kind: fan_wear, duration: 30m, peak: 0.3, fades: true}
  - {at: 1m, gpu: 1, kind: sbe_accelerating, rate: 0.2/min, doubling: 10m}
  - {at: 1m, gpu: 1, kind: replay_accelerating, rate: 1/min, duration: 20m, fades: true}
  - {at: 1m, gpu: 1, kind: clock_unstable, amount: 0.2, duration: 1h}
)", "test.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->faults.size(), 5u);
  EXPECT_EQ(s->faults[0].kind, FaultKind::kFanWear);
  EXPECT_EQ(s->faults[0].peak, 1);
  EXPECT_TRUE(s->faults[1].fades);
  EXPECT_EQ(s->faults[1].peak, 0.3);
  EXPECT_EQ(s->faults[2].doubling, 10 * kMinuteMs);
  EXPECT_EQ(s->faults[4].amount, 0.2);
  EXPECT_STREQ(gpu::sim::FaultKindName(FaultKind::kClockUnstable), "clock_unstable");

  auto bad = gpu::sim::ParseScenario("faults: [{at: 1m, gpu: 0, kind: fan_wear}]", "b.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("b.yaml:1: a fan_wear fault needs duration"),
            std::string::npos)
      << bad.status().message();
  bad = gpu::sim::ParseScenario(
      "faults: [{at: 1m, gpu: 0, kind: sbe_accelerating, rate: 1, fades: true}]", "c.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fades: true needs duration"), std::string::npos);
}

// A wearing fan reads below its target and the card runs hotter under the
// same load; a fading wear returns to normal.
TEST(PrecursorScenarioTest, FanWearShowsInTheReadings) {
  auto run = [](double peak, bool fades, TimeMs at) {
    gpu::sim::Fault wear;
    wear.kind = FaultKind::kFanWear;
    wear.at = 10 * kMinuteMs;
    wear.duration = 60 * kMinuteMs;
    wear.peak = peak;
    wear.fades = fades;
    gpu::sim::CardSetup setup;
    setup.model = gpu::FindModel("rtx3090");
    setup.label = "GPU 0";
    if (peak > 0) setup.faults.push_back(wear);
    gpu::sim::Card card(setup);
    card.Start(0);
    card.SetLoad({0.8, 0, {}});
    gpu::GpuSample last;
    for (TimeMs t = 0; t <= at; t += 30 * kSecondMs) last = *card.Sample(t);
    return last;
  };
  const auto healthy = run(0, false, 70 * kMinuteMs);
  const auto worn = run(0.6, false, 70 * kMinuteMs);
  EXPECT_GT(*worn.temp_c, *healthy.temp_c + 5);
  // The fan turns slower than its target for that heat.
  EXPECT_LT(*worn.fan_pct / (*worn.temp_c - 25), 0.9 * *healthy.fan_pct / (*healthy.temp_c - 25));
  const auto recovered = run(0.6, true, 140 * kMinuteMs);
  const auto healthy_later = run(0, false, 140 * kMinuteMs);
  EXPECT_NEAR(*recovered.temp_c, *healthy_later.temp_c, 1.0);
}

}  // namespace
}  // namespace gpuherd::predict
