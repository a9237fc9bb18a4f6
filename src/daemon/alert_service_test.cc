// Alerts and /metrics through the daemon's real wiring: a simulated fleet
// with scripted faults, jobs run by the executor, on a fake clock stepped one
// 5 s sampling round at a time, so that minutes of `for:` pass in seconds.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "burnin/result.h"
#include "daemon/alert_service.h"
#include "http/client.h"
#include "http/token.h"
#include "daemon/daemon.h"
#include "daemon/service_test_fixture.h"
#include "host/clock.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

class MonitoringTest : public SteppedDaemonTest {
 protected:
  void TearDown() override {
    CancelUnfinished();
    SteppedDaemonTest::TearDown();
  }

  // (rule, GPU index or -1) → the times (since kT0) of its alert.firing or
  // alert.resolved events.
  std::map<std::pair<std::string, int>, std::vector<DurationMs>> Transitions(const std::string& kind) {
    std::map<std::pair<std::string, int>, std::vector<DurationMs>> out;
    json gpus = Get("/v1/gpus")["gpus"];
    for (const json& e : Events(kind)) {
      json data = json::parse(e["data"].is_string() ? e["data"].get<std::string>() : e["data"].dump());
      int gpu = -1;
      for (const json& g : gpus) {
        if (g["uuid"] == data["subject"]) gpu = g["index"];
      }
      out[{data["rule"].get<std::string>(), gpu}].push_back(e["time"].get<TimeMs>() - kT0);
    }
    return out;
  }

