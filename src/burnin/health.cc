#include "burnin/health.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "gpu/catalog.h"

namespace gpuherd::burnin {
namespace {

// Penalties are points taken off 100. A memory, compute or NaN error
// disqualifies outright (score 0): such a card corrupts results silently.

// Throughput: FP32 TFLOPS (memory bandwidth where no stress ran) against the
// fleet median of the model: 1.5 points per percent below 95 %, at most 50,
// so a card at 80 % of its peers (22.5 points) is degraded at best. Without a
// fleet median the data sheet is the yardstick, loosely, since sustained
// rates vary from 55 % to 95 % of it by model and cooling.
constexpr double kFleetRatioFloor = 0.95;
constexpr double kNominalRatioFloor = 0.55;
constexpr double kThroughputPointsPerPercent = 1.5;
constexpr double kMaxThroughputPenalty = 50;
// Thermal headroom (slowdown temperature minus the hottest reading): none
// with 10 °C or more to spare, then 2 points per °C less; reaching the
// slowdown temperature costs 30. Still climbing at the end costs 15 more.
constexpr double kComfortableHeadroomC = 10;
constexpr double kHeadroomPointsPerC = 2;
constexpr double kOverSlowdownPenalty = 30;
constexpr double kRunawayPenalty = 15;
// Throttled by heat or hardware slowdown: 40 points per share of the stress
// (a quarter of the time: 10), at most 20.
constexpr double kThrottlePointsPerShare = 40;
constexpr double kMaxThrottlePenalty = 20;
// PCIe: a link below its width or generation; low copy rates on a link that
// trained fully (the host holds it back).
constexpr double kPcieDowntrainPenalty = 10;
constexpr double kCopyLowPenalty = 5;
// ECC and memory repair history.
constexpr double kEccDbePenalty = 25;
constexpr double kRepairPendingPenalty = 10;
constexpr double kRemapFailurePenalty = 40;
constexpr double kMemoryRepairedPenalty = 5;
constexpr double kEccSbePenalty = 5;
constexpr double kEccDisabledPenalty = 5;
// Idle anomalies, low memory bandwidth, checks that could not run.
constexpr double kIdleAnomalyPenalty = 5;
constexpr double kBandwidthLowPenalty = 5;
constexpr double kCheckErrorPenalty = 10;
// A GPU that fell off the bus during the burn-in.
constexpr double kGpuLostPenalty = 60;
// Requalification: a power stage that does not hold load swings is as bad as
// a lost card; a card well below its peers' clock (or power) under the same
// load is degraded at best, as DCGM's peer checks flag it.
constexpr double kTransientsPenalty = 60;
// Counted once per run, whether the clock, the power or both are low.
constexpr double kBelowPeersPenalty = 25;

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double ValueOr(const Check& check, const char* key, double fallback) {
  auto it = check.values.find(key);
  return it == check.values.end() ? fallback : it->second;
}

std::string Percent(double ratio) { return fmt::format("{:.0f} %", 100 * ratio); }

class Scorer {
 public:
  explicit Scorer(Health* health) : health_(health) {}

  void Add(const std::string& name, double penalty, const std::string& detail) {
    health_->factors.push_back({name, penalty, detail});
  }

