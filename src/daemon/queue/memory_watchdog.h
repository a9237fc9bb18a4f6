// The GPU memory watchdog: a fractional job using more GPU memory than its
// share is warned once, then stopped if it is still over after the grace;
// its neighbours on the GPU are never touched. It reads telemetry's latest
// sample of each job's GPU after every round and says what to do; the queue
// does it (an event, a stop). Loop thread only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/time.h"
#include "daemon/daemon_state.h"
#include "exec/job_executor.h"
#include "sched/job.h"

namespace gpuherd::daemon::queue {

// A running fractional job, launched (its shim known).
struct WatchedJob {
  sched::JobId id = 0;
  int attempt = 0;
  int gpu = 0;              // fleet position
  int shim_pid = 0;
  uint64_t share_bytes = 0;
};

struct MemoryVerdict {
  enum class Act { kWarn, kStop };
  sched::JobId id = 0;
  Act act = Act::kWarn;
  std::string message;  // for the warning's event, or the stop's reason
};

class MemoryWatchdog {
 public:
  // `state` (its telemetry and host) and `executor` must outlive the watchdog.
  MemoryWatchdog(const DaemonState* state, const exec::JobExecutor* executor, DurationMs grace);

  // After a telemetry round, with every watched job: the warnings and stops
  // due now. A job left out is forgotten (it stopped, or is not a fraction).
  std::vector<MemoryVerdict> Check(const std::vector<WatchedJob>& jobs, TimeMs now);

 private:
  struct Over {
    int attempt = 0;
    TimeMs since = 0;  // the first reading over the share
  };
  const DaemonState* state_;
  const exec::JobExecutor* executor_;
  DurationMs grace_;
  std::map<sched::JobId, Over> over_;
};

}  // namespace gpuherd::daemon::queue
