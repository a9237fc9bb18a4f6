#include "daemon/queue/memory_watchdog.h"

#include <fmt/format.h>

#include "daemon/queue/job_processes.h"

namespace gpuherd::daemon::queue {

MemoryWatchdog::MemoryWatchdog(const DaemonState* state, const exec::JobExecutor* executor, DurationMs grace)
    : state_(state), executor_(executor), grace_(grace) {}

std::vector<MemoryVerdict> MemoryWatchdog::Check(const std::vector<WatchedJob>& jobs, TimeMs now) {
  std::vector<MemoryVerdict> verdicts;
  std::map<sched::JobId, Over> still_over;
  for (const WatchedJob& job : jobs) {
    auto was = over_.find(job.id);
    // Without a reading this round, what was seen stays as it was.
    const bool known = was != over_.end() && was->second.attempt == job.attempt;
    if (!state_->telemetry || !state_->host) {
      if (known) still_over.insert(*was);
      continue;
    }
    const gpu::GpuSample* sample = state_->telemetry->Latest(job.gpu);
    if (sample == nullptr) {
      if (known) still_over.insert(*was);
      continue;
    }
    const uint64_t used =
        JobGpuMemory(*sample, *state_->host, job.shim_pid, executor_->GroupProcesses(job.id, job.attempt)).value_or(0);
    if (used <= job.share_bytes) continue;  // under its share: forgotten
    std::string what =
        fmt::format("uses {} MiB of GPU memory, over its share of {} MiB", used >> 20, job.share_bytes >> 20);
    if (!known) {
      still_over[job.id] = {job.attempt, now};
      verdicts.push_back({job.id, MemoryVerdict::Act::kWarn,
                          what + "; stopped in " + FormatDuration(grace_) + " unless it frees memory"});
      continue;
    }
    still_over.insert(*was);
    if (now - was->second.since >= grace_) {
      verdicts.push_back({job.id, MemoryVerdict::Act::kStop, what + " for " + FormatDuration(now - was->second.since)});
    }
  }
  over_ = std::move(still_over);
  return verdicts;
}

}  // namespace gpuherd::daemon::queue
