// Linux CPU lists ("0-31,64-95"), as /sys, cgroups and NVML's affinity print them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace gpuherd::host {

// The largest CPU number accepted: a list is often read from a file or a
// driver, and "0-2000000000" must not allocate gigabytes.
inline constexpr int kMaxCpu = 65535;

// One CPU number ("12"), 0 to kMaxCpu; nullopt for anything else.
std::optional<int> ParseCpuNumber(std::string_view text);
// Sorted, without duplicates. An empty text is an empty list.
Result<std::vector<int>> ParseCpuList(std::string_view text);
// The shortest list form of `cpus` (any order, duplicates allowed).
std::string FormatCpuList(std::vector<int> cpus);

}  // namespace gpuherd::host