  json SubmitJob(const json& spec) {
    auto r = Call("POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body, nullptr, false);
  }
  // Steps rounds until job `id` is in `state` (jobs start and stop on real
  // threads, so their progress is not tied to the fake clock).
  json WaitForJob(int64_t id, const std::string& state) {
    for (int i = 0; i < 200; ++i) {
      json job = Job(id);
      if (job.value("state", "") == state) return job;
      ::usleep(20'000);
    }
    ADD_FAILURE() << "job " << id << " did not reach " << state;
    return json::object();
  }

  std::string Metrics() { return Call("GET", "/metrics").body; }
};

// The sampled time of the first round at or after `t`.
DurationMs FirstSampleAtOrAfter(DurationMs t) { return (t + kStep - 1) / kStep * kStep; }

TEST_F(MonitoringTest, DefaultRulesFireAndResolveOnScriptedFaults) {
  const std::string ib_counter = "sysroot/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_errors";
  WriteFile(ib_counter, "0\n");
  WriteFile("sysroot/sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_discards", "0\n");
  DaemonOptions options = ScenarioOptions(R"(
description: one fault per default rule
seed: 3
gpus:
  - {model: h100-sxm, count: 4}
  - {model: a100-40gb}
faults:
  - {at: 1m, gpu: 0, kind: overheat, duration: 3m}
  - {at: 1m, gpu: 1, kind: temp_slope, rate: 1.2/min, duration: 25m}
  - {at: 1m, gpu: 2, kind: xid, xid: 13}
  - {at: 1m, gpu: 3, kind: pcie_replay, count: 100000000}
  - {at: 1m, gpu: 4, kind: ecc_dbe}
)");
  // The rules alone: GPU 4's requalification burn-ins (after 10 idle
  // minutes of the fake clock) run on real threads and would heat it by a
  // number of fake-clock rounds that depends on the machine's load.
  options.self_heal.states.requalify_after = 0;
  StartDaemon(options);
  const DurationMs onset = FirstSampleAtOrAfter(kMinuteMs);
  const DurationMs ib_onset = 2 * kMinuteMs;
  RunUntil(ib_onset - kStep);
  WriteFile(ib_counter, "3\n");
  RunUntil(36 * kMinuteMs);

  auto fired = Transitions("alert.firing");
  auto resolved = Transitions("alert.resolved");
  std::set<std::pair<std::string, int>> fired_rules;
  for (const auto& [key, times] : fired) fired_rules.insert(key);
  // The DBE also reports XID 48, which the XID rule sees too, and which
  // the catalogue calls fatal (gpu_xid_fatal, critical).
  std::set<std::pair<std::string, int>> expected = {
      {"gpu_temp_over_limit", 0}, {"gpu_temp_rising", 1}, {"gpu_xid", 2},         {"gpu_pcie_replay_rate", 3},
      {"gpu_ecc_dbe", 4},         {"gpu_xid", 4},         {"gpu_xid_fatal", 4},   {"ib_packet_loss", -1},
  };
  EXPECT_EQ(fired_rules, expected);
  for (const auto& [key, times] : fired) EXPECT_EQ(times.size(), 1u) << key.first << " on GPU " << key.second;

  auto expect_near = [](const std::vector<DurationMs>& times, DurationMs want, const std::string& what) {
    ASSERT_EQ(times.size(), 1u) << what;
    EXPECT_GE(times[0], want) << what;
    EXPECT_LE(times[0], want + kStep) << what;  // within one sample
  };
  // Temperature over the limit holds 15 s; the fault ends at 4 min.
  expect_near(fired[{"gpu_temp_over_limit", 0}], onset + 15 * kSecondMs, "gpu_temp_over_limit fires");
  expect_near(resolved[{"gpu_temp_over_limit", 0}], 4 * kMinuteMs, "gpu_temp_over_limit resolves");
  // An XID counts for 5 minutes.
  expect_near(fired[{"gpu_xid", 2}], onset, "gpu_xid fires");
  expect_near(resolved[{"gpu_xid", 2}], onset + 5 * kMinuteMs, "gpu_xid resolves");
  // The replay burst is over 0.1% of the traffic from its sample on, for 1 min;
  // it leaves the 5-minute window with the last reading before it.
  expect_near(fired[{"gpu_pcie_replay_rate", 3}], onset + kMinuteMs, "gpu_pcie_replay_rate fires");
  expect_near(resolved[{"gpu_pcie_replay_rate", 3}], onset + 5 * kMinuteMs - kStep, "gpu_pcie_replay_rate resolves");
  // A DBE fires at once and stays until the GPU is reset.
  expect_near(fired[{"gpu_ecc_dbe", 4}], onset, "gpu_ecc_dbe fires");
  EXPECT_EQ(resolved.count({"gpu_ecc_dbe", 4}), 0u);
  // Port errors grew at 2 min: an increase over 5 minutes.
  expect_near(fired[{"ib_packet_loss", -1}], ib_onset, "ib_packet_loss fires");
  expect_near(resolved[{"ib_packet_loss", -1}], ib_onset + 5 * kMinuteMs, "ib_packet_loss resolves");

  // The slope rule: pending from when the 10-minute slope first exceeds
  // 0.5 °C/min, firing 15 minutes later, resolved once the ramp (ended at
  // 26 min) has left enough of the window.
  json all = Get("/v1/alerts?all=1")["alerts"];
  const json* rising = nullptr;
  for (const json& a : all) {
    if (a["rule"] == "gpu_temp_rising") rising = &a;
  }
  ASSERT_NE(rising, nullptr) << all.dump();
  DurationMs pending = (*rising)["pending_since"].get<TimeMs>() - kT0;
  EXPECT_GT(pending, onset);
  EXPECT_LT(pending, onset + 10 * kMinuteMs);
  expect_near(fired[{"gpu_temp_rising", 1}], pending + 15 * kMinuteMs, "gpu_temp_rising fires");
  ASSERT_EQ((resolved[{"gpu_temp_rising", 1}].size()), 1u);
  EXPECT_GT((resolved[{"gpu_temp_rising", 1}][0]), 26 * kMinuteMs);
  EXPECT_EQ((*rising)["state"], "resolved");

  // Still firing: the DBE (and its XID on GPU 4 resolved after 5 minutes).
  json active = Get("/v1/alerts")["alerts"];
  ASSERT_EQ(active.size(), 1u) << active.dump();
  EXPECT_EQ(active[0]["rule"], "gpu_ecc_dbe");
  EXPECT_EQ(active[0]["gpu"], 4);
  EXPECT_EQ(active[0]["state"], "firing");
  EXPECT_EQ(active[0]["action"], "checkpoint_and_move");

  std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("gpuherd_alerts_firing{rule=\"gpu_ecc_dbe\",severity=\"critical\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("gpuherd_alerts_firing{rule=\"gpu_xid\",severity=\"warning\"} 0\n"));
  EXPECT_THAT(metrics, HasSubstr("counter=\"port_rcv_errors\"} 3\n"));
  // XID 13 on GPU 2 is its last XID, counted once.
  bool xid_line = false;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("gpuherd_gpu_xid_errors_total{", 0) == 0 && line.find("gpu=\"2\"") != std::string::npos) {
      EXPECT_EQ(line.substr(line.rfind(' ') + 1), "1") << line;
      xid_line = true;
    }
    if (line.rfind("DCGM_FI_DEV_XID_ERRORS{", 0) == 0 && line.find("gpu=\"2\"") != std::string::npos) {
      EXPECT_EQ(line.substr(line.rfind(' ') + 1), "13") << line;
    }
  }
  EXPECT_TRUE(xid_line) << metrics.substr(0, 2000);
}

