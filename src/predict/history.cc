#include "predict/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "gpu/sim/card.h"
#include "gpu/catalog.h"
#include "telemetry/rollup.h"

namespace gpuherd::predict {
namespace {

using gpu::sim::Fault;
using gpu::sim::FaultKind;
using gpu::GpuModel;
using gpu::sim::SplitMix64;

constexpr int kMinutesPerDay = 24 * 60;
// A repaired or replaced card comes back after this long.
constexpr int kRepairMinutes = 120;
// Signs start no earlier than this after a card (re)starts, so that every
// sign has normal readings before it.
constexpr int kSettleMinutes = 90;

class Rng {
 public:
  explicit Rng(uint64_t seed) : mix_(seed) {}
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(mix_.Next() >> 11) * 0x1.0p-53;
  }
  int Int(int lo, int hi) { return lo + static_cast<int>(mix_.Next() % (hi - lo + 1)); }
  bool Chance(double p) { return Uniform(0, 1) < p; }
  double Exponential(double mean) { return -mean * std::log(1 - Uniform(0, 1)); }
  uint64_t Next() { return mix_.Next(); }

 private:
  SplitMix64 mix_;
};

// Precursors a model can show: fans only on cards with one, ECC errors only
// on ECC cards.
std::vector<FaultKind> SignKinds(const GpuModel& model) {
  std::vector<FaultKind> kinds = {FaultKind::kTempSlope, FaultKind::kReplayAccelerating,
                                  FaultKind::kClockUnstable};
  if (model.has_fan) kinds.push_back(FaultKind::kFanWear);
  if (model.ecc) kinds.push_back(FaultKind::kSbeAccelerating);
  return kinds;
}

// What the fault after a sign is called in a series.
const char* FaultAfter(FaultKind sign) {
  switch (sign) {
    case FaultKind::kFanWear: return "fan_failure";
    case FaultKind::kTempSlope: return "overheat";
    case FaultKind::kSbeAccelerating: return "ecc_dbe";
    case FaultKind::kReplayAccelerating: return "xid_79";
    default: return "xid_62";
  }
}

// A sign lasting `minutes`: a full one that ends in a fault, or a weaker one
// that fades (a false alarm). A full sign is set by how strong it is when the
// fault strikes; a fading one peaks below what full signs show 40 minutes
// before their fault, as corrected errors that come and go stay rarer than
// those of memory about to fail.
Fault MakeSign(FaultKind kind, int gpu, DurationMs at, int minutes, bool fades, Rng& rng) {
  Fault f;
  f.kind = kind;
  f.gpu = gpu;
  f.at = at;
  f.duration = static_cast<DurationMs>(minutes) * kMinuteMs;
  f.fades = fades;
  switch (kind) {
    case FaultKind::kFanWear:
      f.peak = fades ? rng.Uniform(0.1, 0.3) : 1.0;
      break;
    case FaultKind::kTempSlope:  // the excess at the end, spread over the sign
      f.rate_per_min = (fades ? rng.Uniform(2, 6) : rng.Uniform(15, 30)) / minutes;
      break;
    case FaultKind::kSbeAccelerating:
    case FaultKind::kReplayAccelerating:
      if (fades) {
        f.rate_per_min = rng.Uniform(0.02, 0.08);
        f.doubling = static_cast<DurationMs>(rng.Uniform(25, 45) * kMinuteMs);
      } else {
        const double doubling_min = rng.Uniform(8, 15);
        const double rate_at_fault = rng.Uniform(15, 40);
        f.doubling = static_cast<DurationMs>(doubling_min * kMinuteMs);
        f.rate_per_min = rate_at_fault / std::exp2(minutes / doubling_min);
      }
      break;
    case FaultKind::kClockUnstable:
      f.amount = fades ? rng.Uniform(0.02, 0.06) : rng.Uniform(0.15, 0.3);
      break;
    default:
      break;
  }
  return f;
}

std::string SeriesUuid(uint64_t seed, int gpu, int life) {
  SplitMix64 mix(seed * 0x100000001B3ull + static_cast<uint64_t>(gpu) * 131 + life);
  const uint64_t a = mix.Next(), b = mix.Next();
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xffff),
                static_cast<unsigned>(a & 0xffff), static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xffffffffffffull));
  return buf;
}

