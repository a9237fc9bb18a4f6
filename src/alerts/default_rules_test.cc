// Each default rule on a synthetic series: it fires and resolves at the time
// its condition and `for:` imply (within one sample), its action comes
// exactly once, and no other default rule reacts. Also: the embedded rules
// are the shipped file, and the Prometheus version passes promtool.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "alerts/engine.h"
#include "alerts/rules.h"

namespace gpuherd::alerts {
namespace {

constexpr TimeMs kT0 = 1'767'225'600'000;
constexpr DurationMs kStep = 5 * kSecondMs;
constexpr TimeMs kSecond = kSecondMs;
// The fault starts here: ten minutes of healthy readings fill every window.
constexpr TimeMs kOnset = 600 * kSecond;

// A healthy GPU under a job; each scenario changes some readings.
gpu::GpuSample Healthy(TimeMs t) {
  gpu::GpuSample s;
  s.time = kT0 + t;
  s.gpu_util_pct = 80;
  s.mem_util_pct = 40;
  s.mem_used_bytes = 50;
  s.mem_total_bytes = 100;
  s.temp_c = 60;
  s.power_w = 300;
  s.pcie_tx_kbps = 1'000'000;
  s.pcie_rx_kbps = 1'000'000;
  s.pcie_replay_count = 10;
  s.ecc_sbe_volatile = 0;
  s.ecc_dbe_volatile = 0;
  s.pcie_gen = 4;
  s.pcie_width = 16;
  return s;
}

struct Scenario {
  std::function<void(TimeMs t, gpu::GpuSample& s)> change;  // t: since the start
  std::function<void(TimeMs t, IbReading& r)> ib;
  std::function<void(TimeMs t, std::vector<HealthPoint>& h)> health;
  bool job = true;
  TimeMs job_from = -kHourMs;  // since the start; before 0: the job ran before the series
  TimeMs end = 40 * kMinuteMs;
};

struct Outcome {
  std::map<std::string, std::vector<TimeMs>> fired, resolved;  // by rule, since the start
  std::map<std::string, std::vector<Action>> actions;         // of kFiring transitions, by rule
  std::map<std::string, std::vector<TimeMs>> pending;
  std::map<std::string, store::Severity> severity;
};

Outcome Play(const Scenario& scenario) {
  AlertEngine engine(DefaultRules());
  gpu::GpuInfo info;
  info.index = 0;
  info.uuid = "GPU-0";
  info.temp_slowdown_c = 87;
  info.max_pcie_gen = 4;
  info.max_pcie_width = 16;
  GpuInput gpu;
  gpu.info = &info;
  gpu.job_running = scenario.job;
  if (scenario.job && scenario.job_from < 0) {
    engine.Evaluate(EvalInput{{gpu}, {}}, kT0 + scenario.job_from);  // the job's start, before the readings
  }
  IbPortInput port{"mlx5_0", "1", {}};
  const size_t keep = static_cast<size_t>(engine.LongestWindow() / kStep) + 2;

  Outcome out;
  for (TimeMs t = 0; t <= scenario.end; t += kStep) {
    gpu::GpuSample s = Healthy(t);
    if (scenario.change) scenario.change(t, s);
    gpu.recent.push_back(s);
    if (gpu.recent.size() > keep) gpu.recent.erase(gpu.recent.begin());
    IbReading reading{kT0 + t, {{"port_rcv_errors", 2}, {"port_xmit_discards", 0}, {"symbol_error", 0}}};
    if (scenario.ib) scenario.ib(t, reading);
    port.recent.push_back(reading);
    if (port.recent.size() > keep) port.recent.erase(port.recent.begin());
    if (scenario.health) scenario.health(t, gpu.health);
    gpu.job_running = scenario.job && t >= scenario.job_from;

    for (const AlertTransition& tr : engine.Evaluate(EvalInput{{gpu}, {port}}, kT0 + t)) {
      if (tr.to == AlertState::kFiring) {
        out.fired[tr.alert.rule].push_back(t);
        out.actions[tr.alert.rule].push_back(tr.alert.action);
      }
      if (tr.to == AlertState::kResolved) out.resolved[tr.alert.rule].push_back(t);
      if (tr.to == AlertState::kPending) out.pending[tr.alert.rule].push_back(t);
      out.severity[tr.alert.rule] = tr.alert.severity;
    }
  }
  return out;
}

// `rule` fired once at `fire` and resolved once at `resolve` (each within one
// sample), and no other rule fired.
void ExpectOnly(const Outcome& out, const std::string& rule, TimeMs fire, TimeMs resolve) {
  ASSERT_EQ(out.fired.count(rule), 1u) << rule << " never fired";
  ASSERT_EQ(out.fired.at(rule).size(), 1u) << rule;
  EXPECT_NEAR(out.fired.at(rule)[0], fire, kStep) << rule << " fired at " << out.fired.at(rule)[0] / 1000 << " s";
  EXPECT_EQ(out.actions.at(rule).size(), 1u) << rule;
  ASSERT_EQ(out.resolved.count(rule), 1u) << rule << " never resolved";
  ASSERT_EQ(out.resolved.at(rule).size(), 1u) << rule;
  EXPECT_NEAR(out.resolved.at(rule)[0], resolve, kStep)
      << rule << " resolved at " << out.resolved.at(rule)[0] / 1000 << " s";
  for (const auto& [other, times] : out.fired) {
    EXPECT_EQ(other, rule) << other << " fired too, at " << times[0] / 1000 << " s";
  }
}

bool During(TimeMs t, TimeMs from, TimeMs to) { return t >= from && t < to; }

TEST(DefaultRulesTest, HealthyGpuRaisesNothing) {
  Outcome out = Play(Scenario{});
  EXPECT_TRUE(out.fired.empty());
}

TEST(DefaultRulesTest, IdleWhileJob) {
  const TimeMs off = kOnset + 20 * kMinuteMs;
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (During(t, kOnset, off)) x.gpu_util_pct = 10;
  };
  ExpectOnly(Play(s), "gpu_idle_while_job", kOnset + 10 * kMinuteMs, off);

