// Burn-ins through the daemon: POST /v1/burnin becomes a maintenance job of
// the queue (JobSpec::pinned_gpus) that runs `gpuherd burnin --direct` on
// exactly the GPUs to test, once no other job holds them; the job records its
// runs back through POST /v1/burnin/runs. A passing run returns a GPU that
// gpuherd itself had drained (a fault, an alert) to work.
#pragma once

#include <string>
#include <vector>

#include "api/burnins.h"
#include "burnin/result.h"
#include "core/status.h"
#include "daemon/caller.h"
#include "daemon/job_service.h"
#include "gpu/open.h"
#include "gpu/types.h"
#include "sched/job.h"

namespace gpuherd::daemon {

// What the job's burn-in process needs to open the daemon's own fleet:
// `self_exe` is the gpuherd binary, `driver_args` the flags that reopen the
// same driver (--sim N --seed S, --scenario FILE; none for NVML).
struct BurnInLauncher {
  std::string self_exe;
  std::string home;  // the daemon's state directory: the job records through it
  std::vector<std::string> driver_args;
  std::string nvml_library;  // GPUHERD_NVML_LIBRARY for the job; empty: the default
};

// The launcher for a daemon opened with `choice`, whose fleet has `gpus`
// GPUs and is simulated when `sim_reason` is non-empty (a fallback fleet too).
BurnInLauncher MakeBurnInLauncher(const gpu::DriverChoice& choice, const std::string& sim_reason, size_t gpus,
                                  const std::string& home);

struct BurnInJob {
  sched::JobSpec spec;  // the job: `gpuherd burnin --direct` on the GPUs
  SubmitExtras extras;  // pinned_gpus set
  std::vector<int> positions;  // fleet positions of the GPUs to test
};

// The queue job for a burn-in request (api::ParseBurnInRequest reads it
// from POST /v1/burnin's body). kInvalidArgument says which field to fix.
Result<BurnInJob> PlanBurnInJob(const api::BurnInRequest& request, const gpu::Fleet& fleet,
                                const BurnInLauncher& launcher);


// After burn-in runs are recorded: each run made by a queue job (job_id set)
// with a healthy verdict undrains its GPU when gpuherd drained it. Returns
// the fleet positions returned to work.
std::vector<int> ReturnPassedGpus(const std::vector<burnin::BurnInRun>& runs, const gpu::Fleet& fleet,
                                  JobService* jobs);

}  // namespace gpuherd::daemon
