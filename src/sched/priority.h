// Effective priority of a pending job: who goes first.
//
//   priority = w_urgency·urgency + w_user·user level
//            + w_age·min(minutes waiting, age_cap_minutes)
//            − w_fair·(GPU-hours the user held in the fair-share window)
//
// Urgency is the job's own `priority` (-100..100). Aging lets a low job
// overtake fresh ones eventually; the fair-share term pushes back users who
// held many GPUs recently. Pure: the caller supplies waiting time and usage.
#pragma once

#include <string>

#include "core/time.h"

namespace gpuherd::sched {

struct PriorityWeights {
  double w_urgency = 1.0;     // per point of the job's priority
  double w_user = 10.0;       // per user level (config; 0 for most users)
  double w_age = 0.5;         // per minute waiting: +30 after an hour
  double age_cap_minutes = 240;  // aging stops after 4 h (+120 at most)
  double w_fair = 2.0;        // per GPU-hour held in the window
  DurationMs fair_window = 24 * kHourMs;  // how far back the caller sums GPU-hours
};

struct PriorityInputs {
  int urgency = 0;
  int user_level = 0;
  DurationMs waited = 0;        // now − submitted; negative counts as 0
  double user_gpu_hours = 0;    // held by the job's user within fair_window
};

// Each term with its sign applied; total() is the effective priority.
struct PriorityTerms {
  double urgency = 0;
  double user = 0;
  double age = 0;
  double fair_share = 0;  // ≤ 0
  double total() const { return urgency + user + age + fair_share; }
};

PriorityTerms ComputePriority(const PriorityWeights& weights, const PriorityInputs& in);

// One line for `gpuherd show`, e.g.
// "priority 27.0 = urgency 10 (10×1) + user 10 (level 1×10) + age 15.0 (30 min×0.5)
//  − fair share 8.0 (4.0 GPU-h×2)"
std::string ExplainPriority(const PriorityWeights& weights, const PriorityInputs& in);

}  // namespace gpuherd::sched