// One planned life of a slot: [begin, end) in minutes from the start.
struct Life {
  int begin = 0, end = 0;
  std::vector<Fault> faults;   // `at` relative to `begin`
  std::vector<Sign> signs;
  std::optional<int> fault_minute;
  std::string fault_kind;
  bool sudden = false;
};

// Plans the lives of one slot: signs, faults and background noise.
std::vector<Life> PlanSlot(const HistoryOptions& o, const GpuModel& model, int gpu, Rng& rng,
                           int* faults, int* false_alarms) {
  const int total = o.days * kMinutesPerDay;
  const double event_rate = (o.faults_per_gpu_day + o.false_alarms_per_gpu_day) / kMinutesPerDay;
  const double fault_share =
      o.faults_per_gpu_day / std::max(1e-9, o.faults_per_gpu_day + o.false_alarms_per_gpu_day);
  const std::vector<FaultKind> kinds = SignKinds(model);
  std::vector<Life> lives;
  Life life;
  int cursor = kSettleMinutes;
  auto at_ms = [&](int minute) { return static_cast<DurationMs>(minute - life.begin) * kMinuteMs; };
  auto to_time = [&](int minute) { return o.start + static_cast<TimeMs>(minute) * kMinuteMs; };
  while (true) {
    const int start = cursor + static_cast<int>(rng.Exponential(1.0 / std::max(1e-12, event_rate)));
    const bool fault = rng.Chance(fault_share);
    const FaultKind kind = kinds[rng.Int(0, static_cast<int>(kinds.size()) - 1)];
    if (fault) {
      const bool sudden = rng.Chance(o.sudden_share);
      const int lead = sudden ? 0 : rng.Int(60, 150);
      const int at = start + lead;
      if (at >= total) break;
      if (!sudden) {
        life.faults.push_back(MakeSign(kind, gpu, at_ms(start), lead, false, rng));
        life.signs.push_back({kind, to_time(start), to_time(at), false});
      }
      life.end = at;
      life.fault_minute = at;
      life.sudden = sudden;
      life.fault_kind = sudden ? (model.ecc && rng.Chance(0.5) ? "ecc_dbe" : "xid_79")
                               : FaultAfter(kind);
      ++*faults;
      lives.push_back(std::move(life));
      life = Life{};
      life.begin = at + kRepairMinutes;
      cursor = life.begin + kSettleMinutes;
    } else {
      const int minutes = rng.Int(20, 90);
      if (start + 2 * minutes >= total) break;
      life.faults.push_back(MakeSign(kind, gpu, at_ms(start), minutes, true, rng));
      life.signs.push_back({kind, to_time(start), to_time(start + minutes), true});
      ++*false_alarms;
      cursor = start + 2 * minutes + 30;
    }
  }
  if (life.begin < total) {
    life.end = total;
    lives.push_back(std::move(life));
  }
  // Noise that is no sign of anything: application XIDs, single corrected
  // errors and replays.
  for (Life& l : lives) {
    const double days = static_cast<double>(l.end - l.begin) / kMinutesPerDay;
    auto sprinkle = [&](double per_day, auto make) {
      const int n = static_cast<int>(std::floor(days * per_day + rng.Uniform(0, 1)));
      for (int i = 0; i < n; ++i) {
        Fault f = make();
        f.gpu = gpu;
        f.at = static_cast<DurationMs>(rng.Uniform(0, l.end - l.begin)) * kMinuteMs;
        l.faults.push_back(f);
      }
    };
    sprinkle(0.3, [&] {
      Fault f;
      f.kind = FaultKind::kXid;
      f.xid = rng.Chance(0.5) ? 13 : 31;
      return f;
    });
    sprinkle(0.4, [&] {
      Fault f;
      f.kind = FaultKind::kPcieReplay;
      f.count = static_cast<uint64_t>(rng.Int(1, 4));
      return f;
    });
    if (model.ecc) {
      sprinkle(0.5, [&] {
        Fault f;
        f.kind = FaultKind::kEccSbe;
        f.count = static_cast<uint64_t>(rng.Int(1, 3));
        return f;
      });
    }
  }
  return lives;
}

