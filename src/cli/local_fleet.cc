#include "cli/local_fleet.h"

#include "host/host.h"

namespace gpuherd::cli {

Result<std::unique_ptr<LocalFleet>> LocalFleet::Open(const gpu::DriverChoice& choice, host::Clock* clock) {
  std::unique_ptr<LocalFleet> local(new LocalFleet());
  local->clock_ = clock;
  auto opened = gpu::OpenDriver(choice);
  if (!opened.ok()) return opened.status();
  local->opened_ = std::move(opened).value();
  auto fleet = local->opened_.driver->Discover();
  if (!fleet.ok()) return fleet.status().Annotate("cannot enumerate GPUs");
  local->fleet_ = *fleet;
  // Sampled on this thread only (SampleOnce), never started as a thread.
  auto sampler = telemetry::Sampler::Create(local->opened_.driver.get(), clock, local->fleet_);
  if (!sampler.ok()) return sampler.status();
  local->sampler_ = std::move(sampler).value();
  local->telemetry_ = std::make_unique<telemetry::Telemetry>(telemetry::TelemetryOptions{});
  local->telemetry_->SetFleet(local->fleet_);
  return local;
}

Result<api::Fleet> LocalFleet::Snapshot() {
  auto round = sampler_->SampleOnce(clock_->Now());
  if (!round.ok()) return round.status();
  auto result = telemetry_->Ingest(*round);
  for (const auto& e : result.events) {
    events_.push_back(api::EventOf(e));
  }
  return api::FleetOf(fleet_, *telemetry_, opened_.sim_reason, host::NewHost()->Hostname());
}

}  // namespace gpuherd::cli
