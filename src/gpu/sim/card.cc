#include "gpu/sim/card.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "gpu/xid.h"

namespace gpuherd::gpu::sim {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;
// A failed fan (or the chassis airflow of a passive card) multiplies the
// thermal resistance: at full power the card would settle far over its limit.
constexpr double kFanFailureResistanceScale = 2.5;
// Software thermal slowdown ramps the clocks down over the last few degrees
// before the slowdown limit; at the limit hardware slowdown halves them.
constexpr double kSwThermalMarginC = 5;
constexpr double kSwThermalMinFactor = 0.7;
constexpr double kHwThermalFactor = 0.5;
// The power cap engages near the limit and holds the clocks between base and
// boost, as cards running flat out do.
constexpr double kPowerCapOnset = 0.95;
constexpr double kMemUtilPerUtil = 0.6;
constexpr double kPowerNoise = 0.01;
constexpr double kPcieNoise = 0.05;
// Fraction of the link's bandwidth a fully loaded GPU moves, each way.
constexpr double kPcieRxPerUtil = 0.20, kPcieRxIdle = 0.002;
constexpr double kPcieTxPerUtil = 0.06, kPcieTxIdle = 0.001;
constexpr double kFanMinPct = 30, kFanRampStartC = 45, kFanFullBelowSlowdownC = 10;
constexpr TimeMs kForever = std::numeric_limits<TimeMs>::max();

// GB/s per lane for PCIe generations 1-5, after line encoding.
double LaneGbs(int gen) {
  static constexpr double kLane[] = {0, 0.25, 0.5, 0.985, 1.969, 3.938};
  return kLane[std::clamp(gen, 1, 5)];
}

double ForcedFactor(uint64_t reason) {
  switch (reason) {
    case throttle::kHwPowerBrakeSlowdown: return 0.3;
    case throttle::kHwSlowdown:
    case throttle::kHwThermalSlowdown: return 0.5;
    default: return 0.8;  // software power cap or thermal slowdown
  }
}

// Events per fault so far: a one-off count, or one at the start and then one
// every 1/rate minutes while it lasts.
uint64_t CountSoFar(const Fault& fault, TimeMs begin, TimeMs end, TimeMs now) {
  if (now < begin) return 0;
  if (fault.count > 0) return fault.count;
  const double minutes = static_cast<double>(std::min(now, end) - begin) / kMinuteMs;
  return 1 + static_cast<uint64_t>(std::floor(fault.rate_per_min * minutes));
}

// Events so far of an accelerating rate: `rate_per_min` at the start,
// doubling every `doubling`, capped at kMaxAcceleratingRate. It stops at the
// end, or with `fades` recedes linearly to nothing over the same time.
constexpr double kMaxAcceleratingRate = 1000;  // per minute
uint64_t AcceleratingCount(const Fault& fault, TimeMs begin, TimeMs end, TimeMs now) {
  if (now < begin) return 0;
  const double d = static_cast<double>(fault.doubling) / kMinuteMs;
  const double r0 = fault.rate_per_min;
  const double x_cap = r0 >= kMaxAcceleratingRate ? 0 : d * std::log2(kMaxAcceleratingRate / r0);
  auto rising = [&](double x) {  // events in the first x minutes
    const double xc = std::min(x, x_cap);
    return r0 * d / std::log(2.0) * (std::exp2(xc / d) - 1) + kMaxAcceleratingRate * (x - xc);
  };
  auto rate_at = [&](double x) { return std::min(kMaxAcceleratingRate, r0 * std::exp2(x / d)); };
  const double span = static_cast<double>(end - begin) / kMinuteMs;
  const double x = static_cast<double>(now - begin) / kMinuteMs;
  double count = rising(std::min(x, span));
  if (x > span && fault.fades) {
    const double y = std::min(x - span, span);
    count += rate_at(span) * (y - y * y / (2 * span));
  }
  return static_cast<uint64_t>(std::floor(count));
}

}  // namespace

Card::Card(CardSetup setup)
    : model_(*setup.model),
      label_(std::move(setup.label)),
      ambient_c_(setup.ambient_c),
      resistance_c_per_w_(setup.model->thermal_resistance_c_per_w * setup.thermal_scale),
      rng_(setup.noise_seed) {
  for (Fault& fault : setup.faults) faults_.push_back({std::move(fault), 0, 0, false});
}

