// The CPU topology behind the doctor's checks (lists are host/cpulist.h).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "host/cpulist.h"
#include "host/host.h"

namespace gpuherd::doctor {

using host::FormatCpuList;
using host::ParseCpuList;

// CPU -> the first hardware thread of its core, from
// /sys/devices/system/cpu/cpu*/topology/thread_siblings_list; empty when the
// topology cannot be read.
std::map<int, int> ReadFirstThreads(const host::Host& host);

}  // namespace gpuherd::doctor
