// Everything the daemon knows that changes, owned by the event-loop thread.
// Only code running on that thread may touch it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/time.h"
#include "api/gpus.h"
#include "gpu/types.h"
#include "host/clock.h"
#include "host/host.h"
#include "store/records.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

namespace gpuherd::daemon {

struct DaemonState {
  gpu::Fleet fleet;
  std::string sim_reason;        // non-empty when the fleet is simulated
  std::string hostname;
  host::Clock* clock = nullptr;   // not owned
  std::unique_ptr<host::Host> host;  // /proc and /sys of this machine
  TimeMs started_at = 0;
  DurationMs sample_interval = 0;
  std::unique_ptr<store::Store> store;
  std::unique_ptr<telemetry::Telemetry> telemetry;
  // What this turn of the loop changed; committed in one transaction at its end.
  store::WriteBatch batch;
  uint64_t rounds = 0, skipped_ticks = 0;
  DurationMs last_round_took = 0;
  // GPU UUID → failure risk (0..1) from the risk model; absent without a
  // model or before a GPU has enough minutes of history (risk_service.h).
  std::map<std::string, double> failure_risk;

  api::Gpu View(int index) const { return api::GpuOf(fleet.gpus[index], *telemetry, index); }
  api::Fleet Fleet() const { return api::FleetOf(fleet, *telemetry, sim_reason, hostname); }
};

}  // namespace gpuherd::daemon