TEST_F(MonitoringTest, JobRulesFollowTheJobsThatHoldTheGpus) {
  StartDaemon(ScenarioOptions(R"(
description: two idle H100s for jobs
seed: 5
gpus:
  - {model: h100-sxm, count: 2}
)"));
  // A fifth of a GPU keeps it at 20% (idle waste); a whole one at 100% with
  // 78,000 MB of its 80 GB reported by the job (memory nearly full).
  int64_t small =
      SubmitJob({{"command", {"sleep", "3600"}}, {"gpus", 0.2}, {"gpu_mem", "8GiB"}, {"name", "small"}})["id"];
  int64_t big = SubmitJob({{"command", {"sh", "-c", "echo 78000 > \"$GPUHERD_SIM_GPU_MEM_FILE\"; exec sleep 3600"}},
                           {"gpus", 1},
                           {"name", "big"}})["id"];
  json small_job = WaitForJob(small, "running");
  json big_job = WaitForJob(big, "running");
  ASSERT_EQ(small_job["assigned_gpus"].size(), 1u);
  ASSERT_EQ(big_job["assigned_gpus"].size(), 1u);
  int small_gpu = small_job["assigned_gpus"][0], big_gpu = big_job["assigned_gpus"][0];
  ASSERT_NE(small_gpu, big_gpu);
  // The memory file is written by the job's shell. A round applies the
  // jobs' load to the simulated GPUs, and the round after reads it.
  for (int i = 0; i < 100 && !fs::exists(home_ / "jobs" / std::to_string(big) / "sim_gpu_mem_mb"); ++i) {
    ::usleep(20'000);
  }
  TimeMs idle_since = 0, memory_since = 0;
  // gpu_idle_while_job settles for 10 minutes after a job starts before it
  // may go pending (a job's first minutes load data), so this runs that long.
  for (int i = 0; i < 400 && (idle_since == 0 || memory_since == 0); ++i) {
    Step();
    json listed = Get("/v1/alerts");
    for (const json& a : listed["alerts"]) {
      // Until the load reaches the simulated cards, the big job's GPU reads
      // idle too; and the cards warm up under it. Neither may fire: only two
      // alerts do, checked below.
      if (a["rule"] == "gpu_idle_while_job" && a["gpu"] == small_gpu) idle_since = a["pending_since"];
      if (a["rule"] == "gpu_memory_high" && a["gpu"] == big_gpu) memory_since = a["pending_since"];
    }
  }
  ASSERT_GT(idle_since, 0);
  ASSERT_GT(memory_since, 0);

  // Twenty minutes: long enough for the H100s' warm-up under the jobs to
  // have fired gpu_temp_rising, were it mistaken for failing cooling.
  RunUntil(idle_since - kT0 + 20 * kMinuteMs);
  auto fired = Transitions("alert.firing");
  ASSERT_EQ(fired.size(), 2u) << Get("/v1/alerts?all=1").dump();
  EXPECT_EQ((fired[{"gpu_memory_high", big_gpu}]), (std::vector<DurationMs>{memory_since - kT0 + 5 * kMinuteMs}));
  EXPECT_EQ((fired[{"gpu_idle_while_job", small_gpu}]), (std::vector<DurationMs>{idle_since - kT0 + 10 * kMinuteMs}));

  std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("gpuherd_alerts_firing{rule=\"gpu_idle_while_job\",severity=\"warning\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("gpuherd_jobs{state=\"running\"} 2\n"));
  EXPECT_THAT(metrics, HasSubstr("gpuherd_user_gpu_seconds_total{user=\""));

  // Cancelling the jobs: the idle alert resolves at the next round (no job
  // holds the GPU); the memory alert one round later, when the simulated
  // card's reading shows the memory freed.
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(small) + "/cancel").status, 200);
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(big) + "/cancel").status, 200);
  WaitForJob(small, "cancelled");
  WaitForJob(big, "cancelled");
  DurationMs cancelled_at = clock_->Now() - kT0;
  Step();
  Step();
  auto resolved = Transitions("alert.resolved");
  EXPECT_EQ((resolved[{"gpu_idle_while_job", small_gpu}]), (std::vector<DurationMs>{cancelled_at + kStep}));
  EXPECT_EQ((resolved[{"gpu_memory_high", big_gpu}]), (std::vector<DurationMs>{cancelled_at + 2 * kStep}));
  json still = Get("/v1/alerts");
  EXPECT_TRUE(still["alerts"].empty()) << still.dump();
  json all = Get("/v1/alerts?all=1");
  EXPECT_EQ(all["alerts"].size(), 2u) << all.dump();
}

