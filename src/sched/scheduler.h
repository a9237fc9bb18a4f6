// One scheduling pass: (fleet state, pending jobs, running jobs, now, config)
// → which jobs start where, which running jobs to preempt, and why every other
// pending job waits. Pure: no I/O, no clock, no threads; the daemon applies
// the decisions.
//
// Rules, in order:
//  1. Pending jobs go by effective priority (priority.h); ties: older
//     submission first, then lower id.
//  2. A job whose dependencies are not all met (after, afterany, afternotok:
//     rules 2a-2d in dependencies.h), or whose user is at a limit, waits
//     without holding anything up.
//  3. Gang: a multi-GPU job starts only with all its GPUs (placement.h).
//  4. EASY backfill: the first job that could run here but does not fit now
//     gets a reservation: the GPUs it will take and the earliest time they are
//     free, from running jobs' start + time limit (a stopping job's: its stop
//     deadline, rule 8). A later job starts now only
//     if it ends before that time (it needs a time limit) or stays off the
//     reserved GPUs.
//  0. Maintenance jobs (JobSpec::pinned_gpus, e.g. burn-ins) come first, in
//     submission order: each claims its GPUs for the rest of the pass and
//     starts once no job holds them (drained or unhealthy GPUs included; a
//     lost one makes it wait). Nothing is preempted for them.
//  5. Preemption: when that job's urgency is above some running preemptible
//     jobs', the cheapest set of them (fewest GPU-seconds of work since they
//     started, then lowest urgency) that frees enough suitable GPUs is
//     preempted for it, choosing among GPU sets as rule 7 says. A job of
//     equal or higher urgency, not preemptible, or already stopping is never
//     touched. At most one new preemption per pass.
//  6. Claims: a preemption claims the GPUs its job will take
//     (PreemptDecision::gpus; the daemon hands them back as
//     PendingJob::claimed_gpus and marks the victims RunningJob::stopping_for).
//     No other job starts on a claimed GPU, a higher one included (maintenance
//     jobs of rule 0 go first: a claim on a GPU one of them pins is dropped).
//     The job starts on its claimed GPUs as soon as they are all free. While
//     it holds a claim, or any job is stopping for it, nothing more is
//     preempted for it, so each victim is stopped once per preemptor. A claim
//     on a GPU that is lost, drained or unhealthy, no longer matches the job,
//     or is held by a job that is not stopping is dropped
//     (Decisions::dropped_claims) and the job is scheduled afresh.
//  7. Preemption picks GPUs first, victims second: of the GPU sets that
//     preemption can free, the best connected (as placement ranks sets, i.e.
//     what the job would get on an empty machine: NVLink > PCIe switch > host
//     bridge > NUMA node > across sockets) wins; among equally good sets, the
//     cheapest victims (rule 5). GPUs free already cost nothing.
//  8. Stopping jobs free their GPUs by their stop deadline: the first job in
//     line that waits for them holds the reservation of rule 4 on them like
//     on any other GPUs, so a lower job takes them only as backfill allows.
//  9. One model: a multi-GPU job's GPUs are all of one model (GPU name) in
//     placement, reservations and preemption, unless its spec sets
//     mixed_models; a job larger than any one model here says so.
// 10. Host CPUs and memory: where the fleet knows them (host_cpus,
//     host_mem_bytes), running and stopping jobs' cpus and mem_bytes count
//     against them; a job that does not fit waits, naming what is short, and
//     holds nothing up (no reservation, no preemption).
// 11. A deep queue costs little: the GPU part of a job's answer is computed
//     once per kind of demand (GPUs, GPU memory, model, min_cc,
//     mixed_models, urgency, whether it would end before the reservation)
//     while nothing in the pass changes; later jobs of that kind get the same
//     answer without placement work. On a full machine a pass is a sort and
//     one lookup per job.
// 12. Suspect GPUs last for long jobs: a GPU self-healing marks suspect
//     (GpuState::suspect: the same XID under several jobs) is in service,
//     but a long job (no time limit, or one above
//     SchedulerConfig::short_job_max, 1 h by default) starts there only when
//     no other GPU that fits it is free now: it is placed as if the suspect
//     GPUs were not there, and only if that finds nothing, as usual. Short
//     jobs and maintenance jobs pinned to the GPU (rule 0) use it like any
//     other. Why 1 h: a suspect card faulted under 3 jobs within 24 h, so a
//     short job risks at most its hour while a long one risks everything
//     since its last checkpoint. A long job's reservation (rule 4) keeps its
//     time (suspect GPUs count: the job falls back to them when nothing else
//     is free), but of the GPUs free by then it holds the ones it will be
//     placed on: chosen as if the suspect GPUs were not there, and only if
//     too few others are, as usual; the suspect ones stay open to backfill,
//     where short jobs may use them. Preemption for a long job (rules 5, 7)
//     stops no more work, and no better-connected set is given up, to avoid
//     a suspect GPU: of victims equal in lost work and urgency it stops the
//     one not on a suspect GPU, and of GPU sets equally connected and equally
//     cheap it claims the one with fewer suspect GPUs. A waiting job's
//     answer (rule 11) does not depend on it: a long job that finds nothing
//     elsewhere falls back to the suspect GPUs, so it waits exactly when a
//     short one would, and a reservation or a preemption changes the pass
//     (no answer given before it is reused after it).
#pragma once

