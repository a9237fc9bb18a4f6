// The fleet as a table in the spirit of nvidia-smi and nvitop, from the JSON
// that the API serves (api/gpus.h).
#pragma once

#include <string>

#include "api/gpus.h"

namespace gpuherd::cli {

// A banner when the fleet is simulated, then one row per GPU: index, model,
// utilization, memory, temperature, power, PCIe gen/width (marked "!" with the
// maximum when below it), fan, throttle reasons and state.
std::string RenderFleetTable(const api::Fleet& fleet, bool color);

}  // namespace gpuherd::cli
