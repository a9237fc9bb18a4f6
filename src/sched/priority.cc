#include "sched/priority.h"

#include <algorithm>

#include <fmt/format.h>

namespace gpuherd::sched {

namespace {
double WaitedMinutes(const PriorityWeights& w, DurationMs waited) {
  double minutes = static_cast<double>(std::max<DurationMs>(waited, 0)) / kMinuteMs;
  return std::min(minutes, w.age_cap_minutes);
}
}  // namespace

PriorityTerms ComputePriority(const PriorityWeights& w, const PriorityInputs& in) {
  PriorityTerms t;
  t.urgency = w.w_urgency * in.urgency;
  t.user = w.w_user * in.user_level;
  t.age = w.w_age * WaitedMinutes(w, in.waited);
  t.fair_share = -w.w_fair * std::max(in.user_gpu_hours, 0.0);
  return t;
}

std::string ExplainPriority(const PriorityWeights& w, const PriorityInputs& in) {
  PriorityTerms t = ComputePriority(w, in);
  double minutes = WaitedMinutes(w, in.waited);
  std::string age_note = minutes >= w.age_cap_minutes ? fmt::format("{:g} min, capped", minutes)
                                                      : fmt::format("{:.0f} min", minutes);
  return fmt::format(
      "priority {:.1f} = urgency {:g} ({}×{:g}) + user {:g} (level {}×{:g}) + age {:.1f} "
      "({}×{:g}) − fair share {:.1f} ({:.1f} GPU-h in {}×{:g})",
      t.total(), t.urgency, in.urgency, w.w_urgency, t.user, in.user_level, w.w_user, t.age,
      age_note, w.w_age, -t.fair_share, std::max(in.user_gpu_hours, 0.0),
      FormatDuration(w.fair_window), w.w_fair);
}

}  // namespace gpuherd::sched
