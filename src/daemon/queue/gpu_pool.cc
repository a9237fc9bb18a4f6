#include "daemon/queue/gpu_pool.h"

#include <fmt/format.h>

namespace gpuherd::daemon::queue {

GpuPool::GpuPool(DaemonState* state) : state_(state) {}

Status GpuPool::Load() {
  auto drains = state_->store->ListDrains();
  if (!drains.ok()) return drains.status();
  drains_.clear();
  for (const auto& d : *drains) {
    drains_[d.uuid] = {ParseDrainOrigin(d.origin).value_or(DrainOrigin::kOperator), d.reason, d.since};
  }
  return Status::Ok();
}

bool GpuPool::Drain(int pos, DrainOrigin origin, const std::string& reason) {
  const gpu::GpuInfo& g = state_->fleet.gpus.at(pos);
  // An operator's drain takes over any drain (and only an operator lifts it
  // then); gpuherd's own never replace one.
  if (drains_.count(g.uuid) && origin != DrainOrigin::kOperator) return false;
  const TimeMs now = state_->clock->Now();
  drains_[g.uuid] = {origin, reason, now};
  store::DrainRecord r{g.uuid, true, reason, now};
  r.origin = DrainOriginName(origin);
  state_->batch.drains.push_back(r);
  std::string until = origin == DrainOrigin::kOperator ? "until an operator returns it"
                                                       : "until a passing burn-in or an operator returns it";
  state_->batch.events.push_back({0, now, "gpu.drained", store::Severity::kWarning, g.uuid,
                                  fmt::format("GPU {} drained ({}) {}: {}", g.index, DrainOriginName(origin), until,
                                              reason),
                                  fmt::format(R"({{"origin":"{}"}})", DrainOriginName(origin))});
  return true;
}

Status GpuPool::Lift(int pos, DrainLifter lifter, const std::string& by) {
  const gpu::GpuInfo& g = state_->fleet.gpus.at(pos);
  auto it = drains_.find(g.uuid);
  if (it == drains_.end()) return FailedPrecondition(fmt::format("GPU {} is not drained", g.index));
  if (!MayLift(lifter, it->second.origin)) {
    return FailedPrecondition(fmt::format("GPU {} was drained by an operator; only an operator returns it", g.index));
  }
  drains_.erase(it);
  const TimeMs now = state_->clock->Now();
  state_->batch.drains.push_back({g.uuid, false, "", now});
  state_->batch.events.push_back({0, now, "gpu.undrained", store::Severity::kInfo, g.uuid,
                                  fmt::format("GPU {} returned to work by {}", g.index, by), "{}"});
  return Status::Ok();
}

std::optional<GpuDrain> GpuPool::DrainOf(const std::string& uuid) const {
  auto it = drains_.find(uuid);
  return it == drains_.end() ? std::nullopt : std::optional<GpuDrain>(it->second);
}

bool GpuPool::SetSuspect(const std::string& uuid, bool suspect) {
  return suspect ? suspect_.insert(uuid).second : suspect_.erase(uuid) > 0;
}

void GpuPool::RefreshHealth() const {
  constexpr DurationMs kHealthRefresh = 5 * kSecondMs;
  TimeMs now = state_->clock->Now();
  if (health_read_at_ != 0 && now - health_read_at_ < kHealthRefresh) return;
  health_read_at_ = now;
  auto latest = state_->store->LatestBurnInPerGpu();
  if (!latest.ok()) return;  // keep the previous verdicts; the store logs its own errors
  health_.clear();
  for (const store::BurnInRecord& r : *latest) health_[r.gpu_uuid] = {r.score, r.verdict == "unhealthy"};
}

sched::FleetState GpuPool::View(const sched::FleetState& static_fleet) const {
  RefreshHealth();
  sched::FleetState fleet = static_fleet;
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    sched::GpuState& g = fleet.gpus[i];
    g.drained = drains_.count(g.uuid) > 0;
    g.suspect = suspect_.count(g.uuid) > 0;
    if (auto h = health_.find(g.uuid); h != health_.end()) {
      g.health_score = h->second.score;
      g.healthy = !h->second.unhealthy;
    }
    if (!state_->telemetry) continue;
    g.lost = state_->telemetry->State(static_cast<int>(i)) == telemetry::GpuState::kLost;
    if (const gpu::GpuSample* s = state_->telemetry->Latest(static_cast<int>(i))) {
      g.temp_c = s->temp_c;
      g.memory_used_bytes = s->mem_used_bytes.value_or(0);
      g.thermal_throttling = s->throttle_reasons && (*s->throttle_reasons & gpu::throttle::kThermalMask);
    }
  }
  return fleet;
}

}  // namespace gpuherd::daemon::queue
