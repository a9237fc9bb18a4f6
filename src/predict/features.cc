#include "predict/features.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "gpu/types.h"

namespace gpuherd::predict {
namespace {

using store::RollupMetric;
using store::RollupRecord;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
// Temperatures are taken against a typical machine-room inlet; what matters
// is how the ratio moves, not its level.
constexpr double kReferenceC = 25;
constexpr int kEdgeMinutes = 15;
constexpr int kHeadroomMinutes = 5;

const char* const kNames[kFeatureCount] = {
    "temp_mean",        "temp_headroom",        "temp_slope",       "temp_slope_15",
    "temp_creep",       "thermal_ratio_change", "fan_mean",         "fan_per_degree_change",
    "fan_wobble",       "util_mean",            "sbe_window",       "sbe_15",
    "sbe_accel",        "replay_window",        "replay_15",        "replay_accel",
    "thermal_throttle_share", "power_cap_share", "power_wobble",    "clock_wobble_15",
    "clock_wobble",     "clock_wobble_change",  "xid_window",       "failures_window",
    "dbe_window",
};

std::optional<double> Mean(const RollupRecord& r, RollupMetric m) {
  const auto& s = r.stat(m);
  if (!s) return std::nullopt;
  return s->mean;
}

// (max - min) / mean within the minute; nullopt when unknown or near zero.
std::optional<double> Spread(const RollupRecord& r, RollupMetric m) {
  const auto& s = r.stat(m);
  if (!s || s->mean <= 1e-6) return std::nullopt;
  return (s->max - s->min) / s->mean;
}

float MeanOf(const std::vector<double>& v) {
  if (v.empty()) return kNan;
  double sum = 0;
  for (double x : v) sum += x;
  return static_cast<float>(sum / v.size());
}

// Least-squares slope of y over x; NaN with fewer than 3 points.
float Slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 3) return kNan;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += x[i], my += y[i];
  mx /= n, my /= n;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  return sxx <= 0 ? kNan : static_cast<float>(sxy / sxx);
}

// The time coefficient of temp = a + b·power + c·t: how fast the card heats
// at constant power. Falls back to the plain slope when the power hardly
// varies (the regression is then singular).
float Creep(const std::vector<double>& t, const std::vector<double>& p,
            const std::vector<double>& y) {
  const size_t n = t.size();
  if (n < 5) return kNan;
  double mt = 0, mp = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mt += t[i], mp += p[i], my += y[i];
  mt /= n, mp /= n, my /= n;
  double stt = 0, spp = 0, stp = 0, sty = 0, spy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dt = t[i] - mt, dp = p[i] - mp, dy = y[i] - my;
    stt += dt * dt, spp += dp * dp, stp += dt * dp, sty += dt * dy, spy += dp * dy;
  }
  const double det = stt * spp - stp * stp;
  if (stt <= 0) return kNan;
  if (spp < 1e-6 * n || det <= 1e-9 * stt * spp) return static_cast<float>(sty / stt);
  return static_cast<float>((sty * spp - spy * stp) / det);
}

// Growth of a cumulative counter from the minute before `i` to `i` (a reset
// counts from 0); 0 when either is unknown.
double CounterDelta(std::span<const RollupRecord> m, size_t i, size_t first,
                    std::optional<uint64_t> RollupRecord::*counter) {
  const auto& now = m[i].*counter;
  if (!now) return 0;
  if (i == 0 || i <= first) return 0;
  const auto& before = m[i - 1].*counter;
  if (!before) return 0;
  return *now >= *before ? static_cast<double>(*now - *before) : static_cast<double>(*now);
}

}  // namespace

const char* FeatureName(Feature f) {
  const int i = static_cast<int>(f);
  return i >= 0 && i < kFeatureCount ? kNames[i] : "unknown";
}

