#include "burnin/requalify_checks.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "gpu/sim/sim_driver.h"

namespace gpuherd::burnin {
namespace {

constexpr TimeMs kT0 = 1'700'000'000'000;

std::unique_ptr<gpu::sim::SimDriver> Fleet(const std::string& scenario) {
  gpu::sim::SimOptions options;
  options.scenario_text = scenario;
  auto d = gpu::sim::OpenSimDriver(options);
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  return d.ok() ? std::move(d).value() : nullptr;
}

// Drives the square wave on one simulated GPU, reading it every 25 ms.
TransientObservation RunWave(gpu::sim::SimDriver& d, int index, const TransientOptions& options) {
  TransientObservation o;
  const auto phases = SquareWave(options);
  size_t next = 0;
  for (TimeMs t = 0; t <= options.duration; t += 25) {
    while (next < phases.size() && phases[next].start <= t) {
      gpu::sim::Load load;
      load.util = phases[next].full ? 1.0 : 0.0;
      d.SetLoad(index, load);
      ++next;
    }
    auto s = d.Sample(index, kT0 + t);
    if (!s.ok()) {
      ++o.failed_readings;
      continue;
    }
    ++o.readings;
    for (const gpu::XidEvent& x : s->xids) o.xids.push_back(x.xid);
    if (s->power_w) {
      o.min_power_w = std::min(o.min_power_w.value_or(*s->power_w), *s->power_w);
      o.max_power_w = std::max(o.max_power_w.value_or(*s->power_w), *s->power_w);
    }
  }
  return o;
}

TEST(SquareWaveTest, AlternatesFullAndIdleAtTheFrequency) {
  auto phases = SquareWave({4, 2000});
  ASSERT_EQ(phases.size(), 16u);  // 8 cycles of two halves of 125 ms
  EXPECT_TRUE(phases[0].full);
  EXPECT_FALSE(phases[1].full);
  EXPECT_EQ(phases[1].start, 125);
  EXPECT_EQ(phases.back().start, 1875);
  EXPECT_TRUE(SquareWave({0, 2000}).empty());
}

TEST(PowerTransientsTest, AWeakPowerStageDropsOffAndFails) {
  auto d = Fleet(R"(gpus: [{model: rtx3090, count: 2}]
faults: [{at: 0s, gpu: 1, kind: transient_drop}]
)");
  ASSERT_TRUE(d);
  TransientOptions options{4, 5 * kSecondMs};
  Check healthy = JudgeTransients(RunWave(*d, 0, options), options);
  EXPECT_EQ(healthy.outcome, CheckOutcome::kPass) << healthy.message;
  EXPECT_GT(healthy.values["max_power_w"], 2 * healthy.values["min_power_w"]);

  TransientObservation weak = RunWave(*d, 1, options);
  EXPECT_GT(weak.failed_readings, 0);
  Check dropped = JudgeTransients(weak, options);
  EXPECT_EQ(dropped.outcome, CheckOutcome::kFail);
  EXPECT_EQ(dropped.reason, "xid_under_transients");
  EXPECT_EQ(dropped.values["xid"], 79);
}

TEST(PowerTransientsTest, SteadyLoadDoesNotTripTheWeakCard) {
  // gpu-burn's steady load: one swing up, one down. The card passes it.
  auto d = Fleet(R"(gpus: [{model: rtx3090}]
faults: [{at: 0s, gpu: 0, kind: transient_drop}]
)");
  ASSERT_TRUE(d);
  TransientOptions steady{0.1, 5 * kSecondMs};  // one half-period: full load throughout
  TransientObservation o = RunWave(*d, 0, steady);
  EXPECT_EQ(o.failed_readings, 0);
}

TEST(PowerTransientsTest, JudgementWithoutSwingOrWithLostReadings) {
  TransientOptions options;
  TransientObservation flat;
  flat.readings = 100;
  flat.min_power_w = 290;
  flat.max_power_w = 300;
  EXPECT_EQ(JudgeTransients(flat, options).reason, "no_power_swing");
  TransientObservation lost;
  lost.readings = 10;
  lost.failed_readings = 3;
  EXPECT_EQ(JudgeTransients(lost, options).reason, "lost_under_transients");
  TransientObservation app;
  app.xids = {13};  // an application's XID is not the power stage's
  app.min_power_w = 80;
  app.max_power_w = 300;
  EXPECT_EQ(JudgeTransients(app, options).outcome, CheckOutcome::kPass);
}

TEST(PeerChecksTest, ACardClockingFifteenPercentUnderItsPeersIsFlagged) {
  auto d = Fleet(R"(gpus: [{model: rtx3090, count: 4}]
faults: [{at: 0s, gpu: 2, kind: underclock, factor: 0.85}]
)");
  ASSERT_TRUE(d);
  std::vector<PeerReading> readings;
  for (int i = 0; i < 4; ++i) {
    gpu::sim::Load load;
    load.util = 0.6;  // below the power cap, where the clocks are the cards' own
    d->SetLoad(i, load);
  }
  // Readings of the same load, a few seconds in (before heat changes clocks).
  for (int i = 0; i < 4; ++i) {
    std::vector<double> clocks, powers;
    for (TimeMs t = 0; t <= 3000; t += 500) {
      auto s = d->Sample(i, kT0 + t);
      ASSERT_TRUE(s.ok());
      if (t < 1000) continue;
      clocks.push_back(*s->sm_clock_mhz);
      powers.push_back(*s->power_w);
    }
    std::sort(clocks.begin(), clocks.end());
    std::sort(powers.begin(), powers.end());
    readings.push_back({i, "rtx3090", clocks[clocks.size() / 2], powers[powers.size() / 2]});
  }
  auto checks = PeerChecks(readings);
  ASSERT_EQ(checks.size(), 8u);
  for (const auto& [gpu, c] : checks) {
    SCOPED_TRACE(std::to_string(gpu) + " " + c.name + ": " + c.message);
    if (gpu == 2) {
      EXPECT_EQ(c.outcome, CheckOutcome::kWarn);
      EXPECT_NEAR(c.values.at("ratio"), 0.85, 0.04);
    } else {
      EXPECT_EQ(c.outcome, CheckOutcome::kPass);
    }
  }
}

TEST(PeerChecksTest, TooFewPeersIsSkippedNotJudged) {
  auto checks = PeerChecks({{0, "a", 1800, 300}, {1, "a", 1500, 250}, {2, "b", 1000, 100}});
  for (const auto& [gpu, c] : checks) {
    EXPECT_EQ(c.outcome, CheckOutcome::kSkipped);
    EXPECT_EQ(c.reason, "too_few_peers");
  }
}

}  // namespace
}  // namespace gpuherd::burnin
