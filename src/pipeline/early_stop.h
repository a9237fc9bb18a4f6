// Early stopping of a sweep's points by their objective metric: pure
// decisions from the points' metric histories (no I/O, no clock), so the
// daemon reaches the same decision again after a restart.
//
// ASHA (asynchronous successive halving, Li et al. 2020): rungs at steps
// grace · reduction^k (k = 0, 1, ...). A point reaches a rung with its first
// metric line at or past the rung's step; its value there is the best value
// of its lines up to that one (the objective's own measure, and robust to
// a noisy per-step metric, where the single latest value ranks points almost
// at random). A point between rung r and r+1 is judged at every round
// against all the values recorded at rung r so far: once there are at least
// `reduction` of them, it stops when its value is outside the top
// floor(n / reduction) of those n (ties share the better rank). Until then
// it goes on, as asynchronous promotion must: nobody waits for a rung to
// fill. Points that all start together thus end as synchronous successive
// halving would; points that come in waves are still judged as they arrive.
//
// Median stopping rule (Google Vizier, Golovin et al. 2017): a point is
// stopped at step s (s >= grace) when its best value by step s is strictly
// worse than the median, over its peers, of the running average of each
// one's values reported up to step s. Peers are the other points that
// completed or have reached step s while still running, so points that run
// together are compared too, not only against finished ones. At least
// `min_completed` peers are needed; until then nothing stops.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/time.h"

namespace gpuherd::pipeline {

enum class ObjectiveMode { kMin, kMax };

// Which of a point's values ranks it: the one at its last logged step (as
// W&B's run summary), or the best it ever logged (which crowns a noisy early
// step). Early stopping compares at rungs either way.
enum class ObjectiveSummary { kLast, kBest };

struct Objective {
  std::string metric;
  ObjectiveMode mode = ObjectiveMode::kMin;
  ObjectiveSummary summary = ObjectiveSummary::kLast;
};

struct EarlyStopPolicy {
  enum class Kind { kAsha, kMedian };
  Kind kind = Kind::kAsha;
  int64_t grace = 1;      // steps before the first decision (ASHA: the first rung)
  int reduction = 3;      // ASHA: keep the top 1/reduction at each rung (>= 2)
  int min_completed = 3;  // median: peers (completed or past the step) needed before anything stops
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
  int rank = 0;         // ASHA: the point's rank at the rung (1 = best) ...
  int of = 0;           // ... among this many values recorded there
};

// What a stopped point's node says, e.g. "stopped early by ASHA at rung 10
// (rank 5 of 9 on val_loss)".
std::string StoppedEarlyText(EarlyStopPolicy::Kind kind, const StopDecision& decision, const std::string& metric);

// Whether `point` (an index into `points`) should stop now.
StopDecision DecideEarlyStop(const EarlyStopPolicy& policy, ObjectiveMode mode,
                             const std::vector<PointHistory>& points, size_t point);

// ASHA's rung steps up to and including the first at or past `max_step`.
std::vector<int64_t> AshaRungs(const EarlyStopPolicy& policy, int64_t max_step);

// True when `a` is strictly better than `b` (NaN is worse than any number).
bool Better(double a, double b, ObjectiveMode mode);

// The value that ranks a point by `objective`: with summary `last` the one of
// its highest step (the later line among equal steps), with `best` the best
// by the mode. nullopt without values. `values` in the order logged.
std::optional<Observation> SummaryValue(const std::vector<Observation>& values, const Objective& objective);

// "objective 'accuracy' not logged; seen: acc, loss" when the step's points
// logged metric lines (`seen`: the names in them, without step and time) and
// none held the objective's metric; "" otherwise (`logged`: some line held it).
std::string ObjectiveNotLogged(const std::string& metric, bool logged, const std::set<std::string>& seen);

// Ranks by the objective: 1 for the best value, equal values sharing a
// rank, 0 for points without a value. Indexed like `values`.
std::vector<int> RankValues(const std::vector<std::optional<double>>& values, ObjectiveMode mode);

}  // namespace gpuherd::pipeline
