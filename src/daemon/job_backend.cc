#include "daemon/job_backend.h"

#include <fmt/format.h>

namespace gpuherd::daemon {

bool LocalBackend::Owns(sched::JobId id) const { return id > 0 && id < kSlurmJobIdBase; }

Result<sched::JobId> LocalBackend::Submit(const sched::JobSpec& spec, const Caller& owner, const SubmitExtras& extras,
                                          const BackendOptions& /*options: Slurm's only*/) {
  return jobs_->Submit(spec, owner, extras);
}

Result<BackendJob> LocalBackend::Show(sched::JobId id) {
  auto job = jobs_->Show(id);
  if (!job.ok()) return job.status();
  BackendJob b;
  b.id = job->id;
  b.state = job->state;
  b.reason = job->reason;
  b.assigned_gpus = job->assigned_gpus;
  return b;
}

Result<std::optional<sched::Job>> LocalBackend::Recover(sched::JobId id) {
  // The queue reloaded its jobs before the pipelines: the store is current.
  auto job = state_->store->GetJob(id);
  if (!job.ok()) return job.status();
  sched::Job ended;
  ended.id = id;
  if (!job->has_value()) {
    ended.state = sched::JobState::kFailed;
    ended.reason = "its job is not in the store";
    return std::optional<sched::Job>(ended);
  }
  ended.state = sched::ParseJobState((*job)->state).value_or(sched::JobState::kFailed);
  ended.ended = (*job)->ended;
  ended.reason = (*job)->reason;
  if (!sched::IsFinal(ended.state)) return std::optional<sched::Job>();
  return std::optional<sched::Job>(ended);
}

}  // namespace gpuherd::daemon
