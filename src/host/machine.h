// The machine's size for the job queue: CPUs online and memory installed, read
// through Host (so tests use fixture trees). Jobs' --cpus and --mem are
// counted against it (sched::FleetState::host_cpus, host_mem_bytes).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "host/host.h"

namespace gpuherd::host {

struct MachineSize {
  int cpus = 0;            // /sys/devices/system/cpu/online
  uint64_t mem_bytes = 0;  // MemTotal of /proc/meminfo
};

// An error names the file that could not be read or parsed.
Result<MachineSize> ReadMachineSize(const Host& host);

}  // namespace gpuherd::host
