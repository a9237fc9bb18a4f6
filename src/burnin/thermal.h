// The temperature curve of a run: its summary (maximum, time to steady state,
// the steepest rise, throttling) and level 3's thermal checks. Private to the
// burn-in; pure functions of the sampled points.
#pragma once

#include <optional>
#include <vector>

#include "burnin/result.h"
#include "core/time.h"

namespace gpuherd::burnin {

// A stress window in curve time (ms since the run's start).
struct StressSpan {
  DurationMs begin = 0, end = 0;
};

struct ThermalAnalysis {
  ThermalSummary summary;
  // °C per minute over the last third of the stress, when it ran long enough
  // to tell a plateau from a climb.
  std::optional<double> end_trend_c_per_min;
  double power_capped_fraction = 0;  // stress samples at the software power cap
  int stress_samples = 0;
};

ThermalAnalysis AnalyzeCurve(const std::vector<TempPoint>& curve, std::optional<StressSpan> stress);

// "thermal.headroom", "thermal.trend" and "throttle" for a run that stressed
// the card; `slowdown_c` is the card's own slowdown temperature.
std::vector<Check> ThermalChecks(const ThermalAnalysis& analysis, std::optional<double> slowdown_c,
                                 DurationMs stress_length);

// Keeps at most `max_points` of a long curve, always keeping the hottest.
std::vector<TempPoint> ThinCurve(std::vector<TempPoint> curve, size_t max_points);

}  // namespace gpuherd::burnin
