#include "alerts/engine.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::alerts {
namespace {

constexpr TimeMs kT0 = 1'767'225'600'000;
constexpr DurationMs kStep = 5 * kSecondMs;

Rule MakeRule(const std::string& name, const std::string& expr, DurationMs for_duration,
              Action action = Action::kNotify) {
  Rule rule;
  rule.name = name;
  auto c = ParseCondition(expr);
  EXPECT_TRUE(c.ok()) << expr;
  rule.condition = *c;
  rule.scope = *SeriesScope(rule.condition.series);
  rule.for_duration = for_duration;
  rule.action = action;
  return rule;
}

class EngineTest : public ::testing::Test {
 protected:
  EngineTest() {
    info_.index = 2;
    info_.uuid = "GPU-a";
    info_.temp_slowdown_c = 87;
    info_.memory_total_bytes = 1000;
  }

  // Appends a reading at `t` with temperature `temp` and evaluates.
  std::vector<AlertTransition> At(AlertEngine& engine, TimeMs t, double temp) {
    gpu::GpuSample s;
    s.time = t;
    s.temp_c = temp;
    gpu_.recent.push_back(s);
    gpu_.info = &info_;
    return engine.Evaluate(EvalInput{{gpu_}, {}}, t);
  }

  gpu::GpuInfo info_;
  GpuInput gpu_;
};

TEST_F(EngineTest, ForIsHonouredAndEachStateChangeReportedOnce) {
  AlertEngine engine({MakeRule("hot", "temp_c > 80", 30 * kSecondMs, Action::kDrain)});
  EXPECT_TRUE(At(engine, kT0, 70).empty());

  auto t = At(engine, kT0 + kStep, 85);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from, AlertState::kInactive);
  EXPECT_EQ(t[0].to, AlertState::kPending);
  EXPECT_EQ(t[0].alert.subject, "GPU-a");
  EXPECT_EQ(t[0].alert.gpu_index, 2);
  EXPECT_EQ(t[0].alert.pending_since, kT0 + kStep);

  for (int i = 2; i <= 6; ++i) EXPECT_TRUE(At(engine, kT0 + i * kStep, 85).empty()) << i;  // 25 s pending
  t = At(engine, kT0 + 7 * kStep, 86);                                                    // 30 s
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from, AlertState::kPending);
  EXPECT_EQ(t[0].to, AlertState::kFiring);
  EXPECT_EQ(t[0].alert.action, Action::kDrain);
  EXPECT_EQ(t[0].alert.fired_at, kT0 + 7 * kStep);
  EXPECT_EQ(t[0].alert.value, 86);
  ASSERT_EQ(engine.Active().size(), 1u);
  EXPECT_EQ(engine.Active()[0].state, AlertState::kFiring);

  EXPECT_TRUE(At(engine, kT0 + 8 * kStep, 90).empty());  // still firing: no second action
  t = At(engine, kT0 + 9 * kStep, 60);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].to, AlertState::kResolved);
  EXPECT_EQ(t[0].alert.resolved_at, kT0 + 9 * kStep);
  EXPECT_TRUE(engine.Active().empty());
}

TEST_F(EngineTest, PendingThatClearsNeverFires) {
  AlertEngine engine({MakeRule("hot", "temp_c > 80", kMinuteMs)});
  At(engine, kT0, 85);
  auto t = At(engine, kT0 + kStep, 70);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from, AlertState::kPending);
  EXPECT_EQ(t[0].to, AlertState::kInactive);
  // The clock starts again at the next onset.
  At(engine, kT0 + 2 * kStep, 85);
  EXPECT_TRUE(At(engine, kT0 + 2 * kStep + 50 * kSecondMs, 85).empty());
  EXPECT_EQ(At(engine, kT0 + 2 * kStep + kMinuteMs, 85).at(0).to, AlertState::kFiring);
}

TEST_F(EngineTest, ZeroForFiresAtOnce) {
  AlertEngine engine({MakeRule("hot", "temp_c > 80", 0)});
  auto t = At(engine, kT0, 81);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].from, AlertState::kInactive);
  EXPECT_EQ(t[0].to, AlertState::kFiring);
}

TEST_F(EngineTest, AbsentReadingOrLostGpuIsNotACondition) {
  AlertEngine engine({MakeRule("hot", "temp_c > 80", 0)});
  At(engine, kT0, 90);
  gpu_.lost = true;
  auto t = At(engine, kT0 + kStep, 90);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].to, AlertState::kResolved);

  gpu_.lost = false;
  gpu::GpuSample no_temp;
  no_temp.time = kT0 + 2 * kStep;
  gpu_.recent.push_back(no_temp);
  EXPECT_TRUE(engine.Evaluate(EvalInput{{gpu_}, {}}, kT0 + 2 * kStep).empty());
}

TEST_F(EngineTest, GpuLeavingTheInputResolvesItsAlerts) {
  AlertEngine engine({MakeRule("hot", "temp_c > 80", 0)});
  At(engine, kT0, 90);
  auto t = engine.Evaluate(EvalInput{}, kT0 + kStep);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].to, AlertState::kResolved);
  EXPECT_EQ(t[0].alert.gpu_index, 2);
}

