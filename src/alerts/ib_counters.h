// InfiniBand port error counters from /sys/class/infiniband, read through the
// host interface so that tests run on fixture trees.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "host/host.h"

namespace gpuherd::alerts {

// The counter files read from each port's counters/ directory.
inline constexpr const char* kIbErrorCounters[] = {
    "port_rcv_errors",          "port_xmit_discards",        "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors", "symbol_error",          "link_downed",
    "link_error_recovery",      "local_link_integrity_errors", "excessive_buffer_overrun_errors",
    "port_rcv_constraint_errors", "port_xmit_constraint_errors", "VL15_dropped",
};

struct IbPortCounters {
  std::string device;                        // "mlx5_0"
  std::string port;                          // "1"
  std::map<std::string, uint64_t> counters;  // only the files that exist and parse
};

// Every port of every device, sorted. An empty list (not an error) where the
// machine has no InfiniBand (no /sys/class/infiniband). A port whose counters
// directory cannot be listed is left out.
Result<std::vector<IbPortCounters>> ReadIbCounters(const host::Host& host);

}  // namespace gpuherd::alerts
