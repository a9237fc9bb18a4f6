#include "daemon/queue/job_processes.h"

#include <algorithm>

namespace gpuherd::daemon::queue {

std::optional<uint64_t> JobGpuMemory(const gpu::GpuSample& sample, const host::Host& host, int shim_pid,
                                     const std::optional<std::vector<int>>& group) {
  std::optional<uint64_t> used;
  for (const gpu::GpuProcess& p : sample.processes) {
    const bool in_group = group && std::binary_search(group->begin(), group->end(), p.pid);
    if (in_group || (shim_pid > 0 && (p.pid == shim_pid || host::ProcessSession(host, p.pid).value_or(0) == shim_pid))) {
      used = used.value_or(0) + p.used_memory_bytes;
    }
  }
  return used;
}

}  // namespace gpuherd::daemon::queue