TEST_F(EngineTest, WhileJobRequiresAJob) {
  Rule rule = MakeRule("idle", "temp_c > 0", 0);
  rule.while_job = true;
  AlertEngine engine({rule});
  EXPECT_TRUE(At(engine, kT0, 50).empty());
  gpu_.job_running = true;
  EXPECT_EQ(At(engine, kT0 + kStep, 50).at(0).to, AlertState::kFiring);
  gpu_.job_running = false;
  EXPECT_EQ(At(engine, kT0 + 2 * kStep, 50).at(0).to, AlertState::kResolved);
}

TEST_F(EngineTest, RestoredFiringAlertDoesNotFireAgain) {
  Rule rule = MakeRule("hot", "temp_c > 80", 0, Action::kDrain);
  AlertEngine first({rule});
  At(first, kT0, 90);
  std::vector<Alert> saved = first.Active();

  AlertEngine second({rule});
  second.Restore(saved);
  EXPECT_TRUE(At(second, kT0 + kStep, 90).empty());
  EXPECT_EQ(At(second, kT0 + 2 * kStep, 50).at(0).to, AlertState::kResolved);

  Alert unknown = saved[0];
  unknown.rule = "removed_rule";
  AlertEngine third({rule});
  third.Restore({unknown});
  EXPECT_TRUE(third.Active().empty());
}

TEST(ReduceTest, FunctionsOverAWindow) {
  gpu::GpuInfo info;
  info.uuid = "GPU-a";
  GpuInput gpu;
  gpu.info = &info;
  // One reading a minute: replays 0, 10, 30, then a reset to 5; temperature
  // rises 2 °C a minute.
  const uint64_t replays[] = {0, 10, 30, 5};
  for (int i = 0; i < 4; ++i) {
    gpu::GpuSample s;
    s.time = kT0 + i * kMinuteMs;
    s.pcie_replay_count = replays[i];
    s.temp_c = 50 + 2 * i;
    s.pcie_tx_kbps = 250;  // 1,000 packets a second of 256 bytes
    s.pcie_rx_kbps = 0;
    if (i == 2) s.xids.push_back({s.time, 13, ""});
    gpu.recent.push_back(s);
  }
  gpu.health = {{kT0 - kHourMs, 95}, {kT0, 80}, {kT0 + kMinuteMs, 85}};
  TimeMs now = kT0 + 3 * kMinuteMs;

  auto eval = [&](const char* expr) { return EvaluateGpu(*ParseCondition(expr), gpu, now); };
  EXPECT_EQ(eval("pcie_replays > 0"), 5);
  EXPECT_EQ(eval("increase(pcie_replays[10m]) > 0"), 35);   // 10 + 20 + 5 after the reset
  EXPECT_EQ(eval("increase(pcie_replays[1m]) > 0"), 5);     // only the last pair
  EXPECT_DOUBLE_EQ(*eval("rate(pcie_replays[10m]) > 0"), 35.0 / 3);
  EXPECT_DOUBLE_EQ(*eval("slope(temp_c[10m]) > 0"), 2.0);
  EXPECT_EQ(eval("sum(xids[10m]) > 0"), 1);
  EXPECT_EQ(eval("sum(xids[30s]) > 0"), 0);
  EXPECT_EQ(eval("drop(health_score[1d]) > 0"), 10);        // 95 -> 85
  EXPECT_EQ(eval("drop(health_score[3m]) > 0"), 0);          // 80 -> 85 is no drop
  EXPECT_EQ(eval("health_score < 90"), 85);
  // 35 replays over 3 minutes of 1,000 packets a second.
  EXPECT_DOUBLE_EQ(*eval("ratio(pcie_replays, pcie_packets[10m]) > 0"), 35.0 / 180'000);
  EXPECT_FALSE(eval("slope(temp_c[30s]) > 0"));             // one point is no slope
  EXPECT_FALSE(eval("power_w > 0"));                         // not reported
}

TEST(IbRuleTest, PacketLossFiresPerPort) {
  Rule rule = MakeRule("ib_loss", "increase(ib_packet_loss[5m]) > 0", 0);
  AlertEngine engine({rule});
  IbPortInput port{"mlx5_0", "1", {}};
  IbPortInput quiet{"mlx5_1", "1", {}};
  for (int i = 0; i < 3; ++i) {
    TimeMs t = kT0 + i * kStep;
    port.recent.push_back({t, {{"port_rcv_errors", i == 2 ? 4u : 0u}, {"port_xmit_discards", 0}}});
    quiet.recent.push_back({t, {{"port_rcv_errors", 7}}});
  }
  auto t = engine.Evaluate(EvalInput{{}, {port, quiet}}, kT0 + 2 * kStep);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].alert.subject, "mlx5_0/1");
  EXPECT_EQ(t[0].alert.gpu_index, -1);
  EXPECT_EQ(t[0].alert.value, 4);
}

TEST(AlertStateTest, NamesRoundTrip) {
  for (AlertState s : {AlertState::kInactive, AlertState::kPending, AlertState::kFiring, AlertState::kResolved}) {
    EXPECT_EQ(ParseAlertState(AlertStateName(s)), s);
  }
  EXPECT_FALSE(ParseAlertState("burning"));
}

}  // namespace
}  // namespace gpuherd::alerts