TEST_F(MonitoringTest, ActionsRunOnceAndNotAgainAfterARestart) {
  std::string rules = WriteFile("rules.yaml", R"(
rules:
  - name: sbe_move
    expr: ecc_sbe > 0
    severity: critical
    action: checkpoint_and_move
    summary: corrected ECC errors; move the work away
  - name: replay_drain
    expr: increase(pcie_replays[1m]) > 0
    action: drain
    summary: PCIe replays
)");
  std::string hook_out = (root_ / "hook.jsonl").string();
  DaemonOptions options = ScenarioOptions(R"(
description: two A100s, one with corrected ECC errors, one with PCIe replays
seed: 9
gpus:
  - {model: a100-40gb, count: 2}
faults:
  - {at: 1m, gpu: 0, kind: ecc_sbe, count: 1}
  - {at: 1m, gpu: 1, kind: pcie_replay, count: 5}
  - {at: 4m, gpu: 1, kind: pcie_replay, count: 5}
)");
  options.alert_rules_path = rules;
  options.alert_command = "cat >> " + hook_out + " && echo >> " + hook_out;
  StartDaemon(options);

  json spec = {{"command", {"sleep", "3600"}}, {"gpus", 1}, {"max_restarts", 3}, {"checkpoint", {{"grace", "2s"}}}};
  int64_t first = SubmitJob(spec)["id"];
  int64_t second = SubmitJob(spec)["id"];
  json a = WaitForJob(first, "running");
  WaitForJob(second, "running");
  int64_t on_gpu0 = a["assigned_gpus"][0] == 0 ? first : second;
  int64_t on_gpu1 = on_gpu0 == first ? second : first;

  RunUntil(FirstSampleAtOrAfter(kMinuteMs));
  // The move: the job on GPU 0 is told to stop, then requeued to wait (GPU 0
  // is drained, GPU 1 busy).
  WaitForJob(on_gpu0, "pending");
  RunUntil(7 * kMinuteMs);  // the second replay burst fires replay_drain again

  auto fired = Transitions("alert.firing");
  EXPECT_EQ((fired[{"sbe_move", 0}].size()), 1u);
  EXPECT_EQ((fired[{"replay_drain", 1}].size()), 2u);
  auto count_events = [&](const std::string& kind, const std::string& gpu_uuid) {
    int n = 0;
    for (const json& e : Events(kind)) n += e.value("gpu_uuid", "") == gpu_uuid;
    return n;
  };
  json gpus = Get("/v1/gpus")["gpus"];
  std::string uuid0 = gpus[0]["uuid"], uuid1 = gpus[1]["uuid"];
  EXPECT_EQ(Events("job.requeued").size(), 1u);
  EXPECT_EQ(count_events("gpu.drained", uuid0), 1);
  // Drained once; the second firing finds it drained and keeps the reason.
  EXPECT_EQ(count_events("gpu.drained", uuid1), 1);
  json moved = Get("/v1/jobs/" + std::to_string(on_gpu0));
  EXPECT_EQ(moved["state"], "pending");
  // Moved off a faulty GPU: counted against --max-restarts at once; a
  // restart itself only once it runs again (job_service.h RestartCount).
  EXPECT_EQ(moved["fault_restarts"], 1);
  EXPECT_EQ(moved["restarts"], 0);
  EXPECT_EQ(Get("/v1/jobs/" + std::to_string(on_gpu1))["state"], "running");

  // The hook got the firing of each alert and the resolution of the first burst.
  std::string payloads;
  for (int i = 0; i < 200; ++i) {
    std::ifstream in(hook_out);
    payloads.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (payloads.find("\"resolved\"") != std::string::npos && payloads.find("sbe_move") != std::string::npos) break;
    ::usleep(20'000);
  }
  EXPECT_THAT(payloads, HasSubstr("\"alertname\":\"sbe_move\""));
  EXPECT_THAT(payloads, HasSubstr("\"alertname\":\"replay_drain\""));
  EXPECT_THAT(payloads, HasSubstr("\"status\":\"resolved\""));

  // A restart takes the firing alert back: it neither fires nor acts again.
  // The simulated fleet starts afresh, so its error is there from the start.
  StopDaemon();
  options.driver.scenario_path = WriteFile("restarted.yaml", R"(
description: the same A100s after the restart, GPU 0 still with corrected ECC errors
seed: 9
gpus:
  - {model: a100-40gb, count: 2}
faults:
  - {at: 0s, gpu: 0, kind: ecc_sbe, count: 1}
)");
  StartDaemon(options);
  RunUntil(clock_->Now() - kT0 + 2 * kMinuteMs);
  EXPECT_EQ((Transitions("alert.firing")[{"sbe_move", 0}].size()), 1u);
  EXPECT_EQ(Events("job.requeued").size(), 1u);
  EXPECT_EQ(count_events("gpu.drained", uuid0), 1);
  json active = Get("/v1/alerts")["alerts"];
  ASSERT_EQ(active.size(), 1u) << active.dump();
  EXPECT_EQ(active[0]["rule"], "sbe_move");
  EXPECT_EQ(active[0]["fired_at"], kT0 + FirstSampleAtOrAfter(kMinuteMs));
}

burnin::BurnInRun PassedBurnIn(const json& gpu, TimeMs finished, int score) {
  burnin::BurnInRun run;
  run.gpu_uuid = gpu["uuid"];
  run.gpu_name = gpu["name"];
  run.gpu_index = gpu["index"];
  run.level = 2;
  run.simulated = true;
  run.started = finished - 10 * kMinuteMs;
  run.finished = finished;
  run.outcome = burnin::RunOutcome::kPassed;
  run.health.score = score;
  run.health.verdict = score >= 90 ? burnin::Verdict::kHealthy : burnin::Verdict::kDegraded;
  return run;
}

TEST_F(MonitoringTest, HealthScoreDropFromRecordedBurnIns) {
  StartDaemon(ScenarioOptions("description: one card\ngpus:\n  - {model: rtx3090}\n"));
  json gpu = Get("/v1/gpus")["gpus"][0];
  auto record = [&](TimeMs finished, int score) {
    json body = {{"runs", {burnin::ToJson(PassedBurnIn(gpu, finished, score))}}};
    ASSERT_EQ(Call("POST", "/v1/burnin/runs", body.dump()).status, 201);
  };
  record(clock_->Now() - 48 * kHourMs, 96);
  Step();
  EXPECT_TRUE(Events("alert.firing").empty());
  EXPECT_THAT(Metrics(), HasSubstr("gpuherd_gpu_health_score{"));

  record(clock_->Now(), 78);  // 18 points down
  Step();
  auto fired = Transitions("alert.firing");
  EXPECT_EQ((fired[{"gpu_health_drop", 0}]), (std::vector<DurationMs>{clock_->Now() - kT0}));
  std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("gpuherd_alerts_firing{rule=\"gpu_health_drop\",severity=\"warning\"} 1\n"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex("gpuherd_gpu_health_score\\{[^}]*\\} 78\n"));
  EXPECT_THAT(metrics, ::testing::ContainsRegex("gpuherd_gpu_verdict\\{[^}]*verdict=\"degraded\"\\} 1\n"));

  record(clock_->Now(), 95);  // back within 15 points of the best
  Step();
  EXPECT_EQ((Transitions("alert.resolved")[{"gpu_health_drop", 0}]), (std::vector<DurationMs>{clock_->Now() - kT0}));
}

TEST_F(MonitoringTest, MetricsOnBothPortsWithoutAToken) {
  DaemonOptions options = ScenarioOptions("description: two cards\ngpus:\n  - {model: t4, count: 2}\n");
  options.metrics_port = 0;
  options.metrics_host = "127.0.0.1";
  StartDaemon(options);
  Step();
  for (int port : {daemon_->tcp_port(), daemon_->metrics_port()}) {
    http::Client tcp(http::Endpoint{"", "127.0.0.1", port});
    auto r = tcp.Request("GET", "/metrics");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_THAT(r->headers["content-type"], HasSubstr("version=0.0.4"));
    EXPECT_THAT(r->body, HasSubstr("DCGM_FI_DEV_GPU_TEMP{"));
    EXPECT_THAT(r->body, HasSubstr("gpuherd_alerts_firing{rule=\"gpu_xid\""));
    EXPECT_THAT(r->body, HasSubstr("gpuherd_jobs{state=\"pending\"} 0\n"));
  }
  http::Client metrics_only(http::Endpoint{"", "127.0.0.1", daemon_->metrics_port()});
  auto other = metrics_only.Request("GET", "/v1/health");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->status, 404);
  EXPECT_THAT(other->body, HasSubstr("only /metrics"));
  EXPECT_EQ(Call("POST", "/metrics").status, 405);
}

