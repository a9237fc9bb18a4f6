// The GPU driver behind one interface: NVML on a real machine, the simulated
// fleet elsewhere. Not thread-safe: one thread (the sampler) owns a Driver.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "gpu/types.h"

namespace gpuherd::gpu {

class Driver {
 public:
  virtual ~Driver() = default;

  // "nvml" or "sim".
  virtual std::string name() const = 0;
  virtual bool simulated() const = 0;

  // Enumerates the GPUs and their static facts. Called once after creation and
  // again to re-enumerate. Fails with kUnavailable when the driver is absent.
  virtual Result<Fleet> Discover() = 0;

  // One reading of GPU `index` (as enumerated by Discover) taken at `now`.
  // An error means the GPU did not answer; the caller marks it lost.
  virtual Result<GpuSample> Sample(int index, TimeMs now) = 0;
};

}  // namespace gpuherd::gpu
