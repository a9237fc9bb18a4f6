// Where the read-only fleet views get their data: the running daemon, or,
// when none runs or a simulated fleet is asked for, the GPUs read directly
// (never a simulated fleet unless asked for: no driver is a NoDriver error).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/local_fleet.h"
#include "host/clock.h"

namespace gpuherd::cli {

class FleetSource {
 public:
  // `clock` must outlive the source.
  static Result<std::unique_ptr<FleetSource>> Open(const CommandContext& ctx, const DriverFlags& flags,
                                                   host::Clock* clock);
  Result<api::Fleet> Fleet();
  // The most recent events (newest last), from the daemon's log or, when
  // reading directly, those the readings raised in this process.
  Result<std::vector<api::Event>> RecentEvents(int limit);
  // The daemon's pending and firing alerts; none when reading directly (no
  // rules run in this process).
  Result<std::vector<api::Alert>> ActiveAlerts();
  // "" when reading the daemon; otherwise why GPUs are read directly.
  const std::string& direct_reason() const { return direct_reason_; }

 private:
  std::unique_ptr<DaemonClient> daemon_;
  std::unique_ptr<LocalFleet> local_;
  std::string direct_reason_;
};

// One reading of the fleet, for the commands that show it once (gpus, topo).
struct FleetReading {
  std::unique_ptr<host::Clock> clock;  // the source's; outlives it
  std::unique_ptr<FleetSource> source;
  api::Fleet fleet;
};
// Opens the source and reads the fleet; on failure reports it on `ctx` (exit
// code 3 when there is no driver) and returns nullopt.
std::optional<FleetReading> ReadFleetOnce(CommandContext* ctx, const DriverFlags& flags);

}  // namespace gpuherd::cli