std::optional<FeatureRow> ExtractFeatures(std::span<const RollupRecord> minutes, size_t end,
                                          const CardFacts& card, const FeatureOptions& options) {
  if (end >= minutes.size()) return std::nullopt;
  const TimeMs last = minutes[end].minute;
  size_t first = end;
  while (first > 0 && minutes[first - 1].minute > last - options.window) --first;
  // The minute before the window gives the first counter delta.
  const size_t counter_base = first > 0 ? first - 1 : first;

  int with_readings = 0;
  for (size_t i = first; i <= end; ++i) with_readings += minutes[i].samples > 0;
  if (with_readings < options.min_minutes) return std::nullopt;

  FeatureRow row;
  row.fill(kNan);
  auto set = [&](Feature f, float v) { row[static_cast<int>(f)] = v; };
  const double minute_of_last = static_cast<double>(last) / kMinuteMs;
  auto age = [&](size_t i) {  // minutes before the window's last minute
    return minute_of_last - static_cast<double>(minutes[i].minute) / kMinuteMs;
  };
  const double edge = std::min<double>(kEdgeMinutes, static_cast<double>(options.window) / kMinuteMs / 2);
  const double window_min = static_cast<double>(options.window) / kMinuteMs;
  auto in_last = [&](size_t i) { return age(i) < edge; };
  auto in_first = [&](size_t i) { return age(i) >= window_min - edge; };

  std::vector<double> t_all, temp_all, power_all, t15, temp15;
  std::vector<double> ratio_first, ratio_last, fan_all, fanpd_first, fanpd_last, fan_spread15;
  std::vector<double> util_all, power_spread, clock_spread, clock_spread15, clock_spread_first;
  double hottest_recent = -1e9;
  int thermal = 0, power_cap = 0, xids = 0, failures = 0;
  double sbe = 0, sbe15 = 0, sbe_prev15 = 0, replay = 0, replay15 = 0, replay_prev15 = 0, dbe = 0;
  for (size_t i = first; i <= end; ++i) {
    const RollupRecord& r = minutes[i];
    const double x = -age(i);
    xids += r.xid_count;
    failures += r.failures;
    const double ds = CounterDelta(minutes, i, counter_base, &RollupRecord::ecc_sbe);
    const double dr = CounterDelta(minutes, i, counter_base, &RollupRecord::pcie_replay_count);
    dbe += CounterDelta(minutes, i, counter_base, &RollupRecord::ecc_dbe);
    sbe += ds, replay += dr;
    if (age(i) < kEdgeMinutes) sbe15 += ds, replay15 += dr;
    else if (age(i) < 2 * kEdgeMinutes) sbe_prev15 += ds, replay_prev15 += dr;
    if (r.samples == 0) continue;
    if (r.throttle_reasons_seen & gpu::throttle::kThermalMask) ++thermal;
    if (r.throttle_reasons_seen & gpu::throttle::kSwPowerCap) ++power_cap;
    const auto temp = Mean(r, RollupMetric::kTempC);
    const auto power = Mean(r, RollupMetric::kPowerW);
    const auto util = Mean(r, RollupMetric::kGpuUtil);
    const auto fan = Mean(r, RollupMetric::kFanPct);
    if (util) util_all.push_back(*util);
    if (temp) {
      t_all.push_back(x);
      temp_all.push_back(*temp);
      power_all.push_back(power.value_or(0));
      if (in_last(i)) t15.push_back(x), temp15.push_back(*temp);
      if (age(i) < kHeadroomMinutes) {
        hottest_recent = std::max(hottest_recent, r.stat(RollupMetric::kTempC)->max);
      }
      if (power && *power > 1) {
        const double ratio = (*temp - kReferenceC) / *power;
        if (in_first(i)) ratio_first.push_back(ratio);
        if (in_last(i)) ratio_last.push_back(ratio);
      }
      if (fan && *temp > kReferenceC + 1) {
        const double per_degree = *fan / (*temp - kReferenceC);
        if (in_first(i)) fanpd_first.push_back(per_degree);
        if (in_last(i)) fanpd_last.push_back(per_degree);
      }
    }
    if (fan) {
      fan_all.push_back(*fan);
      const auto& s = r.stat(RollupMetric::kFanPct);
      if (in_last(i)) fan_spread15.push_back(s->max - s->min);
    }
    // Swings of an idle card's clocks mean nothing, and neither do those of a
    // minute in which a job started or stopped (idle and loaded readings in
    // one minute): only minutes loaded throughout count.
    const auto& util_stat = r.stat(RollupMetric::kGpuUtil);
    if (util_stat && util_stat->min > 5) {
      if (auto s = Spread(r, RollupMetric::kPowerW)) power_spread.push_back(*s);
      if (auto s = Spread(r, RollupMetric::kSmClockMhz)) {
        clock_spread.push_back(*s);
        if (in_last(i)) clock_spread15.push_back(*s);
        if (in_first(i)) clock_spread_first.push_back(*s);
      }
    }
  }
  const float n = static_cast<float>(with_readings);
  set(Feature::kTempMean, MeanOf(temp_all));
  if (card.slowdown_c && hottest_recent > -1e8) {
    set(Feature::kTempHeadroom, static_cast<float>(*card.slowdown_c - hottest_recent));
  }
  set(Feature::kTempSlope, Slope(t_all, temp_all));
  set(Feature::kTempSlope15, Slope(t15, temp15));
  set(Feature::kTempCreep, Creep(t_all, power_all, temp_all));
  if (!ratio_first.empty() && !ratio_last.empty() && MeanOf(ratio_first) > 0) {
    set(Feature::kThermalRatioChange, MeanOf(ratio_last) / MeanOf(ratio_first) - 1);
  }
  set(Feature::kFanMean, MeanOf(fan_all));
  if (!fanpd_first.empty() && !fanpd_last.empty() && MeanOf(fanpd_first) > 0) {
    set(Feature::kFanPerDegreeChange, MeanOf(fanpd_last) / MeanOf(fanpd_first) - 1);
  }
  set(Feature::kFanWobble, MeanOf(fan_spread15));
  set(Feature::kUtilMean, MeanOf(util_all));
  set(Feature::kSbeWindow, static_cast<float>(sbe));
  set(Feature::kSbe15, static_cast<float>(sbe15));
  set(Feature::kSbeAccel, static_cast<float>(std::log1p(sbe15) - std::log1p(sbe_prev15)));
  set(Feature::kReplayWindow, static_cast<float>(replay));
  set(Feature::kReplay15, static_cast<float>(replay15));
  set(Feature::kReplayAccel, static_cast<float>(std::log1p(replay15) - std::log1p(replay_prev15)));
  set(Feature::kThermalThrottleShare, thermal / n);
  set(Feature::kPowerCapShare, power_cap / n);
  set(Feature::kPowerWobble, MeanOf(power_spread));
  set(Feature::kClockWobble15, MeanOf(clock_spread15));
  set(Feature::kClockWobble, MeanOf(clock_spread));
  if (!clock_spread15.empty() && !clock_spread_first.empty()) {
    set(Feature::kClockWobbleChange, MeanOf(clock_spread15) - MeanOf(clock_spread_first));
  }
  set(Feature::kXidWindow, static_cast<float>(xids));
  set(Feature::kFailuresWindow, static_cast<float>(failures));
  set(Feature::kDbeWindow, static_cast<float>(dbe));
  return row;
}

}  // namespace gpuherd::predict
