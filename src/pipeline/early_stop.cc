#include "pipeline/early_stop.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace gpuherd::pipeline {
namespace {

// The first observation at or past `step`, if any.
const Observation* FirstAtOrPast(const PointHistory& h, int64_t step) {
  for (const Observation& o : h.values) {
    if (o.step >= step) return &o;
  }
  return nullptr;
}

std::string Num(double v) { return fmt::format("{:.6g}", v); }

StopDecision DecideAsha(const EarlyStopPolicy& policy, ObjectiveMode mode,
                        const std::vector<PointHistory>& points, size_t point) {
  const PointHistory& me = points[point];
  int64_t max_step = 0;
  for (const Observation& o : me.values) max_step = std::max(max_step, o.step);
  for (int64_t rung : AshaRungs(policy, max_step)) {
    const Observation* mine = FirstAtOrPast(me, rung);
    if (mine == nullptr) break;
    int arrived = 0, better = 0;
    for (size_t i = 0; i < points.size(); ++i) {
      const Observation* theirs = FirstAtOrPast(points[i], rung);
      if (theirs == nullptr) continue;
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
