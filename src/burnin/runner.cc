#include "burnin/runner.h"

#include <algorithm>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "burnin/device_run.h"
#include "burnin/idle_checks.h"
#include "burnin/requalify_checks.h"
#include "burnin/thermal.h"
#include "host/virtual_clock.h"

namespace gpuherd::burnin {
namespace {

constexpr DurationMs kMinStress = kSecondMs;
constexpr DurationMs kMaxStress = 30 * 24 * kHourMs;
constexpr DurationMs kMinSampleInterval = 10, kMaxSampleInterval = kMinuteMs;
constexpr double kMaxMemtestFraction = 0.98;
constexpr size_t kMaxErrorSamples = 100000;
// A run keeps about this many curve points (an hour at one a second).
constexpr size_t kMaxCurvePoints = 3600;
// Peers of one model in the same burn-in stand in for the fleet median when
// the history has none, from this many on (a median of fewer says little).
constexpr int kMinPeersForReference = 3;

// One GPU's burn-in as the sampling thread sees it.
struct GpuRun {
  int index = 0;
  const gpu::GpuInfo* info = nullptr;
  BurnInRun run;
  std::optional<gpu::GpuSample> idle;   // the first reading
  std::string unanswered;               // the driver's error at the start
  std::optional<int> loaded_gen;        // highest link generation under load
  std::string lost;                     // the driver's error once it stopped answering
  std::optional<TimeMs> lost_at;
  std::vector<std::pair<TimeMs, int>> xids;  // XIDs the readings reported, with their time
  std::optional<double> temp_c;         // the last reading, for progress
  std::unique_ptr<DeviceStatus> status = std::make_unique<DeviceStatus>();
  DeviceResult result;
  bool started = false;                 // a device thread runs for it
};

void Sample(gpu::Driver& driver, GpuRun& g, TimeMs now, TimeMs started) {
  bool loaded = false, done = false;
  {
    std::lock_guard lock(g.status->mu);
    loaded = g.status->loaded;
    done = g.status->done;
  }
  auto sample = driver.Sample(g.index, now);
  if (!sample.ok()) {
    if (g.lost.empty() && !done) {
      g.lost = sample.status().message();
      g.lost_at = now;
    }
    return;
  }
  for (const gpu::XidEvent& x : sample->xids) g.xids.push_back({x.time ? x.time : now, x.xid});
  TempPoint point;
  point.t = now - started;
  point.temp_c = sample->temp_c;
  point.power_w = sample->power_w;
  point.sm_clock_mhz = sample->sm_clock_mhz;
  point.throttle_reasons = sample->throttle_reasons.value_or(0);
  g.run.curve.push_back(point);
  g.temp_c = sample->temp_c;
  if (loaded && !done && sample->pcie_gen) {
    g.loaded_gen = std::max(g.loaded_gen.value_or(0), *sample->pcie_gen);
  }
}

Progress ProgressOf(const GpuRun& g) {
  Progress p;
  p.gpu_index = g.index;
  p.temp_c = g.temp_c;
  if (!g.started) {
    p.phase = "could_not_run";
    return p;
  }
  std::lock_guard lock(g.status->mu);
  p.phase = g.status->phase;
  p.fraction = g.status->fraction;
  p.rate = g.status->rate;
  p.rate_unit = g.status->rate_unit;
  p.errors = g.status->errors;
  return p;
}

// Everything the run learned, merged into its record.
void Finish(GpuRun& g, const BurnInOptions& options, TimeMs finished) {
  BurnInRun& run = g.run;
  run.finished = finished;
  if (!g.unanswered.empty()) {
    run.outcome = RunOutcome::kCouldNotRun;
    run.outcome_reason = "the driver does not answer for this GPU: " + g.unanswered;
    return;
  }
  DeviceResult& r = g.result;
  if (!r.open_error.empty()) {
    run.outcome = RunOutcome::kCouldNotRun;
    run.outcome_reason = "cannot run work on this GPU: " + r.open_error;
  }
  std::vector<Check> checks = IdleChecks(*g.info, *g.idle);
  checks.insert(checks.begin() + 1,
                PcieLinkCheck(*g.info, *g.idle, options.level >= 2 ? g.loaded_gen : std::nullopt,
                              options.level));
  for (Check& c : r.checks) checks.push_back(std::move(c));
  run.memory_errors = r.memory_errors;
  run.compute_errors = r.compute_errors;
  run.nan_count = r.nan_count;
  run.memory_error_samples = std::move(r.memory_error_samples);
  run.rates = r.rates;

  std::optional<StressSpan> span;
  if (r.stress_begin && r.stress_end) {
    span = StressSpan{*r.stress_begin - run.started, *r.stress_end - run.started};
  }
  ThermalAnalysis thermal = AnalyzeCurve(run.curve, span);
  run.thermal = thermal.summary;
  const bool stressed = span && thermal.stress_samples > 0;
  if (stressed && !r.aborted && r.lost.empty() && r.open_error.empty()) {
    for (Check& c : ThermalChecks(thermal, g.info->temp_slowdown_c, span->end - span->begin)) {
      checks.push_back(std::move(c));
    }
  }
  if (r.transients_begin && r.transients_end) {
    const TimeMs begin = *r.transients_begin, end = *r.transients_end;
    TransientObservation o;
    for (const TempPoint& p : run.curve) {
      const TimeMs t = run.started + p.t;
      if (t < begin || t > end) continue;
      ++o.readings;
      if (p.power_w) {
        o.min_power_w = std::min(o.min_power_w.value_or(*p.power_w), *p.power_w);
        o.max_power_w = std::max(o.max_power_w.value_or(*p.power_w), *p.power_w);
      }
    }
    // The card fell off under the swings (or right after the last one).
    if (g.lost_at && *g.lost_at >= begin && *g.lost_at <= end + 2 * options.sample_interval) o.failed_readings = 1;
    if (!r.lost.empty() && !g.lost_at) o.failed_readings = 1;
    for (const auto& [t, xid] : g.xids) {
      if (t >= begin && t <= end + 2 * options.sample_interval) o.xids.push_back(xid);
    }
    checks.push_back(JudgeTransients(o, options.transients));
  }
  const bool lost_reported = std::any_of(checks.begin(), checks.end(), [](const Check& c) {
    return c.reason == "gpu_lost" || c.reason == "lost_under_transients";
  });
  if (!g.lost.empty() && !lost_reported) {
    Check lost;
    lost.name = "driver";
    lost.level = options.level;
    lost.outcome = CheckOutcome::kFail;
    lost.reason = "gpu_lost";
    lost.message = "the GPU stopped answering during the burn-in: " + g.lost;
    checks.push_back(std::move(lost));
  }
  run.checks = std::move(checks);
  run.curve = ThinCurve(std::move(run.curve), kMaxCurvePoints);

  if (!r.open_error.empty()) return;
  if (r.aborted) {
    run.outcome = RunOutcome::kAborted;
    run.outcome_reason = "stopped on request during " + r.aborted_phase;
    return;
  }
  const bool failed = std::any_of(run.checks.begin(), run.checks.end(), [](const Check& c) {
    return c.outcome == CheckOutcome::kFail;
  });
  run.outcome = failed ? RunOutcome::kFaultsFound : RunOutcome::kPassed;
}

double MedianOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The card's clock and power under the steady load (its median readings);
// `gpu_index` is the run's position, which PeerChecks hands back.
PeerReading SteadyReading(const GpuRun& g, int position) {
  PeerReading r;
  r.gpu_index = position;
  r.model = g.info->name;
  std::vector<double> clocks, powers;
  for (const TempPoint& p : g.run.curve) {
    const TimeMs t = g.run.started + p.t;
    if (t < *g.result.steady_begin || t > *g.result.steady_end) continue;
    if (p.sm_clock_mhz) clocks.push_back(*p.sm_clock_mhz);
    if (p.power_w) powers.push_back(*p.power_w);
  }
  if (!clocks.empty()) r.sm_clock_mhz = MedianOf(clocks);
  if (!powers.empty()) r.power_w = MedianOf(powers);
  return r;
}

// The reference for one model: the fleet's history from the options, else
// this burn-in's own finished runs of the model when there are enough.
ModelReference ReferenceFor(const std::string& model, const BurnInOptions& options,
                            const std::vector<BurnInRun>& peers) {
  auto given = options.references.find(model);
  if (given != options.references.end() && given->second.fleet_runs > 0) return given->second;
  ModelReference from_peers = ReferenceFromHistory(model, peers);
  if (from_peers.fleet_runs >= kMinPeersForReference) return from_peers;
  if (given != options.references.end()) return given->second;
  return ReferenceFromHistory(model, {});
}

}  // namespace

Status ValidateOptions(const BurnInOptions& options) {
  if (options.level < 1 || options.level > 3) {
    return InvalidArgument(fmt::format("level must be 1 (quick check), 2 (memory test) or 3 "
                                       "(sustained stress), not {}", options.level));
  }
  if (options.stress_duration < kMinStress || options.stress_duration > kMaxStress) {
    return InvalidArgument("the stress duration must be between 1s and 30d, not " +
                           FormatDuration(options.stress_duration));
  }
  if (!(options.memtest_fraction > 0 && options.memtest_fraction <= kMaxMemtestFraction)) {
    return InvalidArgument(fmt::format("the memory test covers a share of free memory above 0 and "
                                       "at most {} (0.90 by default), not {}",
                                       kMaxMemtestFraction, options.memtest_fraction));
  }
  if (options.sample_interval < kMinSampleInterval || options.sample_interval > kMaxSampleInterval) {
    return InvalidArgument(fmt::format("the sample interval must be between {} ms and {} s, not {} ms",
                                       kMinSampleInterval, kMaxSampleInterval / kSecondMs,
                                       options.sample_interval));
  }
  if (options.max_memory_error_samples > kMaxErrorSamples) {
    return InvalidArgument(fmt::format("keep at most {} memory error samples", kMaxErrorSamples));
  }
  return Status::Ok();
}

Result<std::vector<BurnInRun>> RunBurnIn(gpu::Driver& driver, const gpu::Fleet& fleet,
                                         const std::vector<int>& gpu_indices,
                                         gpu::ComputeBackend& compute, host::Clock& clock,
                                         const BurnInOptions& options, std::stop_token stop,
                                         const ProgressCallback& progress) {
  GPUHERD_RETURN_IF_ERROR(ValidateOptions(options));
  if (gpu_indices.empty()) return InvalidArgument("no GPU to test; name at least one");
  for (int index : gpu_indices) {
    if (index < 0 || index >= static_cast<int>(fleet.gpus.size())) {
      return InvalidArgument(fmt::format("no GPU {} in a fleet of {}", index, fleet.gpus.size()));
    }
  }
  // This thread samples; a virtual clock must wait for it as for the devices.
  host::ClockParticipant self(clock);
  self.Bind();
  const TimeMs started = clock.Now();

  std::vector<GpuRun> gpus(gpu_indices.size());
  for (size_t i = 0; i < gpu_indices.size(); ++i) {
    GpuRun& g = gpus[i];
    g.index = gpu_indices[i];
    g.info = &fleet.gpus[g.index];
    BurnInRun& run = g.run;
    run.gpu_uuid = g.info->uuid;
    run.gpu_name = g.info->name;
    run.pci_bus_id = g.info->pci_bus_id;
    run.serial = g.info->serial;
    run.gpu_index = g.index;
    run.level = options.level;
    run.simulated = fleet.simulated || g.info->simulated;
    run.started = started;
    run.stress_duration = options.level >= 3 ? options.stress_duration : 0;
    auto idle = driver.Sample(g.index, started);
    if (!idle.ok()) {
      g.unanswered = idle.status().message();
      continue;
    }
    g.idle = *idle;
    g.temp_c = idle->temp_c;
    TempPoint point;
    point.temp_c = idle->temp_c;
    point.power_w = idle->power_w;
    point.sm_clock_mhz = idle->sm_clock_mhz;
    point.throttle_reasons = idle->throttle_reasons.value_or(0);
    run.curve.push_back(point);
  }

  // Wakes every sleeper, the devices' and this thread's, when asked to stop.
  std::stop_callback wake_on_stop(stop, [&clock] { clock.Wake(); });
  std::vector<std::jthread> threads;
  for (GpuRun& g : gpus) {
    if (!g.unanswered.empty()) continue;
    g.started = true;
    threads.emplace_back([&compute, &options, &clock, stop, &g,
                          participant = host::ClockParticipant(clock)]() mutable {
      participant.Bind();
      RunDeviceWork(compute, *g.info, options, clock, stop, g.status.get(), &g.result);
    });
  }

  // The square wave's half periods are shorter than a reading interval: while
  // it runs, readings come often enough to see both halves.
  const DurationMs wave_interval =
      std::min<DurationMs>(options.sample_interval,
                           options.transients.frequency_hz > 0
                               ? std::max<DurationMs>(10, static_cast<DurationMs>(400 / options.transients.frequency_hz))
                               : options.sample_interval);
  auto in_wave = [&gpus] {
    for (const GpuRun& g : gpus) {
      if (!g.started) continue;
      std::lock_guard lock(g.status->mu);
      if (g.status->phase == "power_transients") return true;
    }
    return false;
  };
  TimeMs last_progress = started;
  for (TimeMs next = started + options.sample_interval;;
       next += in_wave() ? wave_interval : options.sample_interval) {
    while (clock.Now() < next && clock.SleepUntil(next) == false && !stop.stop_requested()) {
    }
    const TimeMs now = clock.Now();
    bool all_done = true;
    for (GpuRun& g : gpus) {
      if (!g.started) continue;
      Sample(driver, g, now, started);
      std::lock_guard lock(g.status->mu);
      all_done = all_done && g.status->done;
    }
    // Progress keeps its cadence while the readings come faster.
    const bool report_now = all_done || now >= last_progress + options.sample_interval;
    if (progress && report_now) {
      last_progress = now;
      std::vector<Progress> report;
      for (const GpuRun& g : gpus) report.push_back(ProgressOf(g));
      try {
        progress(report);
      } catch (...) {
        // The caller's display failing must not end the burn-in.
      }
    }
    if (all_done) break;
    if (stop.stop_requested()) next = clock.Now();
  }
  threads.clear();  // joins; every device is done already

  const TimeMs finished = clock.Now();
  std::vector<BurnInRun> runs;
  std::vector<PeerReading> peers;
  for (size_t i = 0; i < gpus.size(); ++i) {
    GpuRun& g = gpus[i];
    if (g.result.steady_begin && g.result.steady_end && g.lost.empty()) {
      peers.push_back(SteadyReading(g, static_cast<int>(i)));
    }
    Finish(g, options, finished);
    runs.push_back(std::move(g.run));
  }
  for (auto& [i, check] : PeerChecks(peers, options.peers)) runs[i].checks.push_back(std::move(check));
  for (BurnInRun& run : runs) run.health = ScoreRun(run, ReferenceFor(run.gpu_name, options, {}));
  for (BurnInRun& run : runs) run.health = ScoreRun(run, ReferenceFor(run.gpu_name, options, runs));
  return runs;
}

}  // namespace gpuherd::burnin