TEST_F(MonitoringTest, BadRulesFileRefusesToStartWithItsLine) {
  DaemonOptions options = ScenarioOptions("description: one card\ngpus:\n  - {model: t4}\n");
  options.alert_rules_path = WriteFile("bad.yaml", "rules:\n  - name: hot\n    expr: temp_c >> 90\n");
  auto d = Daemon::Create(options, clock_.get());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("bad.yaml:3"));

  options.alert_rules_path.clear();
  options.webhook_urls = {"ftp://example.invalid/hook"};
  d = Daemon::Create(options, clock_.get());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("ftp://example.invalid/hook"));
}

// Alerts raised outside the engine (self-healing's, the risk model's): a
// resolution takes off the list exactly the alert it resolves, and an alert
// on a job belongs to its GPU in the events.
TEST(AlertServiceExternalTest, AResolutionTakesOffOnlyTheAlertItResolves) {
  fs::path dir = fs::temp_directory_path() / ("gpuherd_alert_external_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  host::FakeClock clock(kT0);
  DaemonState state;
  state.clock = &clock;
  state.sample_interval = kStep;
  auto store = store::Store::Open((dir / "state.db").string());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  state.store = std::move(store).value();
  gpu::GpuInfo gpu;
  gpu.index = 3;
  gpu.uuid = "GPU-three";
  state.fleet.gpus.push_back(gpu);
  auto service = AlertService::Create(&state, nullptr, AlertServiceOptions());
  ASSERT_TRUE(service.ok()) << service.status().ToString();
  AlertService& service_ref = **service;

  auto raise = [&](TimeMs at, alerts::AlertState from, alerts::AlertState to) {
    alerts::Alert a;
    a.rule = "application_xid";
    a.subject = "job 7 xid 31";
    a.gpu_index = 3;
    a.state = to;
    a.pending_since = a.fired_at = at;
    if (to == alerts::AlertState::kResolved) a.resolved_at = clock.Now();
    a.severity = store::Severity::kWarning;
    a.summary = "job 7 hit XID 31";
    service_ref.RaiseExternal({from, to, clock.Now(), a});
  };
  auto listed = [&] {
    std::vector<TimeMs> out;
    auto list = service_ref.List(false);
    EXPECT_TRUE(list.ok());
    if (list.ok()) {
      for (const api::Alert& a : *list) out.push_back(a.pending_since);
    }
    return out;
  };
  raise(kT0, alerts::AlertState::kInactive, alerts::AlertState::kFiring);
  clock.Advance(kHourMs);
  // Its owner told again: the new alert replaces the old on the list.
  raise(kT0 + kHourMs, alerts::AlertState::kInactive, alerts::AlertState::kFiring);
  EXPECT_EQ(listed(), std::vector<TimeMs>{kT0 + kHourMs});
  // The old one's resolution, late: the new one stays.
  raise(kT0, alerts::AlertState::kFiring, alerts::AlertState::kResolved);
  EXPECT_EQ(listed(), std::vector<TimeMs>{kT0 + kHourMs});
  raise(kT0 + kHourMs, alerts::AlertState::kFiring, alerts::AlertState::kResolved);
  EXPECT_TRUE(listed().empty());

  ASSERT_FALSE(state.batch.events.empty());
  for (const store::EventRecord& e : state.batch.events) EXPECT_EQ(e.gpu_uuid, "GPU-three") << e.message;
  service->reset();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace gpuherd::daemon
