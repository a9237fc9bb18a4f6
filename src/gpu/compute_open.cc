#include "gpu/compute_open.h"

#include "gpu/cuda/cuda_compute.h"
#include "gpu/sim/sim_compute.h"
#include "gpu/sim/sim_driver.h"

namespace gpuherd::gpu {

Result<std::unique_ptr<ComputeBackend>> OpenComputeBackend(Driver& driver, host::Clock& clock,
                                                           const DriverChoice& choice) {
  if (auto* sim_driver = dynamic_cast<sim::SimDriver*>(&driver)) {
    sim::SimOptions options;
    options.scenario_path = choice.scenario_path;
    options.seed = choice.seed;
    return sim::NewSimComputeBackend(*sim_driver, clock, options);
  }
  if (driver.simulated()) {
    // Pairing a simulated driver with the CUDA backend would test real cards
    // that the driver does not describe.
    return FailedPrecondition("the simulated driver '" + driver.name() + "' has no compute backend");
  }
  return cuda::OpenCudaComputeBackend();
}

}  // namespace gpuherd::gpu
