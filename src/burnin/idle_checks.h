// Level 1's checks of what the driver reports about an idle GPU: the driver
// answers, the PCIe link, ECC, memory repair, throttling, idle temperature and
// power. Private to the burn-in; pure functions of the readings.
#pragma once

#include <optional>
#include <vector>

#include "burnin/result.h"
#include "gpu/types.h"

namespace gpuherd::burnin {

// Every idle check but the PCIe link's (see PcieLinkCheck).
std::vector<Check> IdleChecks(const gpu::GpuInfo& gpu, const gpu::GpuSample& idle);

// The link's width is judged on the idle reading. Its generation only under
// load, since idle cards lower it to save power: `loaded_gen` is the highest
// generation read while level 2 or 3 kept the card busy (none at level 1).
Check PcieLinkCheck(const gpu::GpuInfo& gpu, const gpu::GpuSample& idle,
                    std::optional<int> loaded_gen, int level);

}  // namespace gpuherd::burnin
