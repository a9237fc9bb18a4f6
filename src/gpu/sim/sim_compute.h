// The simulated fleet's compute side: a gpu::ComputeBackend whose devices
// take the time real work would take (on the given clock), reach rates derived
// from the catalogue model, heat their card through the SimDriver's thermal
// model while they stress it, and show injected compute faults (stuck memory
// bits, wrong or NaN results, a slow card) exactly where a burn-in looks.
//
// Rates, each with seeded ±1 % noise and times the factor of a `slow` fault
// (except host<->device copies, which are the link's):
//   stress     0.9 x the model's FP32 (FP16/BF16: tensor) TFLOPS x SM clock / boost clock
//   memory     0.85 x the model's memory bandwidth; memory test 0.6 x that
//   h2d/d2h    0.8 x the theoretical bandwidth of the link the driver reports now
//   d2d        half the memory rate (each byte is read and written)
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/compute.h"
#include "gpu/sim/scenario.h"
#include "gpu/sim/sim_driver.h"
#include "host/clock.h"

namespace gpuherd::gpu::sim {

// Thread-safe. Devices read their card through SimDriver::Sample (its SM
// clock and link under load) and set its load with SetLoad; both must outlive
// the backend and its devices.
class SimComputeBackend : public ComputeBackend {
 public:
  SimComputeBackend(SimDriver& driver, host::Clock& clock);

  std::string name() const override { return "sim"; }
  bool simulated() const override { return true; }
  // kNotFound for a UUID outside the fleet; kUnavailable while the card does
  // not answer the driver, or after DisableCompute.
  Result<std::unique_ptr<ComputeDevice>> Open(const GpuInfo& gpu) override;

  // Injects a compute fault (stuck_bits, compute_errors, nan, slow) on GPU
  // `fault.gpu`; its `at` counts from the fleet's start like the driver's
  // faults. Devices opened afterwards show it. kInvalidArgument for another
  // kind (those belong to the driver's scenario) or a GPU outside the fleet.
  Status AddFault(const Fault& fault);
  // Adds the scenario's compute faults and skips the rest.
  Status AddFaults(const Scenario& scenario);
  // Makes Open of GPU `gpu` fail with kUnavailable and `reason`: a card the
  // driver sees but no compute context can be created on.
  void DisableCompute(int gpu, std::string reason);

 private:
  SimDriver& driver_;
  host::Clock& clock_;
  std::mutex mu_;
  std::vector<Fault> faults_;
  std::map<int, std::string> disabled_;
};

std::unique_ptr<ComputeBackend> NewSimComputeBackend(SimDriver& driver, host::Clock& clock);

// As above, with the compute faults of the scenario that `options` name (the
// options the driver was opened with), so that `--scenario` files drive both.
Result<std::unique_ptr<ComputeBackend>> NewSimComputeBackend(SimDriver& driver,
                                                             host::Clock& clock,
                                                             const SimOptions& options);

}  // namespace gpuherd::gpu::sim
