#include "burnin/thermal.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gpu/types.h"

namespace gpuherd::burnin {
namespace {

// The steepest rise is measured over a minute, so sensor steps do not count.
constexpr DurationMs kSlopeWindow = kMinuteMs;
// The trend is judged on the last third of the stress, and only when the
// stress ran this long: a healthy card is on its plateau by then (heatsinks
// settle within a few minutes), so a climb that goes on means runaway.
constexpr DurationMs kMinStressForTrend = 10 * kMinuteMs;
constexpr double kRunawayCPerMin = 0.75;
constexpr double kSteadyBandC = 1.0;
constexpr DurationMs kPlateauWindow = kMinuteMs;
// Closer than this to the slowdown temperature leaves no margin for a warm
// day or a neighbour card.
constexpr double kLowHeadroomC = 5;
// Throttled for more than this share of the stress is worth a warning.
constexpr double kMaxThrottledFraction = 0.02;
// Reasons that mean heat or the board's power delivery held the clocks back.
// The software power cap is not among them: a card stressed flat out runs at
// its power limit by design.
constexpr uint64_t kHeldBackReasons = gpu::throttle::kThermalMask | gpu::throttle::kHwSlowdown |
                                      gpu::throttle::kHwPowerBrakeSlowdown;

// Least-squares slope in °C per minute.
std::optional<double> Slope(const std::vector<const TempPoint*>& points) {
  double n = 0, st = 0, sy = 0, stt = 0, sty = 0;
  for (const TempPoint* p : points) {
    const double t = static_cast<double>(p->t) / kMinuteMs;
    n += 1;
    st += t;
    sy += *p->temp_c;
    stt += t * t;
    sty += t * *p->temp_c;
  }
  const double denominator = n * stt - st * st;
  if (n < 3 || denominator <= 0) return std::nullopt;
  return (n * sty - st * sy) / denominator;
}

Check Make(const char* name, CheckOutcome outcome, std::string reason, std::string message) {
  Check check;
  check.name = name;
  check.level = 3;
  check.outcome = outcome;
  check.reason = std::move(reason);
  check.message = std::move(message);
  return check;
}

}  // namespace

ThermalAnalysis AnalyzeCurve(const std::vector<TempPoint>& curve, std::optional<StressSpan> stress) {
  ThermalAnalysis a;
  ThermalSummary& s = a.summary;
  std::vector<const TempPoint*> temps;  // every point with a temperature
  for (const TempPoint& p : curve) {
    if (p.power_w) s.max_power_w = std::max(s.max_power_w.value_or(*p.power_w), *p.power_w);
    if (!p.temp_c) continue;
    if (!s.idle_temp_c) s.idle_temp_c = p.temp_c;
    s.max_temp_c = std::max(s.max_temp_c.value_or(*p.temp_c), *p.temp_c);
    temps.push_back(&p);
  }
  // Steepest rise over a minute: each point against the last one at least a
  // minute before it.
  size_t back = 0;
  for (size_t i = 0; i < temps.size(); ++i) {
    while (back + 1 < i && temps[back + 1]->t <= temps[i]->t - kSlopeWindow) ++back;
    const DurationMs dt = temps[i]->t - temps[back]->t;
    if (dt < kSlopeWindow) continue;
    const double slope = (*temps[i]->temp_c - *temps[back]->temp_c) * kMinuteMs / dt;
    s.max_slope_c_per_min = std::max(s.max_slope_c_per_min.value_or(slope), slope);
  }
  if (!stress) return a;

  std::vector<const TempPoint*> during;
  int held_back = 0, capped = 0;
  for (const TempPoint& p : curve) {
    if (p.t < stress->begin || p.t > stress->end) continue;
    ++a.stress_samples;
    held_back += (p.throttle_reasons & kHeldBackReasons) != 0;
    capped += (p.throttle_reasons & gpu::throttle::kSwPowerCap) != 0;
    if (p.temp_c) during.push_back(&p);
  }
  if (a.stress_samples > 0) {
    s.throttled_fraction = static_cast<double>(held_back) / a.stress_samples;
    a.power_capped_fraction = static_cast<double>(capped) / a.stress_samples;
  }
  const DurationMs length = stress->end - stress->begin;
  if (length >= kMinStressForTrend) {
    std::vector<const TempPoint*> last_third;
    for (const TempPoint* p : during) {
      if (p->t >= stress->end - length / 3) last_third.push_back(p);
    }
    a.end_trend_c_per_min = Slope(last_third);
  }
  const bool climbing = a.end_trend_c_per_min && *a.end_trend_c_per_min > kRunawayCPerMin;
  if (!during.empty() && !climbing) {
    double sum = 0;
    int n = 0;
    for (const TempPoint* p : during) {
      if (p->t >= stress->end - kPlateauWindow) {
        sum += *p->temp_c;
        ++n;
      }
    }
    const double plateau = sum / n;
    // The first point after which the temperature stays in the band.
    size_t first = during.size();
    while (first > 0 && std::abs(*during[first - 1]->temp_c - plateau) <= kSteadyBandC) --first;
    if (first < during.size()) {
      s.time_to_steady_s = static_cast<double>(during[first]->t - stress->begin) / kSecondMs;
    }
  }
  return a;
}

std::vector<Check> ThermalChecks(const ThermalAnalysis& a, std::optional<double> slowdown_c,
                                 DurationMs stress_length) {
  std::vector<Check> checks;
  const ThermalSummary& s = a.summary;

  Check headroom = Make("thermal.headroom", CheckOutcome::kPass, "", "");
  if (!s.max_temp_c) {
    headroom = Make("thermal.headroom", CheckOutcome::kSkipped, "not_supported", "no temperature readings");
  } else {
    headroom.values["max_temp_c"] = *s.max_temp_c;
    if (slowdown_c) {
      const double margin = *slowdown_c - *s.max_temp_c;
      headroom.values["slowdown_c"] = *slowdown_c;
      headroom.values["headroom_c"] = margin;
      if (margin <= 0) {
        headroom.outcome = CheckOutcome::kFail;
        headroom.reason = "over_slowdown";
        headroom.message = fmt::format("reached {:.0f} °C, at or over its slowdown temperature "
                                       "({:.0f} °C): clean the heatsink, renew the thermal paste "
                                       "or improve the airflow", *s.max_temp_c, *slowdown_c);
      } else if (margin < kLowHeadroomC) {
        headroom.outcome = CheckOutcome::kWarn;
        headroom.reason = "low_headroom";
        headroom.message = fmt::format("peaked at {:.0f} °C, only {:.0f} °C under its slowdown "
                                       "temperature", *s.max_temp_c, margin);
      }
    }
  }
  checks.push_back(std::move(headroom));

  Check trend = Make("thermal.trend", CheckOutcome::kPass, "", "");
  if (s.max_slope_c_per_min) trend.values["max_slope_c_per_min"] = *s.max_slope_c_per_min;
  if (s.time_to_steady_s) trend.values["time_to_steady_s"] = *s.time_to_steady_s;
  if (!a.end_trend_c_per_min) {
    trend.outcome = CheckOutcome::kSkipped;
    trend.reason = "too_short";
    trend.message = fmt::format("a stress of {} is too short to tell a plateau from a climb; run "
                                "at least {}", FormatDuration(stress_length),
                                FormatDuration(kMinStressForTrend));
  } else {
    trend.values["end_trend_c_per_min"] = *a.end_trend_c_per_min;
    if (*a.end_trend_c_per_min > kRunawayCPerMin) {
      trend.outcome = CheckOutcome::kWarn;
      trend.reason = "thermal_runaway";
      trend.message = fmt::format("still heating by {:.1f} °C/min at the end of the stress, with "
                                  "no plateau: the cooling cannot keep up (dust, dried paste, a "
                                  "failing fan)", *a.end_trend_c_per_min);
    }
  }
  checks.push_back(std::move(trend));

  Check throttle = Make("throttle", CheckOutcome::kPass, "", "");
  throttle.values["throttled_fraction"] = s.throttled_fraction;
  throttle.values["power_capped_fraction"] = a.power_capped_fraction;
  if (s.throttled_fraction > kMaxThrottledFraction) {
    throttle.outcome = CheckOutcome::kWarn;
    throttle.reason = "thermal_throttle";
    throttle.message = fmt::format("held back by heat or hardware slowdown for {:.0f} % of the "
                                   "stress", 100 * s.throttled_fraction);
  }
  checks.push_back(std::move(throttle));
  return checks;
}

std::vector<TempPoint> ThinCurve(std::vector<TempPoint> curve, size_t max_points) {
  if (curve.size() <= max_points || max_points < 3) return curve;
  size_t hottest = 0;
  for (size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].temp_c && (!curve[hottest].temp_c || *curve[i].temp_c > *curve[hottest].temp_c)) {
      hottest = i;
    }
  }
  // Every step-th point leaves room for the hottest and the last.
  const size_t step = (curve.size() + max_points - 3) / (max_points - 2);
  std::vector<TempPoint> thin;
  for (size_t i = 0; i < curve.size(); ++i) {
    if (i % step == 0 || i == hottest || i + 1 == curve.size()) thin.push_back(curve[i]);
  }
  return thin;
}

}  // namespace gpuherd::burnin
