// The queue as the self-heal service sees it (self_heal_service.h): drains
// with origin fault through the GPU pool (whose typed origins keep an
// operator's drain the operator's), requalification burn-ins as maintenance
// jobs of the queue, the jobs that hold a GPU. Loop thread only.
#pragma once

#include <string>
#include <vector>

#include "daemon/burnin_jobs.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/job_service.h"
#include "daemon/self_heal_service.h"

namespace gpuherd::daemon {

class SelfHealJobQueue : public SelfHealQueue {
 public:
  // `state` and `jobs` must outlive this; `launcher` opens the daemon's own
  // fleet in the burn-in job; `daemon_caller` submits and cancels the
  // requalification jobs (the daemon's own user, an admin).
  SelfHealJobQueue(DaemonState* state, JobService* jobs, BurnInLauncher launcher, Caller daemon_caller)
      : state_(state), jobs_(jobs), launcher_(std::move(launcher)), caller_(std::move(daemon_caller)) {}

  void DrainForFault(int position, const std::string& reason) override;
  Status LiftFaultDrain(int position, const std::string& by) override;
  bool OperatorDrained(int position) const override;
  bool Drained(int position) const override;
  Result<sched::JobId> QueueRequalification(int position, int level, bool reset_first) override;
  void CancelRequalification(sched::JobId job, const std::string& reason) override;
  std::vector<int> JobsPerGpu() const override { return jobs_->JobsPerGpu(); }
  std::vector<JobOnGpu> JobsOn(int position) const override;
  void SetSuspect(int position, bool suspect) override { jobs_->SetSuspect(position, suspect); }

 private:
  DaemonState* state_;
  JobService* jobs_;
  BurnInLauncher launcher_;
  Caller caller_;
};

}  // namespace gpuherd::daemon
