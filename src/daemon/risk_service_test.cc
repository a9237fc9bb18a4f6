// The live risk on a simulated card whose fan wears out: scored minute by
// minute as the daemon does, the risk stays low while the card is healthy
// and crosses the model's threshold well before the fan fails.
#include "daemon/risk_service.h"

#include <gtest/gtest.h>

#include "gpu/sim/card.h"
#include "gpu/catalog.h"
#include "predict/evaluate.h"
#include "predict/history.h"
#include "telemetry/rollup.h"

namespace gpuherd::daemon {
namespace {

constexpr TimeMs kStart = 1767225600000;

std::unique_ptr<predict::RiskModel> SmallModel() {
  predict::HistoryOptions h;
  h.seed = 21;
  h.gpus = 16;
  h.days = 5;
  h.models = {"rtx3090", "h100-sxm"};
  h.faults_per_gpu_day = 0.6;
  h.false_alarms_per_gpu_day = 0.6;
  auto history = predict::GenerateHistory(h);
  EXPECT_TRUE(history.ok());
  predict::TrainParams p;
  p.rounds = 60;
  auto model = predict::RiskModel::Train(predict::BuildDataset(*history, {}, 60 * kMinuteMs, 5), p, {});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  model->mutable_info().threshold = 0.5;
  return std::make_unique<predict::RiskModel>(std::move(model).value());
}

TEST(RiskServiceTest, WearingFanIsFlaggedBeforeItFails) {
  const gpu::GpuModel* rtx = gpu::FindModel("rtx3090");
  DaemonState state;
  gpu::GpuInfo info;
  info.index = 0;
  info.uuid = "GPU-fan";
  info.temp_slowdown_c = rtx->temp_slowdown_c;
  state.fleet.gpus.push_back(info);
  RiskService service(&state, nullptr, SmallModel());
  ASSERT_TRUE(service.has_model());

  // Wear from minute 120 to 240, when the fan fails.
  gpu::sim::Fault wear;
  wear.kind = gpu::sim::FaultKind::kFanWear;
  wear.at = 120 * kMinuteMs;
  wear.duration = 120 * kMinuteMs;
  gpu::sim::CardSetup setup;
  setup.model = rtx;
  setup.label = "GPU 0";
  setup.faults.push_back(wear);
  gpu::sim::Card card(setup);
  card.Start(kStart);
  card.SetLoad({0.9, 0, {}});
  telemetry::Rollup rollup(info.uuid);
  std::optional<TimeMs> first_alarm;
  double highest_before_wear = 0;
  for (TimeMs t = kStart; t < kStart + 240 * kMinuteMs; t += 20 * kSecondMs) {
    auto closed = rollup.AddSample(*card.Sample(t));
    if (!closed) continue;
    service.OnRollups({*closed}, t);
    auto risk = state.failure_risk.find(info.uuid);
    if (risk == state.failure_risk.end()) continue;
    if (t < kStart + 120 * kMinuteMs) highest_before_wear = std::max(highest_before_wear, risk->second);
    if (!first_alarm && risk->second >= service.threshold()) first_alarm = t;
  }
  EXPECT_LT(highest_before_wear, service.threshold());
  ASSERT_TRUE(first_alarm) << "the risk never reached the threshold";
  EXPECT_GE(*first_alarm, kStart + 120 * kMinuteMs);
  EXPECT_LE(*first_alarm, kStart + 210 * kMinuteMs);  // 30 minutes or more ahead
}

// A daemon that has just started (no stored history) scores a GPU only once
// it has seen a whole window: a cut-short window raised false alarms.
TEST(RiskServiceTest, FirstScoredAfterAWholeWindow) {
  const gpu::GpuModel* rtx = gpu::FindModel("rtx3090");
  DaemonState state;
  gpu::GpuInfo info;
  info.uuid = "GPU-new";
  info.temp_slowdown_c = rtx->temp_slowdown_c;
  state.fleet.gpus.push_back(info);
  RiskService service(&state, nullptr, SmallModel());
  gpu::sim::CardSetup setup;
  setup.model = rtx;
  setup.label = "GPU 0";
  gpu::sim::Card card(setup);
  card.Start(kStart);
  card.SetLoad({1.0, 0, {}});
  telemetry::Rollup rollup(info.uuid);
  std::optional<TimeMs> first_scored;
  for (TimeMs t = kStart; t < kStart + 90 * kMinuteMs && !first_scored; t += 20 * kSecondMs) {
    auto closed = rollup.AddSample(*card.Sample(t));
    if (!closed) continue;
    service.OnRollups({*closed}, t);
    if (state.failure_risk.count(info.uuid)) first_scored = closed->minute;
  }
  ASSERT_TRUE(first_scored);
  EXPECT_EQ(*first_scored, kStart + 59 * kMinuteMs);
}

TEST(RiskServiceTest, NoModelNoRisk) {
  DaemonState state;
  gpu::GpuInfo info;
  info.uuid = "GPU-x";
  state.fleet.gpus.push_back(info);
  auto service = RiskService::Create(&state, nullptr, "/nonexistent/predict/risk-model.json");
  ASSERT_TRUE(service);
  EXPECT_FALSE(service->has_model());
  store::RollupRecord r;
  r.uuid = "GPU-x";
  r.samples = 1;
  for (int i = 0; i < 90; ++i) {
    r.minute = kStart + i * kMinuteMs;
    service->OnRollups({r}, r.minute + kMinuteMs);
  }
  EXPECT_TRUE(state.failure_risk.empty());
}

}  // namespace
}  // namespace gpuherd::daemon