#include <map>
#include <optional>
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
  int max_running_gpus_per_user = 0;   // 0 = no limit; fractions count as twentieths
  int max_queued_jobs_per_user = 0;    // 0 = no limit; later jobs wait their turn
  bool backfill = true;
  bool preemption = true;
  // Rule 12: a job whose time limit is at most this is short and may start
  // on a suspect GPU like on any other; longer jobs and jobs without a time
  // limit go there last.
  DurationMs short_job_max = kHourMs;
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
  // GpuState::index values the daemon keeps claimed for this job since the
  // scheduler decided a preemption for it (PreemptDecision::gpus), until it
  // starts, is cancelled, or the scheduler drops the claim.
  std::vector<int> claimed_gpus = {};
};

struct StartDecision {
  JobId job = 0;
  std::vector<int> gpus;  // GpuState::index values; one GPU for a fraction
};

struct PreemptDecision {
  std::vector<JobId> victims;  // signal each with its checkpoint grace, then requeue
  JobId for_job = 0;
  std::vector<int> gpus = {};  // GpuState::index values the preemptor will take: its claim
};

// Rule 4's reservation, as the pass left it.
struct ReservationDecision {
  JobId job = 0;
  std::optional<TimeMs> at;  // std::nullopt: the jobs on its GPUs have no time limit
  std::vector<int> gpus;     // GpuState::index values
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
  // Pending jobs whose claimed_gpus the daemon must forget (a claimed GPU was
  // lost or drained, or the job no longer fits there).
  std::vector<JobId> dropped_claims = {};
  std::optional<ReservationDecision> reservation;  // the first blocked job's, if any
};

Decisions Schedule(const FleetState& fleet, const std::vector<PendingJob>& pending,
                   const std::vector<RunningJob>& running, TimeMs now,
                   const SchedulerConfig& config);

// The priority inputs of a pending job, for Schedule and for `gpuherd show`.
PriorityInputs PriorityInputsOf(const PendingJob& job, TimeMs now, const SchedulerConfig& config);

// At submit time: refuses `adding` new jobs (1, or an array's tasks) that
// would take a user who has `unfinished` jobs (pending, held or running) past
// max_queued_jobs_per_user, saying the limit and the user's true count.
Status CheckQueueLimit(const std::string& user, int unfinished, int adding, const SchedulerConfig& config);

// "14:05 UTC" (within a day of now) or "2026-12-03 14:05 UTC".
std::string FormatClock(TimeMs t, TimeMs now);

}  // namespace gpuherd::sched
