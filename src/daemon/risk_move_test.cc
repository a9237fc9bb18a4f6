// Failure prediction end to end, through the daemon's real wiring on a fake
// clock: a model trained on a small generated history is put in the state
// directory; on a simulated pair of RTX 3090s GPU 0's fan wears out and then
// stops (the card overheats). The risk alert must drain GPU 0 before the fan
// fails, and the job running there (a real process that follows the job
// protocol) must checkpoint, be requeued and resume from that checkpoint on
// GPU 1, where the card, idle until then, warms up without a false alarm.
// Sampling rounds take milliseconds, so two simulated hours pass in seconds;
// only the job's process runs in real time.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/daemon.h"
#include "daemon/risk_service.h"
#include "daemon/service_test_fixture.h"
#include "host/clock.h"
#include "predict/model.h"
#include "predict/train.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

// The scenario's fan wears from minute 60 (the job has run an hour: the
// model's window is full) for two hours, then fails.
constexpr DurationMs kWearBegins = 60 * kMinuteMs;
constexpr DurationMs kFanFails = 180 * kMinuteMs;

// The job: records each attempt (its GPUs, whether it resumes and the
// checkpoint it read) in $1, writes its checkpoint on SIGUSR1 and SIGTERM,
// exits after SIGTERM's checkpoint.
constexpr const char* kTrainer = R"(#!/bin/sh
log="$1"
ckpt="$GPUHERD_CHECKPOINT_DIR/state"
step=0
if [ "$GPUHERD_RESUME" = 1 ]; then
  step=$(cat "$ckpt") || exit 3
  echo "resumed gpus=$CUDA_VISIBLE_DEVICES restart=$GPUHERD_RESTART_COUNT from=$step" >> "$log"
else
  echo "started gpus=$CUDA_VISIBLE_DEVICES" >> "$log"
fi
save() { mkdir -p "$GPUHERD_CHECKPOINT_DIR" && echo "$step" > "$ckpt.tmp" && mv "$ckpt.tmp" "$ckpt"; }
trap 'save' USR1
trap 'save; echo "checkpointed at step $step" >> "$log"; exit 0' TERM
while :; do
  step=$((step + 1))
  sleep 0.05
done
)";