// Jobs come and go: idle gaps, then a job at a steady load for hours. A job
// starts and stops at any reading, not on the minute, so some minutes hold
// idle and loaded readings, as the daemon sees them. One idle gap in five
// lasts hours: a card that cooled down then warms up under a job, healthy or
// not, so that a warm-up is no sign of anything.
class LoadPlan {
 public:
  LoadPlan(uint64_t seed, int samples_per_minute) : rng_(seed), per_minute_(samples_per_minute) {}
  // The load at reading `sample` (samples_per_minute readings a minute).
  double UtilAt(int64_t sample) {
    while (sample >= next_change_) {
      busy_ = !busy_;
      util_ = busy_ ? rng_.Uniform(0.6, 1.0) : 0.0;
      int lo = 60, hi = 480;
      if (!busy_) {
        const bool long_idle = rng_.Chance(0.2);
        lo = long_idle ? 60 : 10;
        hi = long_idle ? 240 : 120;
      }
      next_change_ += rng_.Int(lo * per_minute_, hi * per_minute_);
    }
    return util_;
  }

 private:
  Rng rng_;
  int per_minute_;
  bool busy_ = true;  // flipped at the first reading: starts idle
  double util_ = 0;
  int64_t next_change_ = 0;
};

}  // namespace

Result<History> GenerateHistory(const HistoryOptions& o) {
  if (o.gpus < 1 || o.gpus > 4096) return InvalidArgument("gpus must be between 1 and 4096");
  if (o.days < 1 || o.days > 365) return InvalidArgument("days must be between 1 and 365");
  if (o.samples_per_minute < 1 || o.samples_per_minute > 60) {
    return InvalidArgument("samples_per_minute must be between 1 and 60");
  }
  std::vector<const GpuModel*> models;
  const std::vector<std::string> keys =
      o.models.empty() ? std::vector<std::string>{"h100-sxm", "rtx3090", "a100-40gb", "gtx1070ti"}
                       : o.models;
  for (const std::string& key : keys) {
    auto model = gpu::LookupModel(key);
    if (!model.ok()) return model.status();
    models.push_back(*model);
  }

  History history;
  const DurationMs step = kMinuteMs / o.samples_per_minute;
  for (int gpu = 0; gpu < o.gpus; ++gpu) {
    const GpuModel& model = *models[gpu % models.size()];
    Rng rng(o.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(gpu) + 1);
    std::vector<Life> lives = PlanSlot(o, model, gpu, rng, &history.faults, &history.false_alarms);
    LoadPlan load(rng.Next(), o.samples_per_minute);
    const double ambient = rng.Uniform(24, 32);
    const double thermal_scale = rng.Uniform(0.9, 1.2);
    for (size_t n = 0; n < lives.size(); ++n) {
      Life& life = lives[n];
      Series series;
      series.uuid = SeriesUuid(o.seed, gpu, static_cast<int>(n));
      series.gpu = gpu;
      series.model = std::string(model.key);
      series.slowdown_c = model.temp_slowdown_c;
      series.signs = life.signs;
      series.sudden = life.sudden;
      series.fault_kind = life.fault_kind;
      if (life.fault_minute) {
        series.fault_time = o.start + static_cast<TimeMs>(*life.fault_minute) * kMinuteMs;
      }
      gpu::sim::CardSetup setup;
      setup.model = &model;
      setup.label = "GPU " + std::to_string(gpu);
      setup.ambient_c = ambient;
      setup.thermal_scale = thermal_scale;
      setup.noise_seed = rng.Next();
      setup.faults = std::move(life.faults);
      gpu::sim::Card card(std::move(setup));
      const TimeMs begin = o.start + static_cast<TimeMs>(life.begin) * kMinuteMs;
      card.Start(begin);
      telemetry::Rollup rollup(series.uuid);
      series.minutes.reserve(life.end - life.begin);
      for (int m = life.begin; m < life.end; ++m) {
        const TimeMs minute = o.start + static_cast<TimeMs>(m) * kMinuteMs;
        for (int k = 0; k < o.samples_per_minute; ++k) {
          const TimeMs t = minute + k * step;
          card.SetLoad({load.UtilAt(static_cast<int64_t>(m) * o.samples_per_minute + k), 0, {}});
          auto sample = card.Sample(t);
          auto closed = sample.ok() ? rollup.AddSample(*sample) : rollup.AddFailure(t);
          if (closed) series.minutes.push_back(std::move(*closed));
        }
      }
      if (auto last = rollup.Flush()) series.minutes.push_back(std::move(*last));
      history.series.push_back(std::move(series));
    }
  }
  return history;
}

}  // namespace gpuherd::predict