  s.job = false;  // idle without a job is no waste
  EXPECT_TRUE(Play(s).fired.empty());
}

TEST(DefaultRulesTest, MemoryHigh) {
  const TimeMs off = kOnset + 10 * kMinuteMs;
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (During(t, kOnset, off)) x.mem_used_bytes = 95;
  };
  ExpectOnly(Play(s), "gpu_memory_high", kOnset + 5 * kMinuteMs, off);
}

TEST(DefaultRulesTest, PcieReplayRate) {
  // 2,000,000 KB/s of traffic is 8,000,000 packets a second, so 80,000
  // replays per 5 s reading are 0.2% of it. The 5-minute window holds 60
  // intervals (2.4e9 packets): the ratio passes 0.1% once 31 of them carry
  // replays (155 s after the onset), and fires a minute later. After the
  // replays stop, it falls to 0.1% when 30 such intervals are left (150 s).
  const TimeMs off = kOnset + 10 * kMinuteMs;
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    TimeMs replaying = std::min(t, off) - kOnset;
    if (replaying > 0) *x.pcie_replay_count += static_cast<uint64_t>(replaying / kStep) * 80'000;
  };
  ExpectOnly(Play(s), "gpu_pcie_replay_rate", kOnset + 155 * kSecond + kMinuteMs, off + 150 * kSecond);
}

TEST(DefaultRulesTest, TemperatureOverLimit) {
  const TimeMs off = kOnset + 2 * kMinuteMs;
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (During(t, kOnset, off)) x.temp_c = 89;  // slowdown at 87
  };
  ExpectOnly(Play(s), "gpu_temp_over_limit", kOnset + 15 * kSecond, off);
}

TEST(DefaultRulesTest, TemperatureRising) {
  // 1.2 °C a minute for 25 minutes from 40 °C. The least-squares slope over a
  // 10-minute window that holds x minutes of the ramp is 1.2 (3r² - 2r³) with
  // r = x / 10: it passes 0.5 at r = 0.444 (267 s), and the alert fires 15
  // minutes later. After the ramp, the slope is 1.2 (1 - 3r² + 2r³) with r
  // the time since it ended over 10 minutes, below 0.5 at r = 0.556 (333 s).
  const TimeMs off = kOnset + 25 * kMinuteMs;
  Scenario s;
  s.end = 60 * kMinuteMs;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    double minutes = static_cast<double>(std::clamp<TimeMs>(t - kOnset, 0, off - kOnset)) / kMinuteMs;
    x.temp_c = 40 + 1.2 * minutes;
  };
  ExpectOnly(Play(s), "gpu_temp_rising", kOnset + 267 * kSecond + 15 * kMinuteMs, off + 333 * kSecond);
}