class RiskMoveTest : public SteppedDaemonTest {
 protected:
  std::string ReadFile(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // A small model (about two seconds to train) with its threshold chosen on
  // a validation history, as `gpuherd predict train` does, saved where the
  // daemon looks for it.
  void TrainModel() {
    predict::TrainOptions options;
    options.generated.seed = 21;
    options.generated.gpus = 32;
    options.generated.days = 5;
    options.generated.models = {"rtx3090"};
    options.params.rounds = 100;
    predict::TrainReport report;
    auto model = predict::TrainModel(options, &report);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    fs::create_directories(home_ / "predict");
    Status saved = model->Save((home_ / "predict" / "risk-model.json").string());
    ASSERT_TRUE(saved.ok()) << saved.ToString();
  }

  void StartDaemon(const std::string& scenario) { SteppedDaemonTest::StartDaemon(ScenarioOptions(scenario)); }

  // Steps (one round at a time: a requeued job starts at a round) until
  // `done` holds for job `id`, waiting in real time for its process; at
  // most `max_steps` rounds.
  json StepUntilJob(int64_t id, const std::function<bool(const json&)>& done, int max_steps) {
    json job;
    for (int i = 0; i <= max_steps; ++i) {
      for (int tries = 0; tries < 50; ++tries) {
        job = Job(id);
        if (done(job)) return job;
        ::usleep(10'000);
      }
      if (i < max_steps) Step();
    }
    ADD_FAILURE() << "job " << id << " did not get there: " << job.dump();
    return job;
  }
};

TEST_F(RiskMoveTest, WearingFanIsDrainedAndItsJobResumesElsewhereBeforeTheFault) {
  TrainModel();
  if (HasFatalFailure()) return;
  StartDaemon(R"(
description: two RTX 3090s; GPU 0's fan wears out over two hours and then stops
seed: 5
gpus:
  - {model: rtx3090, count: 2}
faults:
  - {at: 60m, gpu: 0, kind: fan_wear, duration: 2h}
  - {at: 180m, gpu: 0, kind: fan_failure}
)");
  if (HasFatalFailure()) return;
  json gpus = Get("/v1/gpus")["gpus"];
  ASSERT_EQ(gpus.size(), 2u);
  const std::string uuid0 = gpus[0]["uuid"], uuid1 = gpus[1]["uuid"];

  const std::string log = (root_ / "trainer.log").string();
  const std::string trainer = WriteFile("trainer.sh", kTrainer);
  json spec = {{"command", {"sh", trainer, log}},
               {"gpus", 1},
               {"name", "trainer"},
               {"max_restarts", 2},
               {"checkpoint", {{"grace", "10s"}}}};
  auto submitted = Call("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const int64_t id = json::parse(submitted.body)["id"];
  json job = StepUntilJob(id, [](const json& j) { return j.value("state", "") == "running"; }, 3);
  ASSERT_EQ(job["assigned_gpus"], json::array({0})) << job.dump();

  // Minute by minute until the risk alert fires (or the fan fails).
  std::optional<TimeMs> fired_at;
  while (!fired_at && clock_->Now() < kT0 + kFanFails) {
    for (int i = 0; i < static_cast<int>(kMinuteMs / kStep); ++i) Step();
    for (const json& e : Events("alert.firing")) {
      const json& data = e["data"];
      if (data.value("rule", "") == kRiskRule) {
        EXPECT_EQ(data["subject"], uuid0) << "the risk alert fired on the healthy GPU";
        fired_at = e["time"].get<TimeMs>();
      }
    }
  }
  ASSERT_TRUE(fired_at) << "no gpu_failure_risk alert before the fan failed";
  EXPECT_LT(*fired_at, kT0 + kFanFails);
  EXPECT_GE(*fired_at, kT0 + kWearBegins) << "the alert fired before the fan began to wear";
  std::printf("risk alert at minute %.1f, %.1f minutes before the fan fails\n",
              static_cast<double>(*fired_at - kT0) / kMinuteMs,
              static_cast<double>(kT0 + kFanFails - *fired_at) / kMinuteMs);

  // GPU 0 is drained by the risk alert, at the alert's round.
  json drained = Events("gpu.drained");
  ASSERT_EQ(drained.size(), 1u) << drained.dump();
  EXPECT_EQ(drained[0]["gpu_uuid"], uuid0);
  EXPECT_EQ(drained[0]["time"], *fired_at);
  EXPECT_THAT(drained[0]["message"].get<std::string>(), HasSubstr(kRiskRule));
  gpus = Get("/v1/gpus")["gpus"];
  EXPECT_EQ(gpus[0].value("drained", false), true);
  EXPECT_THAT(gpus[0].value("drain_reason", ""), HasSubstr(kRiskRule));
  EXPECT_FALSE(gpus[1].contains("drained"));

  // The job is told to stop, checkpoints, is requeued and starts again on
  // GPU 1, all before the fan fails.
  job = StepUntilJob(
      id,
      [](const json& j) { return j.value("state", "") == "running" && j.value("restarts", 0) == 1; }, 12);
  const TimeMs resumed_at = clock_->Now();
  EXPECT_LT(resumed_at, kT0 + kFanFails);
  EXPECT_EQ(job["assigned_gpus"], json::array({1})) << job.dump();
  json requeued = Events("job.requeued");
  ASSERT_EQ(requeued.size(), 1u) << requeued.dump();
  EXPECT_GE(requeued[0]["time"].get<TimeMs>(), *fired_at);
  EXPECT_LT(requeued[0]["time"].get<TimeMs>(), kT0 + kFanFails);

  // The checkpoint was written (before the requeue, hence before the fault)
  // and the second attempt read it.
  const fs::path checkpoint = home_ / "checkpoints" / std::to_string(id) / "state";
  std::string step_saved;
  for (int i = 0; i < 200; ++i) {
    std::string text = ReadFile(log);
    if (text.find("resumed") != std::string::npos) break;
    ::usleep(10'000);
  }
  std::string text = ReadFile(log);
  std::istringstream lines(text);
  std::vector<std::string> attempts;
  for (std::string line; std::getline(lines, line);) attempts.push_back(line);
  ASSERT_EQ(attempts.size(), 3u) << text;
  EXPECT_EQ(attempts[0], "started gpus=" + uuid0);
  ASSERT_THAT(attempts[1], HasSubstr("checkpointed at step "));
  step_saved = attempts[1].substr(std::string("checkpointed at step ").size());
  EXPECT_NE(step_saved, "0");
  EXPECT_EQ(attempts[2], "resumed gpus=" + uuid1 + " restart=1 from=" + step_saved);
  ASSERT_TRUE(fs::exists(checkpoint)) << checkpoint;

  // GPU 1 sat idle for the first hour and a half; warming up under the moved
  // job it stays healthy in the model's eyes: its risk stays under the
  // threshold for half an hour (the card reaches its loaded temperature), so
  // the job is not moved again and GPU 1 is not drained.
  auto model = predict::RiskModel::Load((home_ / "predict" / "risk-model.json").string());
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const double threshold = model->info().threshold;
  double highest = 0;
  int scored = 0;
  for (int minute = 0; minute < 30; ++minute) {
    for (int i = 0; i < static_cast<int>(kMinuteMs / kStep); ++i) Step();
    gpus = Get("/v1/gpus")["gpus"];
    ASSERT_EQ(gpus.size(), 2u);
    if (!gpus[1].contains("failure_risk")) continue;
    const double risk = gpus[1]["failure_risk"].get<double>();
    highest = std::max(highest, risk);
    ++scored;
    EXPECT_LT(risk, threshold) << "GPU 1 warming up after its idle hours, minute "
                               << static_cast<double>(clock_->Now() - kT0) / kMinuteMs;
  }
  EXPECT_EQ(scored, 30) << "GPU 1 was not scored every minute";
  std::printf("GPU 1 warming up: highest risk %.4f (threshold %.3f)\n", highest, threshold);
  EXPECT_GT(gpus[1]["sample"].value("temp_c", 0.0), 60.0) << "GPU 1 did not warm up: " << gpus[1].dump();
  EXPECT_FALSE(gpus[1].contains("drained")) << gpus[1].dump();
  ASSERT_EQ(Events("gpu.drained").size(), 1u);
  ASSERT_EQ(Events("job.requeued").size(), 1u);
  job = Get("/v1/jobs/" + std::to_string(id));
  EXPECT_EQ(job.value("state", ""), "running") << job.dump();
  EXPECT_EQ(job["assigned_gpus"], json::array({1})) << job.dump();
  EXPECT_LT(clock_->Now(), kT0 + kFanFails);

  // The risk alert is listed as firing while it holds.
  json active = Get("/v1/alerts")["alerts"];
  bool listed = false;
  for (const json& a : active) listed |= a.value("rule", "") == kRiskRule && a.value("subject", "") == uuid0;
  EXPECT_TRUE(listed) << active.dump();
  EXPECT_THAT(Call("GET", "/metrics").body,
              HasSubstr("gpuherd_alerts_firing{rule=\"gpu_failure_risk\",severity=\"critical\"} 1"));

  auto cancelled = Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel");
  EXPECT_EQ(cancelled.status, 200) << cancelled.body;
  StepUntilJob(id, [](const json& j) { return j.value("state", "") == "cancelled"; }, 5);
}

}  // namespace
}  // namespace gpuherd::daemon
