// The queue's GPUs as the scheduler sees them: which are drained (and by
// whom: a typed origin), their latest burn-in health, and their live state
// from telemetry. Owns the drains: every change goes into the turn's
// WriteBatch with its event. Loop thread only.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>

#include "core/status.h"
#include "daemon/daemon_state.h"
#include "daemon/queue/drain_origin.h"
#include "sched/fleet_state.h"

namespace gpuherd::daemon::queue {

struct GpuDrain {
  DrainOrigin origin = DrainOrigin::kOperator;
  std::string reason;
  TimeMs since = 0;
};

class GpuPool {
 public:
  // `state` must outlive the pool, its fleet discovered.
  explicit GpuPool(DaemonState* state);

  // Reads the stored drains (at start, and after a failed commit).
  Status Load();

  // Drains `position`. gpuherd's own origins leave a drained GPU as it is; an
  // operator's drain replaces any (the operator owns it from then on).
  // Returns whether the drain changed.
  bool Drain(int position, DrainOrigin origin, const std::string& reason);
  // Lifts the drain of `position` when `lifter` may (drain_origin.h);
  // FailedPrecondition says why not. `by` names who lifted it, for the event.
  Status Lift(int position, DrainLifter lifter, const std::string& by);
  std::optional<GpuDrain> DrainOf(const std::string& uuid) const;
  const std::map<std::string, GpuDrain>& drains() const { return drains_; }

  // Self-healing's suspect GPUs (scheduler rule 12: last for long jobs).
  // Returns whether the mark changed.
  bool SetSuspect(const std::string& uuid, bool suspect);

  // The scheduler's view: `static_fleet` with drains, health and the latest
  // readings filled in (occupancy is left to the caller).
  sched::FleetState View(const sched::FleetState& static_fleet) const;

 private:
  // Re-reads the latest burn-in verdict of every GPU, at most every few
  // seconds (a scheduling pass may run many times a second).
  void RefreshHealth() const;

  DaemonState* state_;
  std::map<std::string, GpuDrain> drains_;  // uuid → drain
  std::set<std::string> suspect_;           // uuids
  struct Health {
    int score = 0;
    bool unhealthy = false;
  };
  mutable std::map<std::string, Health> health_;
  mutable TimeMs health_read_at_ = 0;
};

}  // namespace gpuherd::daemon::queue