TEST(DefaultRulesTest, WarmUpUnderLoadIsNotFailingCooling) {
  // A job starts on an idle card: 35 °C towards 80 °C with the catalogue's
  // slowest heat sink (time constant 110 s). Its 10-minute slope is over
  // 0.5 °C/min for about 13 minutes, short of the rule's 15.
  for (double tau_s : {60.0, 80.0, 110.0}) {
    Scenario s;
    s.change = [&](TimeMs t, gpu::GpuSample& x) {
      double since = static_cast<double>(std::max<TimeMs>(t - kOnset, 0)) / kSecond;
      x.temp_c = 35 + 45 * (1 - std::exp(-since / tau_s));
    };
    Outcome out = Play(s);
    EXPECT_TRUE(out.fired.empty()) << "time constant " << tau_s << " s: " << out.fired.begin()->first;
  }
}

TEST(DefaultRulesTest, DoubleBitEccCheckpointsAndMovesOnce) {
  const TimeMs reset = kOnset + 5 * kMinuteMs;  // the GPU is reset, clearing the volatile counter
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (During(t, kOnset, reset)) x.ecc_dbe_volatile = 1 + (t - kOnset) / kMinuteMs;
  };
  Outcome out = Play(s);
  ExpectOnly(out, "gpu_ecc_dbe", kOnset, reset);
  EXPECT_THAT(out.actions["gpu_ecc_dbe"], ::testing::ElementsAre(Action::kCheckpointAndMove));
}

TEST(DefaultRulesTest, AnyXid) {
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (t == kOnset) x.xids.push_back({kT0 + t, 13, "graphics engine exception"});
  };
  // Fires on the reading with the XID; resolves when it leaves the 5-minute window.
  ExpectOnly(Play(s), "gpu_xid", kOnset, kOnset + 5 * kMinuteMs + kStep);
}

TEST(DefaultRulesTest, FatalXidIsCritical) {
  for (int xid : {48, 79, 95}) {
    Scenario s;
    s.change = [&](TimeMs t, gpu::GpuSample& x) {
      if (t == kOnset) x.xids.push_back({kT0 + t, xid, ""});
    };
    Outcome out = Play(s);
    ASSERT_EQ(out.fired["gpu_xid_fatal"].size(), 1u) << xid;
    EXPECT_NEAR(out.fired["gpu_xid_fatal"][0], kOnset, kStep);
    EXPECT_EQ(out.severity["gpu_xid_fatal"], store::Severity::kCritical);
    EXPECT_EQ(out.fired["gpu_xid"].size(), 1u);
  }
  // An application's XID stays a warning.
  Scenario app;
  app.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (t == kOnset) x.xids.push_back({kT0 + t, 31, ""});
  };
  EXPECT_EQ(Play(app).fired.count("gpu_xid_fatal"), 0u);
}

TEST(DefaultRulesTest, PcieDownTrainRaisesAnAlert) {
  const TimeMs off = kOnset + 10 * kMinuteMs;
  Scenario s;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (During(t, kOnset, off)) x.pcie_width = 8;
  };
  ExpectOnly(Play(s), "gpu_pcie_downtrained", kOnset + kMinuteMs, off);
  // A lower generation on an idle card is power saving, not a fault.
  Scenario idle;
  idle.job = false;
  idle.change = [&](TimeMs t, gpu::GpuSample& x) {
    x.gpu_util_pct = 0;
    x.pcie_gen = 1;
  };
  EXPECT_TRUE(Play(idle).fired.empty());
  // Under load, it is a down-train.
  Scenario busy;
  busy.change = [&](TimeMs t, gpu::GpuSample& x) {
    if (During(t, kOnset, off)) x.pcie_gen = 3;
  };
  ExpectOnly(Play(busy), "gpu_pcie_downtrained", kOnset + kMinuteMs, off);
}