  void Throughput(const BurnInRun& run, const ModelReference& ref) {
    const bool fp32 = run.rates.fp32_tflops.has_value();
    const std::optional<double> achieved = fp32 ? run.rates.fp32_tflops : run.rates.mem_bandwidth_gbs;
    if (!achieved) return;
    const char* unit = fp32 ? "TFLOPS" : "GB/s";
    const std::optional<double> fleet = fp32 ? ref.fleet_fp32_tflops : ref.fleet_mem_bandwidth_gbs;
    const std::optional<double> nominal = fp32 ? ref.nominal_fp32_tflops : ref.nominal_mem_bandwidth_gbs;
    if (fleet && *fleet > 0) health_->ratio_to_fleet = *achieved / *fleet;
    if (nominal && *nominal > 0) health_->ratio_to_nominal = *achieved / *nominal;
    health_->fleet_reference_runs = ref.fleet_runs;
    double penalty = 0;
    std::string detail;
    if (health_->ratio_to_fleet) {
      penalty = (kFleetRatioFloor - *health_->ratio_to_fleet) * 100 * kThroughputPointsPerPercent;
      detail = fmt::format("{:.1f} {} = {} of the fleet median ({:.1f}, {} runs)", *achieved, unit,
                           Percent(*health_->ratio_to_fleet), *fleet, ref.fleet_runs);
    } else if (health_->ratio_to_nominal) {
      penalty = (kNominalRatioFloor - *health_->ratio_to_nominal) * 100 * kThroughputPointsPerPercent;
      detail = fmt::format("{:.1f} {} = {} of the data sheet's {:.1f}; no fleet history yet",
                           *achieved, unit, Percent(*health_->ratio_to_nominal), *nominal);
    } else {
      return;
    }
    if (health_->ratio_to_fleet && health_->ratio_to_nominal) {
      detail += fmt::format(", {} of the data sheet", Percent(*health_->ratio_to_nominal));
    }
    Add("throughput", std::clamp(penalty, 0.0, kMaxThroughputPenalty), detail);
  }

  void FromCheck(const Check& check, bool link_downtrained) {
    const std::string& r = check.reason;
    if (check.outcome == CheckOutcome::kError) {
      Add("incomplete", kCheckErrorPenalty, check.name + " could not run: " + check.message);
    } else if (r == "gpu_lost") {
      if (lost_counted_) return;
      lost_counted_ = true;
      Add("gpu_lost", kGpuLostPenalty, check.message);
    } else if (check.name == "thermal.headroom" && check.values.count("headroom_c")) {
      const double headroom = check.values.at("headroom_c");
      const double penalty = headroom <= 0 ? kOverSlowdownPenalty
                             : std::max(0.0, (kComfortableHeadroomC - headroom) * kHeadroomPointsPerC);
      Add("thermal_headroom", penalty,
          fmt::format("peak {:.0f} °C, {:.0f} °C under the slowdown temperature",
                      ValueOr(check, "max_temp_c", 0), headroom));
    } else if (r == "thermal_runaway") {
      Add("thermal_trend", kRunawayPenalty, check.message);
    } else if (r == "thermal_throttle") {
      const double share = ValueOr(check, "throttled_fraction", 0);
      Add("throttling", std::min(kMaxThrottlePenalty, kThrottlePointsPerShare * share),
          fmt::format("throttled {} of the stress", Percent(share)));
    } else if (r == "pcie_downtrained") {
      double penalty = 0;
      if (ValueOr(check, "width", 0) < ValueOr(check, "max_width", 0)) penalty += kPcieDowntrainPenalty;
      if (check.values.count("gen") && ValueOr(check, "gen", 0) < ValueOr(check, "max_gen", 0)) {
        penalty += kPcieDowntrainPenalty;
      }
      Add("pcie", penalty, check.message);
    } else if (r == "copy_bandwidth_low") {
      // A narrow link explains it; the link factor has counted that already.
      if (!link_downtrained) Add("pcie", kCopyLowPenalty, check.name + ": " + check.message);
    } else if (r == "ecc_dbe") {
      Add("ecc", kEccDbePenalty, check.message);
    } else if (r == "ecc_sbe") {
      Add("ecc", kEccSbePenalty, check.message);
    } else if (r == "ecc_disabled") {
      Add("ecc", kEccDisabledPenalty, check.message);
    } else if (r == "repair_pending") {
      Add("memory_repair", kRepairPendingPenalty, check.message);
    } else if (r == "remap_failure") {
      Add("memory_repair", kRemapFailurePenalty, check.message);
    } else if (r == "memory_repaired") {
      Add("memory_repair", kMemoryRepairedPenalty, check.message);
    } else if (r == "throttled_at_idle" || r == "hot_at_idle" || r == "high_idle_power" ||
               r == "implausible_reading") {
      Add("idle", kIdleAnomalyPenalty, check.name + ": " + check.message);
    } else if (r == "xid_under_transients" || r == "lost_under_transients") {
      Add("power_transients", kTransientsPenalty, check.message);
    } else if (r == "below_peers_clock" || r == "below_peers_power") {
      const bool counted = std::any_of(health_->factors.begin(), health_->factors.end(),
                                       [](const HealthFactor& f) { return f.name == "peers"; });
      if (!counted) Add("peers", kBelowPeersPenalty, check.message);
    } else if (r == "memory_bandwidth_low" || r == "d2d_bandwidth_low") {
      Add("bandwidth", kBandwidthLowPenalty, check.name + ": " + check.message);
    }
  }

