// The exposition of a simulated fleet with every fault kind, checked by
// promtool (Debian package prometheus). Skipped where promtool is absent.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpu/sim/sim_driver.h"
#include "telemetry/prometheus.h"

namespace gpuherd::telemetry {
namespace {

constexpr TimeMs kStart = 1'767'225'600'000;

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = dir + "/" + program;
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct CommandRun {
  int exit_code = -1;
  std::vector<std::string> lines;
};

CommandRun RunCommand(const std::string& command) {
  CommandRun run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) run.lines.push_back(line);
  }
  return run;
}

// The exposition of the faults tour seven minutes in, when most of its
// faults are active.
std::string RenderSimulatedFleet() {
  gpu::sim::SimOptions options;
  options.scenario_path = std::string(GPUHERD_SOURCE_DIR) + "/examples/scenarios/faults-tour.yaml";
  options.start = kStart;
  auto driver = gpu::sim::OpenSimDriver(options);
  EXPECT_TRUE(driver.ok()) << driver.status().ToString();
  if (!driver.ok()) return "";
  auto fleet = (*driver)->Discover();
  EXPECT_TRUE(fleet.ok()) << fleet.status().ToString();
  if (!fleet.ok()) return "";
  (*driver)->SetLoad(0, gpu::sim::Load{0.9, 10ull << 30, {}});

  std::vector<gpu::GpuSample> samples(fleet->gpus.size());
  std::vector<bool> lost(fleet->gpus.size(), false);
  for (TimeMs t = kStart; t <= kStart + 7 * kMinuteMs; t += 5 * kSecondMs) {
    for (size_t i = 0; i < fleet->gpus.size(); ++i) {
      auto s = (*driver)->Sample(static_cast<int>(i), t);
      lost[i] = !s.ok();
      if (s.ok()) samples[i] = std::move(s).value();
    }
  }

  MetricsInput in;
  in.hostname = "node-a";
  in.version = "0.1.0";
  in.driver = "sim";
  in.simulated = true;
  for (size_t i = 0; i < fleet->gpus.size(); ++i) {
    GpuMetrics g;
    g.info = &fleet->gpus[i];
    g.latest = &samples[i];
    g.lost = lost[i];
    g.health_score = 90 - static_cast<int>(i);
    g.verdict = i == 3 ? "unhealthy" : "healthy";
    g.xid_count = i == 3 ? 1 : 0;
    g.jobs = i == 0 ? 1 : 0;
    g.health_state = i == 3 ? "quarantined" : "in_service";
    in.gpus.push_back(g);
  }
  in.jobs_by_state = {{"pending", 2}, {"running", 1}, {"completed", 10}};
  in.gpu_seconds_by_user = {{"ana", 3600}, {"bo", 12.5}};
  in.alerts_firing = {{"gpu_ecc_dbe", "critical", 1}};
  in.scheduler_pass_seconds = 0.0004;
  in.connections = ConnectionMetrics{.open = 70, .limit = 4096, .refused_per_user = 12, .refused_total = 1};
  in.ib_ports = {{"mlx5_0", "1", {{"port_rcv_errors", 0}, {"port_xmit_discards", 3}}}};

  return RenderMetrics(in);
}

TEST(PrometheusLintTest, SimulatedFleetPassesPromtoolButForDcgmLabels) {
  std::string promtool = FindOnPath("promtool");
  if (promtool.empty()) {
    GTEST_SKIP() << "promtool not found on PATH; install Debian's 'prometheus' package to run this check";
  }

  std::string path = ::testing::TempDir() + "/gpuherd_metrics.prom";
  {
    std::ofstream out(path);
    out << RenderSimulatedFleet();
  }
  CommandRun run = RunCommand(promtool + " check metrics < " + path);

  // dcgm-exporter's names and labels are kept for its dashboards: promtool
  // reports the camelCase labels (modelName, Hostname) once per DCGM family
  // and the word "counter" in DCGM_FI_DEV_PCIE_REPLAY_COUNTER. Nothing else.
  const std::regex camel_labels(R"(DCGM_FI_[A-Z_]+ label names should be written in 'snake_case' not 'camelCase')");
  const std::string replay_name = "DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'";
  int camel_findings = 0;
  for (const std::string& line : run.lines) {
    bool camel = std::regex_match(line, camel_labels);
    camel_findings += camel ? 1 : 0;
    EXPECT_TRUE(camel || line == replay_name) << "unexpected promtool finding: " << line;
  }
  EXPECT_GE(camel_findings, 10) << "the DCGM families were not rendered";
  EXPECT_NE(run.exit_code, -1);
}

std::string ReadSource(const std::string& relative) {
  std::ifstream in(std::string(GPUHERD_SOURCE_DIR) + "/" + relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The metric names a dashboard or rules file queries, from its expressions
// (alert names, which may look like metric names, are skipped).
std::set<std::string> MetricsQueried(const std::string& text) {
  static const std::regex kName(R"(\b(DCGM_FI_[A-Z_]+|gpuherd_[a-z_]+)\b)");
  std::set<std::string> names;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("- alert:") != std::string::npos) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), kName), end; it != end; ++it) names.insert((*it)[1]);
  }
  return names;
}

TEST(PrometheusLintTest, DashboardAndRulesQueryOnlyRenderedMetrics) {
  std::string exposition = RenderSimulatedFleet();
  for (const char* file : {"deploy/grafana/gpuherd-dashboard.json", "deploy/prometheus/gpuherd-rules.yml"}) {
    std::set<std::string> names = MetricsQueried(ReadSource(file));
    EXPECT_GE(names.size(), 5u) << file;
    for (const std::string& name : names) {
      EXPECT_NE(exposition.find("# TYPE " + name + " "), std::string::npos) << file << " queries " << name;
    }
  }
}

}  // namespace
}  // namespace gpuherd::telemetry