TEST(DefaultRulesTest, AJobsStartMakesNothingPending) {
  // An idle card gets a job: it loads data for 5 minutes (idle), then warms
  // from 35 °C towards 80 °C with the slowest heat sink (110 s).
  Scenario s;
  s.job_from = kOnset;
  s.change = [&](TimeMs t, gpu::GpuSample& x) {
    double since = static_cast<double>(std::max<TimeMs>(t - kOnset - 5 * kMinuteMs, 0)) / kSecond;
    x.temp_c = 35 + 45 * (1 - std::exp(-since / 110.0));
    if (t < kOnset + 5 * kMinuteMs) x.gpu_util_pct = 5;
  };
  Outcome out = Play(s);
  EXPECT_TRUE(out.pending.empty()) << out.pending.begin()->first;
  EXPECT_TRUE(out.fired.empty());
}

TEST(DefaultRulesTest, InfinibandPacketLoss) {
  Scenario s;
  s.ib = [&](TimeMs t, IbReading& r) {
    if (t >= kOnset) r.counters["port_rcv_errors"] += 3;
  };
  // The step between the readings before and at the onset leaves the
  // 5-minute window when the earlier reading does.
  ExpectOnly(Play(s), "ib_packet_loss", kOnset, kOnset - kStep + 5 * kMinuteMs + kStep);
}

TEST(DefaultRulesTest, HealthScoreDrop) {
  const TimeMs retest = kOnset + 5 * kMinuteMs;
  Scenario s;
  s.health = [&](TimeMs t, std::vector<HealthPoint>& h) {
    if (t == kStep) h.push_back({kT0 + t, 92});
    if (t == kOnset) h.push_back({kT0 + t, 70});     // a burn-in scores 22 points lower
    if (t == retest) h.push_back({kT0 + t, 90});     // after repair, back within 15 points
  };
  ExpectOnly(Play(s), "gpu_health_drop", kOnset, retest);
}

TEST(DefaultRulesTest, EveryDefaultRuleIsExercisedAbove) {
  std::set<std::string> names;
  for (const Rule& r : DefaultRules()) names.insert(r.name);
  EXPECT_EQ(names, (std::set<std::string>{"gpu_idle_while_job", "gpu_memory_high", "gpu_pcie_replay_rate",
                                          "gpu_temp_over_limit", "gpu_temp_rising", "gpu_ecc_dbe", "gpu_xid",
                                          "ib_packet_loss", "gpu_health_drop", "gpu_xid_fatal",
                                          "gpu_pcie_downtrained"}));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(DefaultRulesTest, EmbeddedRulesAreTheShippedFile) {
  std::string shipped = ReadFile(std::string(GPUHERD_SOURCE_DIR) + "/deploy/alerts/default-rules.yaml");
  ASSERT_FALSE(shipped.empty());
  EXPECT_EQ(DefaultRulesYaml(), shipped);
  auto parsed = ParseRules(shipped, "default-rules.yaml");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
}

TEST(PrometheusRulesTest, EveryDefaultRuleHasAPrometheusAlert) {
  YAML::Node doc = YAML::LoadFile(std::string(GPUHERD_SOURCE_DIR) + "/deploy/prometheus/gpuherd-rules.yml");
  std::map<std::string, std::string> severity_by_alert;
  for (const YAML::Node& group : doc["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      severity_by_alert[rule["alert"].as<std::string>()] = rule["labels"]["severity"].as<std::string>();
    }
  }
  for (const Rule& r : DefaultRules()) {
    ASSERT_TRUE(severity_by_alert.count(r.name)) << r.name << " has no Prometheus alert";
    EXPECT_EQ(severity_by_alert[r.name], store::SeverityName(r.severity)) << r.name;
  }
}

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/" + program;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

TEST(PrometheusRulesTest, PromtoolAcceptsTheRules) {
  std::string promtool = FindOnPath("promtool");
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not found on PATH; install Debian's 'prometheus' package to run this check";
  }
  std::string command = promtool + " check rules " + GPUHERD_SOURCE_DIR + "/deploy/prometheus/gpuherd-rules.yml 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_THAT(output, ::testing::HasSubstr("SUCCESS"));
}

}  // namespace
}  // namespace gpuherd::alerts
