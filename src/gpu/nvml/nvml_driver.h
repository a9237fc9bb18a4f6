// The real GPUs, read through NVIDIA's NVML loaded with dlopen at run time:
// gpuherd builds and runs without the driver or the CUDA toolkit, and only
// reads from the GPUs (it never changes clocks, power limits, ECC or MIG).
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "gpu/driver.h"

namespace gpuherd::gpu::nvml {

// Loads NVML from `library_path` (empty: $GPUHERD_NVML_LIBRARY when set, else
// libnvidia-ml.so.1) and initialises it. kUnavailable when the library is
// missing, lacks a required symbol or nvmlInit fails; the message says which.
// The driver calls nvmlShutdown when destroyed. Readings a GPU does not
// support are absent; Sample fails with kUnavailable when the GPU is lost.
Result<std::unique_ptr<Driver>> OpenNvmlDriver(const std::string& library_path = "");

}  // namespace gpuherd::gpu::nvml
