// Rule 2 of the scheduler (scheduler.h), the dependencies part: whether a
// pending job's dependencies let it start, wait, or mean it never can. The
// kinds are Slurm's:
//  2a. after (JobSpec::depends_on, `--after`, Slurm's afterok): each must
//      have completed; one that failed or was cancelled means never.
//  2b. afterany (JobSpec::after_any, `--afterany`): each must have ended,
//      however it ended.
//  2c. afternotok (JobSpec::after_not_ok, `--afternotok`): each must have
//      failed or been cancelled; one that completed means never.
//  2d. A dependency that has not ended (pending, held, running, stopping)
//      makes the job wait; the first such one, in the order after, afterany,
//      afternotok, is named. "Never" wins over waiting, so a job that can
//      no longer run is cancelled at once, not after its other dependencies.
// Pure: the caller says what state each dependency is in.
#pragma once

#include <functional>
#include <optional>

#include "sched/job.h"
#include "sched/scheduler.h"

namespace gpuherd::sched {

struct DependencyCheck {
  Dependencies deps = Dependencies::kSatisfied;
  JobId blocking = 0;                      // the dependency that waits or fails; 0 when satisfied
  JobState blocking_state = JobState::kPending;
  const char* kind = "";                   // "after", "afterany" or "afternotok" of `blocking`
};

// A dependency's state, or nullopt when it cannot be told now (a store
// error): then CheckDependencies answers nullopt and the job waits for the
// next pass without a verdict.
using DependencyStateFn = std::function<std::optional<JobState>(JobId)>;

std::optional<DependencyCheck> CheckDependencies(const JobSpec& spec, const DependencyStateFn& state_of);

// "job 7 failed; this job needed it to complete (--after)": why rule 2
// cancelled a job.
std::string DependencyFailureReason(const DependencyCheck& check);

// Whether a spec has any dependency of any kind.
inline bool HasDependencies(const JobSpec& spec) {
  return !spec.depends_on.empty() || !spec.after_any.empty() || !spec.after_not_ok.empty();
}

}  // namespace gpuherd::sched
