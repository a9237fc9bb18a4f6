// The read-only views without a daemon: opens the GPU driver in this process
// and samples it, producing the same JSON the daemon serves.
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "api/events.h"
#include "api/gpus.h"
#include "gpu/open.h"
#include "host/clock.h"
#include "telemetry/sampler.h"
#include "telemetry/telemetry.h"

namespace gpuherd::cli {

class LocalFleet {
 public:
  static Result<std::unique_ptr<LocalFleet>> Open(const gpu::DriverChoice& choice, host::Clock* clock);
  // Samples every GPU now and returns the fleet as the API shows it.
  Result<api::Fleet> Snapshot();
  // Events raised by the readings so far (lost GPUs, XIDs, PCIe...).
  const std::vector<api::Event>& events() const { return events_; }

 private:
  LocalFleet() = default;
  host::Clock* clock_ = nullptr;
  gpu::OpenedDriver opened_;
  gpu::Fleet fleet_;
  std::unique_ptr<telemetry::Sampler> sampler_;
  std::unique_ptr<telemetry::Telemetry> telemetry_;
  std::vector<api::Event> events_;
};

}  // namespace gpuherd::cli
