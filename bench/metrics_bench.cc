// The cost of one /metrics scrape: RenderMetrics on simulated fleets of 8
// and 1,000 GPUs (time and bytes), and of one alert evaluation of the default
// rules over the same fleets with 5 minutes of readings at 5 s. Time is
// simulated; only the measurements read the real clock. Prints Markdown.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "alerts/engine.h"
#include "alerts/rules.h"
#include "core/status.h"
#include "core/time.h"
#include "gpu/sim/sim_driver.h"
#include "telemetry/prometheus.h"

namespace gpuherd {
namespace {

using Millis = std::chrono::duration<double, std::milli>;
using SteadyClock = std::chrono::steady_clock;

constexpr TimeMs kSimStart = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr DurationMs kInterval = 5 * kSecondMs;

struct Fleet {
  gpu::Fleet fleet;
  std::vector<std::vector<gpu::GpuSample>> history;  // per GPU, oldest first
};

// Every other GPU under load; `readings` rounds of samples.
Result<Fleet> Simulate(int count, int readings) {
  gpu::sim::SimOptions options;
  options.count = count;
  options.start = kSimStart;
  auto driver = gpu::sim::OpenSimDriver(options);
  if (!driver.ok()) return driver.status();
  auto fleet = (*driver)->Discover();
  if (!fleet.ok()) return fleet.status();
  for (int i = 0; i < count; i += 2) (*driver)->SetLoad(i, gpu::sim::Load{0.85, 0, {}});
  Fleet out{std::move(fleet).value(), std::vector<std::vector<gpu::GpuSample>>(count)};
  for (int r = 0; r < readings; ++r) {
    for (int i = 0; i < count; ++i) {
      auto s = (*driver)->Sample(i, kSimStart + r * kInterval);
      if (s.ok()) out.history[i].push_back(std::move(s).value());
    }
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(int repeats) {
  std::printf("| GPUs | exposition bytes | series | RenderMetrics (median of %d) | alert evaluation, %zu default rules |\n",
              repeats, alerts::DefaultRules().size());
  std::printf("|---:|---:|---:|---:|---:|\n");
  const int readings = static_cast<int>(5 * kMinuteMs / kInterval) + 1;
  for (int count : {8, 1000}) {
    Result<Fleet> sim = Simulate(count, readings);
    if (!sim.ok()) {
      std::fprintf(stderr, "metrics_bench: %s\n", sim.status().ToString().c_str());
      return 1;
    }
    telemetry::MetricsInput in;
    in.hostname = "bench-node";
    in.version = "bench";
    in.driver = "sim";
    in.simulated = true;
    in.jobs_by_state = {{"pending", 10}, {"running", count / 2}};
    alerts::EvalInput eval;
    for (int i = 0; i < count; ++i) {
      telemetry::GpuMetrics g;
      g.info = &sim->fleet.gpus[i];
      g.latest = sim->history[i].empty() ? nullptr : &sim->history[i].back();
      g.health_score = 90;
      g.verdict = "healthy";
      g.jobs = i % 2 == 0 ? 1 : 0;
      in.gpus.push_back(g);
      alerts::GpuInput gi;
      gi.info = &sim->fleet.gpus[i];
      gi.recent = sim->history[i];
      gi.job_running = i % 2 == 0;
      eval.gpus.push_back(std::move(gi));
    }

    std::vector<double> render_ms, eval_ms;
    size_t bytes = 0, series = 0;
    alerts::AlertEngine engine(alerts::DefaultRules());
    const TimeMs now = kSimStart + (readings - 1) * kInterval;
    for (int r = 0; r < repeats; ++r) {
      auto start = SteadyClock::now();
      std::string text = telemetry::RenderMetrics(in);
      render_ms.push_back(Millis(SteadyClock::now() - start).count());
      bytes = text.size();
      series = 0;
      for (size_t pos = 0; pos < text.size();) {
        series += text[pos] != '#';
        size_t end = text.find('\n', pos);
        pos = end == std::string::npos ? text.size() : end + 1;
      }
      start = SteadyClock::now();
      engine.Evaluate(eval, now);
      eval_ms.push_back(Millis(SteadyClock::now() - start).count());
    }
    std::printf("| %d | %zu | %zu | %.2f ms | %.2f ms |\n", count, bytes, series, Median(render_ms),
                Median(eval_ms));
  }
  return 0;
}

}  // namespace
}  // namespace gpuherd

int main(int argc, char** argv) {
  CLI::App app{"Cost of the Prometheus exposition and of alert evaluation on simulated fleets"};
  int repeats = 21;
  app.add_option("--repeats", repeats, "measurements per fleet size")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  return gpuherd::Run(repeats);
}
