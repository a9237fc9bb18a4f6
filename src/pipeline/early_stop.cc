#include "pipeline/early_stop.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace gpuherd::pipeline {
namespace {

// How a point reached a rung: when (its first line at or past the rung's
// step) and with what (the best value of its lines up to that one).
struct RungArrival {
  TimeMs at = 0;
  double value = 0;
};

std::optional<RungArrival> ArrivalAt(const PointHistory& h, int64_t rung, ObjectiveMode mode) {
  std::optional<double> best;
  for (const Observation& o : h.values) {
    if (!best || Better(o.value, *best, mode)) best = o.value;
    if (o.step >= rung) return RungArrival{o.at, *best};
  }
  return std::nullopt;
}

std::string Num(double v) { return fmt::format("{:.6g}", v); }

StopDecision DecideAsha(const EarlyStopPolicy& policy, ObjectiveMode mode,
                        const std::vector<PointHistory>& points, size_t point) {
  const PointHistory& me = points[point];
  int64_t max_step = 0;
  for (const Observation& o : me.values) max_step = std::max(max_step, o.step);
  for (int64_t rung : AshaRungs(policy, max_step)) {
    const std::optional<RungArrival> mine = ArrivalAt(me, rung, mode);
    if (!mine) break;
    int arrived = 0, better = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      const std::optional<RungArrival> theirs = ArrivalAt(points[i], rung, mode);
      if (!theirs) continue;
      const bool before = theirs->at < mine->at || (theirs->at == mine->at && i <= point);
      if (!before) continue;
      ++arrived;
      if (i != point && Better(theirs->value, mine->value, mode)) ++better;
    }
    const int keep = (arrived + policy.reduction - 1) / policy.reduction;
    if (better + 1 > keep) {
      return {true, rung,
              fmt::format("rung at step {}: {} ranks {} of {} (only the top {} go on)", rung,
                          Num(mine->value), better + 1, arrived, keep)};
    }
  }
  return {};
}

StopDecision DecideMedian(const EarlyStopPolicy& policy, ObjectiveMode mode,
                          const std::vector<PointHistory>& points, size_t point) {
  const PointHistory& me = points[point];
  if (me.values.empty() || me.completed) return {};
  int64_t step = 0;
  std::optional<double> best;
  for (const Observation& o : me.values) {
    step = std::max(step, o.step);
    if (!best || Better(o.value, *best, mode)) best = o.value;
  }
  if (step < policy.grace) return {};
  std::vector<double> averages;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i == point || !points[i].completed) continue;
    double sum = 0;
    int n = 0;
    for (const Observation& o : points[i].values) {
      if (o.step > step) continue;
      sum += o.value;
      ++n;
    }
    if (n > 0) averages.push_back(sum / n);
  }
  if (static_cast<int>(averages.size()) < std::max(1, policy.min_completed)) return {};
  std::sort(averages.begin(), averages.end());
  const size_t n = averages.size();
  const double median = n % 2 == 1 ? averages[n / 2] : (averages[n / 2 - 1] + averages[n / 2]) / 2;
  if (std::isnan(median) || !Better(median, *best, mode)) return {};
  return {true, step,
          fmt::format("step {}: best {} is worse than the median {} of {} completed points' running averages",
                      step, Num(*best), Num(median), n)};
}

}  // namespace

bool Better(double a, double b, ObjectiveMode mode) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return mode == ObjectiveMode::kMin ? a < b : a > b;
}

std::vector<int> RankValues(const std::vector<std::optional<double>>& values, ObjectiveMode mode) {
  std::vector<size_t> ranked;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i]) ranked.push_back(i);
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](size_t a, size_t b) { return Better(*values[a], *values[b], mode); });
  std::vector<int> ranks(values.size(), 0);
  for (size_t r = 0; r < ranked.size(); ++r) {
    const bool tie = r > 0 && !Better(*values[ranked[r - 1]], *values[ranked[r]], mode);
    ranks[ranked[r]] = tie ? ranks[ranked[r - 1]] : static_cast<int>(r) + 1;
  }
  return ranks;
}

std::vector<int64_t> AshaRungs(const EarlyStopPolicy& policy, int64_t max_step) {
  std::vector<int64_t> rungs;
  const int64_t reduction = std::max(2, policy.reduction);
  for (int64_t r = std::max<int64_t>(1, policy.grace); ; r *= reduction) {
    rungs.push_back(r);
    if (r >= max_step || r > std::numeric_limits<int64_t>::max() / reduction) break;
  }
  return rungs;
}

StopDecision DecideEarlyStop(const EarlyStopPolicy& policy, ObjectiveMode mode,
                             const std::vector<PointHistory>& points, size_t point) {
  if (point >= points.size()) return {};
  return policy.kind == EarlyStopPolicy::Kind::kAsha ? DecideAsha(policy, mode, points, point)
                                                     : DecideMedian(policy, mode, points, point);
}

}  // namespace gpuherd::pipeline
