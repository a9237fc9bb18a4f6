// Picks the GPU driver: the simulated fleet when asked for (or when no NVIDIA
// driver is found), NVML otherwise.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "gpu/driver.h"

namespace gpuherd::gpu {

struct DriverChoice {
  int sim_count = 0;            // --sim N: N simulated GPUs (0: not asked for)
  std::string scenario_path;    // --scenario FILE: a simulated fleet from a scenario
  uint64_t seed = 1;
  std::string nvml_library;     // empty: $GPUHERD_NVML_LIBRARY or libnvidia-ml.so.1
  int fallback_sim_count = 8;   // fleet size when NVML is absent; 0 = fail instead
};

struct OpenedDriver {
  std::unique_ptr<Driver> driver;
  // Why the simulated fleet is in use ("asked for with --sim 8", "no NVIDIA
  // driver found: ..."); empty for NVML. Every view shows it.
  std::string sim_reason;
};

Result<OpenedDriver> OpenDriver(const DriverChoice& choice);

}  // namespace gpuherd::gpu
