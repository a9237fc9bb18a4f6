// Which of a GPU's processes are a job's: those of its control group where it
// has one (also any that left the session with setsid), and those in the
// session its shim created (the session id is the shim's pid). The memory
// watchdog and the GPU views count a job's memory through this one rule.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gpu/types.h"
#include "host/host.h"

namespace gpuherd::daemon::queue {

// The GPU memory the job's processes hold in `sample`; nullopt when none of
// them is on that GPU. `group`: the job's control group's pids, sorted
// (JobExecutor::GroupProcesses), nullopt without one.
std::optional<uint64_t> JobGpuMemory(const gpu::GpuSample& sample, const host::Host& host, int shim_pid,
                                     const std::optional<std::vector<int>>& group);

}  // namespace gpuherd::daemon::queue
