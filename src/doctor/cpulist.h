// Linux CPU lists ("0-31,64-95"), as /sys and NVML's affinity print them.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "host/host.h"

namespace gpuherd::doctor {

// Sorted, without duplicates. An empty text is an empty list.
Result<std::vector<int>> ParseCpuList(std::string_view text);
// The shortest list form of `cpus` (any order, duplicates allowed).
std::string FormatCpuList(std::vector<int> cpus);

// CPU -> the first hardware thread of its core, from
// /sys/devices/system/cpu/cpu*/topology/thread_siblings_list; empty when the
// topology cannot be read.
std::map<int, int> ReadFirstThreads(const host::Host& host);

}  // namespace gpuherd::doctor
