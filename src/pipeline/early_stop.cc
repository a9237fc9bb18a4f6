#include "pipeline/early_stop.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace gpuherd::pipeline {
namespace {

// A point's value at a rung: the best of its lines up to its first line at
// or past the rung's step; nullopt before it reaches the rung.
std::optional<double> ValueAt(const PointHistory& h, int64_t rung, ObjectiveMode mode) {
  std::optional<double> best;
  for (const Observation& o : h.values) {
    if (!best || Better(o.value, *best, mode)) best = o.value;
    if (o.step >= rung) return best;
  }
  return std::nullopt;
}

std::string Num(double v) { return fmt::format("{:.6g}", v); }

StopDecision DecideAsha(const EarlyStopPolicy& policy, ObjectiveMode mode,
                        const std::vector<PointHistory>& points, size_t point) {
  const PointHistory& me = points[point];
  int64_t max_step = 0;
  for (const Observation& o : me.values) max_step = std::max(max_step, o.step);
  // The highest rung the point has reached; before the first, nothing to judge.
  std::optional<int64_t> rung;
  for (int64_t r : AshaRungs(policy, max_step)) {
    if (r <= max_step) rung = r;
  }
  if (!rung) return {};
  const std::optional<double> mine = ValueAt(me, *rung, mode);
  if (!mine) return {};
  int recorded = 0, better = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const std::optional<double> theirs = ValueAt(points[i], *rung, mode);
    if (!theirs) continue;
    ++recorded;
    if (i != point && Better(*theirs, *mine, mode)) ++better;
  }
  // Judged again each round against every value the rung holds so far: a
  // point that passed while few peers had reported is not promoted for good.
  const int reduction = std::max(2, policy.reduction);
  if (recorded < reduction) return {};
  const int keep = recorded / reduction;
  if (better + 1 <= keep) return {};
  StopDecision d;
  d.stop = true;
  d.at_step = *rung;
  d.rank = better + 1;
  d.of = recorded;
  d.reason = fmt::format("rung at step {}: {} ranks {} of {} (only the top {} go on)", *rung, Num(*mine), d.rank,
                         recorded, keep);
  return d;
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
    if (i == point) continue;
    double sum = 0;
    int n = 0;
    bool reached = points[i].completed;
    for (const Observation& o : points[i].values) {
      reached = reached || o.step >= step;
      if (o.step > step) continue;
      sum += o.value;
      ++n;
    }
    if (reached && n > 0) averages.push_back(sum / n);
  }
  if (static_cast<int>(averages.size()) < std::max(1, policy.min_completed)) return {};
  std::sort(averages.begin(), averages.end());
  const size_t n = averages.size();
  const double median = n % 2 == 1 ? averages[n / 2] : (averages[n / 2 - 1] + averages[n / 2]) / 2;
  if (std::isnan(median) || !Better(median, *best, mode)) return {};
  StopDecision d;
  d.stop = true;
  d.at_step = step;
  d.reason = fmt::format("step {}: best {} is worse than the median {} of {} peers' running averages",
                      step, Num(*best), Num(median), n);
  return d;
}

}  // namespace

bool Better(double a, double b, ObjectiveMode mode) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return mode == ObjectiveMode::kMin ? a < b : a > b;
}

std::optional<Observation> SummaryValue(const std::vector<Observation>& values, const Objective& objective) {
  std::optional<Observation> pick;
  for (const Observation& o : values) {
    const bool take = !pick || (objective.summary == ObjectiveSummary::kLast ? o.step >= pick->step
                                                                              : Better(o.value, pick->value, objective.mode));
    if (take) pick = o;
  }
  return pick;
}

std::string ObjectiveNotLogged(const std::string& metric, bool logged, const std::set<std::string>& seen) {
  if (logged || seen.empty()) return "";
  // A job chooses its names: a few say enough.
  constexpr size_t kShown = 12;
  std::string names;
  size_t shown = 0;
  for (const std::string& name : seen) {
    if (shown++ == kShown) break;
    names += (names.empty() ? "" : ", ") + name;
  }
  if (seen.size() > kShown) names += fmt::format(" and {} more", seen.size() - kShown);
  return fmt::format("objective '{}' not logged; seen: {}", metric, names);
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

std::string StoppedEarlyText(EarlyStopPolicy::Kind kind, const StopDecision& decision, const std::string& metric) {
  if (kind == EarlyStopPolicy::Kind::kAsha) {
    return fmt::format("stopped early by ASHA at rung {} (rank {} of {} on {})", decision.at_step, decision.rank,
                       decision.of, metric);
  }
  return fmt::format("stopped early by the median rule at step {} on {}", decision.at_step, metric);
}

StopDecision DecideEarlyStop(const EarlyStopPolicy& policy, ObjectiveMode mode,
                             const std::vector<PointHistory>& points, size_t point) {
  if (point >= points.size()) return {};
  return policy.kind == EarlyStopPolicy::Kind::kAsha ? DecideAsha(policy, mode, points, point)
                                                     : DecideMedian(policy, mode, points, point);
}

}  // namespace gpuherd::pipeline
