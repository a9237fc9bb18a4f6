// Early stopping of a sweep's points by their objective metric: pure
// decisions from the points' metric histories (no I/O, no clock), so the
// daemon reaches the same decision again after a restart.
//
// ASHA (asynchronous successive halving, Li et al. 2020): rungs at steps
// grace · reduction^k (k = 0, 1, ...). A point reaches a rung with its first
// metric line at or past the rung's step; its value there is the best value
// of its lines up to that one (the objective's own measure, and robust to
// a noisy per-step metric, where the single latest value ranks points almost
// at random). That value is ranked among the values of the points that
// reached that rung before it, itself included; it goes on only when it is in the top ceil(n / reduction) of
// those n. Rounding up lets the first point at a rung go on, as asynchronous
// promotion must: nobody waits for a rung to fill. Arrivals are ordered by
// the time of the metric line, then by point index, so the decision for a
// rung is fixed once the point reaches it.
// (The line's time is the job's own "time" field where it writes one.)
//
// Median stopping rule (Google Vizier, Golovin et al. 2017): a point is
// stopped at step s (s >= grace) when its best value by step s is strictly
// worse than the median, over the completed points, of the running average
// of each one's values reported up to step s. At least `min_completed`
// completed points with a value by step s are needed; until then nothing
// stops.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace gpuherd::pipeline {

enum class ObjectiveMode { kMin, kMax };

struct Objective {
  std::string metric;
  ObjectiveMode mode = ObjectiveMode::kMin;
};

struct EarlyStopPolicy {
  enum class Kind { kAsha, kMedian };
  Kind kind = Kind::kAsha;
  int64_t grace = 1;      // steps before the first decision (ASHA: the first rung)
  int reduction = 3;      // ASHA: keep the top 1/reduction at each rung (>= 2)
  int min_completed = 3;  // median: completed points needed before anything stops
};

// One metric line's objective value.
struct Observation {
  int64_t step = 0;
  double value = 0;  // NaN ranks worst
  TimeMs at = 0;     // when the line was read
};

struct PointHistory {
  int point = 0;                    // the sweep's point index
  std::vector<Observation> values;  // in the order they were written
  bool completed = false;           // ran to its end and succeeded
};

struct StopDecision {
  bool stop = false;
  int64_t at_step = 0;  // the rung (ASHA) or the step (median) that decided
  std::string reason;   // for people: the rank or the median it was compared with
};

// Whether `point` (an index into `points`) should stop now.
StopDecision DecideEarlyStop(const EarlyStopPolicy& policy, ObjectiveMode mode,
                             const std::vector<PointHistory>& points, size_t point);

// ASHA's rung steps up to and including the first at or past `max_step`.
std::vector<int64_t> AshaRungs(const EarlyStopPolicy& policy, int64_t max_step);

// True when `a` is strictly better than `b` (NaN is worse than any number).
bool Better(double a, double b, ObjectiveMode mode);

// Ranks by the objective: 1 for the best value, equal values sharing a
// rank, 0 for points without a value. Indexed like `values`.
std::vector<int> RankValues(const std::vector<std::optional<double>>& values, ObjectiveMode mode);

}  // namespace gpuherd::pipeline
