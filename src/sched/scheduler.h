// One scheduling pass: (fleet state, pending jobs, running jobs, now, config)
// → which jobs start where, which running jobs to preempt, and why every other
// pending job waits. Pure: no I/O, no clock, no threads; the daemon applies
// the decisions.
//
// Rules, in order:
//  1. Pending jobs go by effective priority (priority.h); ties: older
//     submission first, then lower id.
//  2. A job whose dependencies are not all completed, or whose user is at a
//     limit, waits without holding anything up.
//  3. Gang: a multi-GPU job starts only with all its GPUs (placement.h).
//  4. EASY backfill: the first job that could run here but does not fit now
//     gets a reservation: the GPUs it will take and the earliest time they are
//     free, from running jobs' start + time limit. A later job starts now only
//     if it ends before that time (it needs a time limit) or stays off the
//     reserved GPUs.
//  0. Maintenance jobs (JobSpec::pinned_gpus, e.g. burn-ins) come first, in
//     submission order: each claims its GPUs for the rest of the pass and
//     starts once no job holds them (drained or unhealthy GPUs included; a
//     lost one makes it wait). Nothing is preempted for them.
//  5. Preemption: when that job's urgency is above some running preemptible
//     jobs', the cheapest set of them (fewest GPU-seconds of work since they
//     started, then lowest urgency) that frees enough suitable GPUs is
//     preempted for it. A job of equal or higher urgency, or not preemptible,
//     is never touched.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "sched/fleet_state.h"
#include "sched/job.h"
#include "sched/placement.h"
#include "sched/priority.h"

namespace gpuherd::sched {

struct SchedulerConfig {
  PriorityWeights weights;
  std::map<std::string, int> user_levels;  // user → level (default 0)
  PlacementOptions placement;
  int max_running_gpus_per_user = 0;   // 0 = no limit; fractions count as tenths
  int max_queued_jobs_per_user = 0;    // 0 = no limit; later jobs wait their turn
  bool backfill = true;
  bool preemption = true;
};

// Where a pending job's dependencies stand (the caller looks them up).
enum class Dependencies { kSatisfied, kWaiting, kFailed };

struct PendingJob {
  JobId id = 0;
  JobSpec spec;
  TimeMs submitted = 0;
  Dependencies deps = Dependencies::kSatisfied;
  JobId blocking_dep = 0;                          // the first unfinished or failed one
  JobState blocking_dep_state = JobState::kPending;
  double user_gpu_hours = 0;  // the user's GPU-hours within weights.fair_window
  // GPUs kept for this job from the pass that preempted for it until it
  // starts (or the claim is dropped): no other job may take them.
  std::vector<int> claimed_gpus;
};

struct StartDecision {
  JobId job = 0;
  std::vector<int> gpus;  // GpuState::index values; one GPU for a fraction
};

struct PreemptDecision {
  std::vector<JobId> victims;  // signal each with its checkpoint grace, then requeue
  JobId for_job = 0;
  std::vector<int> gpus;       // the GPUs for_job will take: its claim
};

struct PendingReason {
  JobId job = 0;
  double priority = 0;  // effective priority; ExplainPriority gives the terms
  int rank = 0;         // 1 = next in line
  std::string reason;
};

struct Decisions {
  std::vector<StartDecision> starts;
  std::vector<PreemptDecision> preemptions;
  std::vector<PendingReason> waiting;  // every pending job that does not start, in rank order
  std::vector<JobId> dropped_claims;   // pending jobs whose claimed_gpus no longer hold
};

Decisions Schedule(const FleetState& fleet, const std::vector<PendingJob>& pending,
                   const std::vector<RunningJob>& running, TimeMs now,
                   const SchedulerConfig& config);

// The priority inputs of a pending job, for Schedule and for `gpuherd show`.
PriorityInputs PriorityInputsOf(const PendingJob& job, TimeMs now, const SchedulerConfig& config);

// At submit time: refuses a job that would take the user over the queued-jobs
// limit, saying how many are queued.
Status CheckQueueLimit(const std::string& user, int queued_jobs, const SchedulerConfig& config);

// "14:05 UTC" (within a day of now) or "2026-12-03 14:05 UTC".
std::string FormatClock(TimeMs t, TimeMs now);

}  // namespace gpuherd::sched
