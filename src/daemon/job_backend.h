// Where a pipeline's jobs run: the local queue (JobService) or a Slurm
// cluster. PipelineService talks to this interface only, so retries, resume
// from checkpoint, cancel, anomaly actions and metrics mean the same on
// both. Backends live on the event-loop thread; the job ids of different
// backends never overlap, so an id alone names a job.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <vector>

#include "core/status.h"
#include "daemon/caller.h"
#include "daemon/job_service.h"
#include "pipeline/spec.h"
#include "sched/job.h"

namespace gpuherd::daemon {

// A pipeline's settings for the backend that runs it (`slurm:` in its file).
using BackendOptions = pipeline::BackendChoice;

// A backend's job as `pipeline show` needs it.
struct BackendJob {
  sched::JobId id = 0;
  std::string state;  // gpuherd's job state names; empty when the backend no longer knows it
  std::string reason;
  std::vector<int> assigned_gpus;       // fleet positions (the local queue's)
  std::optional<int64_t> slurm_job_id;  // Slurm's id, once sbatch answered
  std::string slurm_state;              // Slurm's own state name
  std::string nodes;                    // Slurm's nodes of the job
};

class JobBackend {
 public:
  virtual ~JobBackend() = default;
  virtual std::string name() const = 0;  // "local", "slurm"
  // Whether `id` is one of this backend's jobs.
  virtual bool Owns(sched::JobId id) const = 0;

  // Submits a job for `owner`.
  virtual Result<sched::JobId> Submit(const sched::JobSpec& spec, const Caller& owner, const SubmitExtras& extras,
                                      const BackendOptions& options) = 0;
  // "cancel" or "requeue" (the job resumes from its checkpoint). `why`, when
  // given, is the cancelled job's reason instead of "cancelled by USER".
  virtual Result<std::string> Act(sched::JobId id, const std::string& action, const Caller& caller,
                                  const std::string& why = {}) = 0;
  // SIGUSR1: checkpoint now.
  virtual Status Signal(sched::JobId id, int signal) = 0;
  // For `pipeline show`.
  virtual Result<BackendJob> Show(sched::JobId id) = 0;
  // GPUHERD_METRICS_FILE of the job (its attempts append to it).
  virtual std::string MetricsPath(sched::JobId id) const = 0;
  // After a daemon restart, for a job a pipeline node was waiting on: its
  // final state when it ended while nobody watched, nullopt while it goes on
  // (its changes are reported to the listener from then on).
  virtual Result<std::optional<sched::Job>> Recover(sched::JobId id) = 0;
  // Called on the loop when a job starts, is requeued or ends (id, state,
  // attempt, started, ended, reason filled in).
  virtual void SetStateListener(std::function<void(const sched::Job&)> listener) = 0;
};

// The local queue as a backend.
class LocalBackend : public JobBackend {
 public:
  LocalBackend(JobService* jobs, DaemonState* state) : jobs_(jobs), state_(state) {}
  std::string name() const override { return "local"; }
  bool Owns(sched::JobId id) const override;
  Result<sched::JobId> Submit(const sched::JobSpec& spec, const Caller& owner, const SubmitExtras& extras,
                              const BackendOptions& options) override;
  Result<std::string> Act(sched::JobId id, const std::string& action, const Caller& caller,
                          const std::string& why = {}) override {
    return jobs_->Act(id, action, caller, why);
  }
  Status Signal(sched::JobId id, int signal) override { return jobs_->Signal(id, signal); }
  Result<BackendJob> Show(sched::JobId id) override;
  std::string MetricsPath(sched::JobId id) const override { return jobs_->MetricsFile(id); }
  Result<std::optional<sched::Job>> Recover(sched::JobId id) override;
  void SetStateListener(std::function<void(const sched::Job&)> listener) override {
    jobs_->SetStateListener(std::move(listener));
  }

 private:
  JobService* jobs_;
  DaemonState* state_;
};

// Slurm-run jobs have ids above this (see SlurmBackend::NextId), so they
// never meet the local queue's, which count up from 1.
constexpr sched::JobId kSlurmJobIdBase = 1'000'000'000'000;

}  // namespace gpuherd::daemon
