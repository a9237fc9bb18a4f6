// Picks the compute side of a burn-in to match the GPU driver in use: the
// simulated fleet gets the simulated compute backend (so a scenario's compute
// faults show up in the memory test and the stress), real GPUs get the CUDA
// driver API.
#pragma once

#include <memory>

#include "core/status.h"
#include "gpu/compute.h"
#include "gpu/driver.h"
#include "gpu/open.h"
#include "host/clock.h"

namespace gpuherd::gpu {

// `choice` is what `driver` was opened with: its scenario's compute faults
// (stuck bits, wrong results, a slow card) go to the simulated devices.
// `driver` and `clock` must outlive the backend (simulated devices read and
// load the simulated cards). kUnavailable, with a message a person can act
// on, when real GPUs cannot run work: no CUDA kernels in this build, or no
// libcuda.so.1.
Result<std::unique_ptr<ComputeBackend>> OpenComputeBackend(Driver& driver, host::Clock& clock,
                                                           const DriverChoice& choice = {});

}  // namespace gpuherd::gpu