void Card::Start(TimeMs start) {
  last_ = start;
  temp_c_ = ambient_c_ + model_.idle_power_w * resistance_c_per_w_;
  reported_temp_c_ = temp_c_;
  for (ScheduledFault& f : faults_) {
    f.begin = start + f.fault.at;
    f.end = f.fault.duration ? f.begin + *f.fault.duration : kForever;
  }
}

void Card::Post(TimeMs time, int xid) {
  pending_xids_.push_back({time, xid, XidDescription(xid)});
}

Card::Effects Card::ApplyFaults(TimeMs now) {
  Effects fx;
  const double tau_ms = model_.thermal_time_constant_s * kSecondMs;
  for (ScheduledFault& f : faults_) {
    const Fault& fault = f.fault;
    const bool active = now >= f.begin && now < f.end;
    switch (fault.kind) {
      case FaultKind::kOverheat:
        if (active) fx.overheat_c = fault.temp_c.value_or(model_.temp_slowdown_c + 1);
        break;
      case FaultKind::kTempSlope:
        // A closed form of time, so that any sampling sees the same curve:
        // rises while active, then fades with the heatsink's time constant.
        if (now >= f.begin) {
          const double rise_ms = static_cast<double>(std::min(now, f.end) - f.begin);
          double extra = fault.rate_per_min * rise_ms / kMinuteMs;
          if (now >= f.end) extra *= std::exp(-static_cast<double>(now - f.end) / tau_ms);
          fx.slope_extra_c += extra;
        }
        break;
      case FaultKind::kEccSbe:
        fx.sbe += CountSoFar(fault, f.begin, f.end, now);
        break;
      case FaultKind::kPcieReplay:
        fx.replays += CountSoFar(fault, f.begin, f.end, now);
        break;
      case FaultKind::kEccDbe:
        if (!f.fired && now >= f.begin) {
          f.fired = true;
          ++dbe_;
          memory_repair_pending_ = true;
          Post(f.begin, 48);
        }
        break;
      case FaultKind::kXid:
        if (!f.fired && now >= f.begin) {
          f.fired = true;
          Post(f.begin, fault.xid);
          if (fault.xid == 79) fx.falls_off_bus = true;
        }
        break;
      case FaultKind::kPcieDownTrain:
        if (active) {
          fx.pcie_gen = fault.pcie_gen;
          fx.pcie_width = fault.pcie_width;
        }
        break;
      case FaultKind::kFanFailure:
        fx.fan_failed = fx.fan_failed || active;
        break;
      case FaultKind::kThrottle:
        if (active) {
          fx.forced_reasons |= fault.throttle_reason;
          fx.forced_factor = std::min(fx.forced_factor, ForcedFactor(fault.throttle_reason));
        }
        break;
      case FaultKind::kUnresponsive:
        fx.unresponsive = fx.unresponsive || active;
        break;
      case FaultKind::kSbeAccelerating:
        fx.sbe += AcceleratingCount(fault, f.begin, f.end, now);
        break;
      case FaultKind::kReplayAccelerating:
        fx.replays += AcceleratingCount(fault, f.begin, f.end, now);
        break;
      case FaultKind::kFanWear:
        fx.fan_wear = std::max(fx.fan_wear, fault.peak * Envelope(f, now));
        break;
      case FaultKind::kClockUnstable:
        fx.clock_swing = std::max(fx.clock_swing, fault.amount * Envelope(f, now));
        break;
      case FaultKind::kUnderclock:
        fx.underclock = std::min(fx.underclock, fault.factor);
        break;
      case FaultKind::kTransientDrop:
        break;  // acts on load swings (SetLoad)
      case FaultKind::kStuckBits:
      case FaultKind::kComputeErrors:
      case FaultKind::kNan:
      case FaultKind::kSlow:
        break;  // compute-side: the simulated compute device shows them
    }
  }
  return fx;
}

double Card::Envelope(const ScheduledFault& f, TimeMs now) {
  if (now < f.begin) return 0;
  const double span = static_cast<double>(f.end - f.begin);
  if (now < f.end) return static_cast<double>(now - f.begin) / span;
  if (!f.fault.fades) return 1;
  return std::max(0.0, 1.0 - static_cast<double>(now - f.end) / span);
}