 private:
  Health* health_;
  bool lost_counted_ = false;
};

}  // namespace

Verdict VerdictForScore(int score) {
  if (score >= kHealthyMin) return Verdict::kHealthy;
  if (score >= kDegradedMin) return Verdict::kDegraded;
  return Verdict::kUnhealthy;
}

ModelReference ReferenceFromHistory(const std::string& model, std::span<const BurnInRun> history) {
  ModelReference ref;
  std::vector<double> fp32, memory;
  for (const BurnInRun& run : history) {
    if (run.gpu_name != model || run.health.disqualified) continue;
    if (run.outcome != RunOutcome::kPassed && run.outcome != RunOutcome::kFaultsFound) continue;
    if (!run.rates.fp32_tflops && !run.rates.mem_bandwidth_gbs) continue;
    ++ref.fleet_runs;
    if (run.rates.fp32_tflops) fp32.push_back(*run.rates.fp32_tflops);
    if (run.rates.mem_bandwidth_gbs) memory.push_back(*run.rates.mem_bandwidth_gbs);
  }
  if (!fp32.empty()) ref.fleet_fp32_tflops = Median(fp32);
  if (!memory.empty()) ref.fleet_mem_bandwidth_gbs = Median(memory);
  if (const gpu::GpuModel* known = gpu::FindModel(model)) {
    ref.nominal_fp32_tflops = known->fp32_tflops;
    ref.nominal_mem_bandwidth_gbs = known->mem_bandwidth_gbs;
  }
  return ref;
}

Health ScoreRun(const BurnInRun& run, const ModelReference& reference) {
  Health health;
  if (run.outcome == RunOutcome::kCouldNotRun || run.outcome == RunOutcome::kAborted) {
    health.verdict = Verdict::kUnknown;
    return health;
  }
  Scorer scorer(&health);
  if (run.memory_errors > 0 || run.compute_errors > 0 || run.nan_count > 0) {
    health.disqualified = true;
    if (run.memory_errors > 0) {
      scorer.Add("memory_errors", 100, fmt::format("{} reads of memory came back wrong", run.memory_errors));
    }
    if (run.compute_errors > 0) {
      scorer.Add("compute_errors", 100, fmt::format("{} wrong result elements", run.compute_errors));
    }
    if (run.nan_count > 0) {
      scorer.Add("nan", 100, fmt::format("{} NaN/Inf result elements", run.nan_count));
    }
  }
  scorer.Throughput(run, reference);
  const bool downtrained = std::any_of(run.checks.begin(), run.checks.end(), [](const Check& c) {
    return c.reason == "pcie_downtrained";
  });
  for (const Check& check : run.checks) scorer.FromCheck(check, downtrained);

  double penalty = 0;
  for (const HealthFactor& f : health.factors) penalty += f.penalty;
  health.score = health.disqualified ? 0 : std::clamp(static_cast<int>(std::lround(100 - penalty)), 0, 100);
  health.verdict = VerdictForScore(health.score);
  return health;
}

}  // namespace gpuherd::burnin