double Card::ThermalFactor(double temp_c, uint64_t* reasons) const {
  const double slowdown = model_.temp_slowdown_c;
  if (temp_c >= slowdown) {
    *reasons |= throttle::kSwThermalSlowdown | throttle::kHwThermalSlowdown;
    return kHwThermalFactor;
  }
  if (temp_c >= slowdown - kSwThermalMarginC) {
    *reasons |= throttle::kSwThermalSlowdown;
    const double depth = (temp_c - (slowdown - kSwThermalMarginC)) / kSwThermalMarginC;
    return 1.0 - (1.0 - kSwThermalMinFactor) * depth;
  }
  return 1.0;
}

void Card::SetLoad(const Load& load) {
  const bool swing = std::abs(load.util - load_.util) >= 0.5;
  load_ = load;
  if (!swing || lost_) return;
  for (const ScheduledFault& f : faults_) {
    if (f.fault.kind != FaultKind::kTransientDrop || last_ < f.begin || last_ >= f.end) continue;
    swings_.push_back(last_);
    while (!swings_.empty() && swings_.front() < last_ - kSecondMs) swings_.erase(swings_.begin());
    if (swings_.size() >= f.fault.count) dropped_by_swings_ = true;  // shows at the next reading
    return;
  }
}

Result<GpuSample> Card::Sample(TimeMs now) {
  if (lost_) return Unavailable(label_ + " " + lost_reason_);
  double dt_s = 0;
  if (now > last_) {
    dt_s = static_cast<double>(now - last_) / kSecondMs;
    last_ = now;
  }
  const Effects fx = ApplyFaults(now);
  const double util = std::clamp(load_.util, 0.0, 1.0);
  const double limit = model_.power_limit_w;
  const double dynamic_w = util * (limit - model_.idle_power_w);

  // The step is driven by the power the card drew under the throttling its
  // previous reading showed; with a constant drive the first-order lag below
  // is exact for any step length.
  uint64_t ignored = 0;
  const double drive_factor =
      std::min(ThermalFactor(reported_temp_c_, &ignored), fx.forced_factor);
  const double drive_w = model_.idle_power_w + dynamic_w * drive_factor;
  // A worn fan cools less, up to a failed fan's loss at full wear.
  const double resistance =
      resistance_c_per_w_ *
      (fx.fan_failed ? kFanFailureResistanceScale
                     : 1.0 + (kFanFailureResistanceScale - 1.0) * fx.fan_wear);
  const double steady_c = ambient_c_ + drive_w * resistance;
  temp_c_ = steady_c + (temp_c_ - steady_c) *
                           std::exp(-dt_s / model_.thermal_time_constant_s);
  if (fx.overheat_c) temp_c_ = std::max(temp_c_, *fx.overheat_c);
  energy_j_ += drive_w * dt_s;
  const double temp_c = temp_c_ + fx.slope_extra_c;
  reported_temp_c_ = temp_c;

  if (temp_c >= model_.temp_shutdown_c) {
    Post(now, 79);
    lost_ = true;
    lost_reason_ = "shut down at its shutdown temperature (" +
                   std::to_string(static_cast<int>(model_.temp_shutdown_c)) +
                   " °C) and fell off the bus (XID 79)";
  } else if (dropped_by_swings_) {
    Post(now, 79);
    lost_ = true;
    lost_reason_ = "fell off the bus (XID 79) under full/idle load swings: a weak power stage";
  } else if (fx.falls_off_bus) {
    lost_ = true;
    lost_reason_ = "has fallen off the bus (XID 79) and no longer answers";
  }
  if (fx.unresponsive) {
    return Unavailable(label_ + " does not answer (simulated unresponsive fault)");
  }

  uint64_t reasons = fx.forced_reasons;
  const double thermal = ThermalFactor(temp_c, &reasons);
  const double perf = std::min(thermal, fx.forced_factor);
  double power_w = model_.idle_power_w + dynamic_w * perf;
  double clock_factor = perf;
  // Unstable clocks: under load the SM clock dips by up to the swing and the
  // power follows it. Drawn only then, so other cards' noise is unchanged.
  double clock_dip = 0;
  if (fx.clock_swing > 0 && util > 0) {
    clock_dip = fx.clock_swing * 0.5 * (1 + rng_.Symmetric());
    power_w = model_.idle_power_w + dynamic_w * perf * (1 - clock_dip);
  }
  if (util > 0 && fx.underclock < 1) {
    // Behind its peers: a lower clock and the power that goes with it.
    clock_factor *= fx.underclock;
    power_w = model_.idle_power_w + (power_w - model_.idle_power_w) * fx.underclock;
  }
  if (util > 0 && power_w >= kPowerCapOnset * limit) {
    reasons |= throttle::kSwPowerCap;
    const double depth = std::min(1.0, (power_w / limit - kPowerCapOnset) / (1 - kPowerCapOnset));
    const double base_ratio =
        static_cast<double>(model_.base_sm_clock_mhz) / model_.max_sm_clock_mhz;
    clock_factor = std::min(clock_factor, 1.0 - 0.5 * (1.0 - base_ratio) * depth);
  }

  GpuSample s;
  s.time = now;
  s.gpu_util_pct = util * 100;
  s.mem_util_pct = util * kMemUtilPerUtil * 100;
  uint64_t load_mem = load_.mem_bytes;
  if (load_mem == 0) {
    for (const GpuProcess& p : load_.processes) load_mem += p.used_memory_bytes;
  }
  const uint64_t reserve = std::min<uint64_t>(model_.memory_bytes / 64, 512 * kMiB);
  s.mem_used_bytes = std::min(model_.memory_bytes, reserve + load_mem);
  s.mem_total_bytes = model_.memory_bytes;
  s.temp_c = temp_c;
  // The noise of a reading never takes it past the limit: the card's power
  // controller holds its average there, and a reading above it looks broken.
  s.power_w = std::clamp(power_w * (1 + kPowerNoise * rng_.Symmetric()), 0.0, limit);
  s.power_limit_w = limit;
  s.energy_mj = static_cast<uint64_t>(std::llround(energy_j_ * 1000));
  if (util <= 0) {
    reasons |= throttle::kGpuIdle;
    s.sm_clock_mhz = model_.idle_sm_clock_mhz;
    s.mem_clock_mhz = model_.idle_mem_clock_mhz;
  } else {
    s.sm_clock_mhz = std::max(
        model_.idle_sm_clock_mhz,
        static_cast<int>(std::lround(model_.max_sm_clock_mhz * clock_factor * (1 - clock_dip))));
    s.mem_clock_mhz = model_.max_mem_clock_mhz;
  }
  s.throttle_reasons = reasons;
  if (model_.has_fan) {
    const double full_c = model_.temp_slowdown_c - kFanFullBelowSlowdownC;
    const double ramp = (temp_c - kFanRampStartC) / (full_c - kFanRampStartC);
    double fan = std::clamp(kFanMinPct + (100 - kFanMinPct) * ramp, kFanMinPct, 100.0);
    // A worn bearing: the fan falls short of its target and wobbles.
    if (fx.fan_wear > 0) {
      fan = std::clamp(fan * (1 - 0.5 * fx.fan_wear) + 10 * fx.fan_wear * rng_.Symmetric(), 0.0,
                       100.0);
    }
    s.fan_pct = fx.fan_failed ? 0.0 : fan;
  }
  const int gen = fx.pcie_gen.value_or(model_.max_pcie_gen);
  const int width = fx.pcie_width.value_or(model_.max_pcie_width);
  s.pcie_gen = gen;
  s.pcie_width = width;
  const double link_kbps = LaneGbs(gen) * width * 1e6;
  s.pcie_rx_kbps = link_kbps * (kPcieRxIdle + kPcieRxPerUtil * util) *
                   (1 + kPcieNoise * rng_.Symmetric());
  s.pcie_tx_kbps = link_kbps * (kPcieTxIdle + kPcieTxPerUtil * util) *
                   (1 + kPcieNoise * rng_.Symmetric());
  s.pcie_replay_count = fx.replays;
  if (model_.ecc) {
    s.ecc_sbe_volatile = fx.sbe;
    s.ecc_dbe_volatile = dbe_;
    // Ampere and later remap rows; older cards retire pages. NVML reports the
    // other mechanism as not supported.
    if (UsesRowRemapping(model_)) {
      s.remapped_rows_correctable = 0;
      s.remapped_rows_uncorrectable = dbe_;
      s.remapped_rows_pending = memory_repair_pending_;
      s.remapped_rows_failure = false;
    } else {
      s.retired_pages_sbe = 0;
      s.retired_pages_dbe = dbe_;
      s.retired_pages_pending = memory_repair_pending_;
    }
  }
  s.xids = std::move(pending_xids_);
  pending_xids_.clear();
  s.processes = load_.processes;
  return s;
}

}  // namespace gpuherd::gpu::sim
