#include "daemon/metrics_service.h"

#include "core/version.h"
#include "telemetry/prometheus.h"

namespace gpuherd::daemon {

void MetricsService::AfterRound() {
  for (const gpu::GpuInfo& info : state_->fleet.gpus) {
    const gpu::GpuSample* s = state_->telemetry->Latest(info.index);
    if (s == nullptr) continue;
    XidTally& tally = xids_[info.uuid];
    // A lost GPU's newest reading stays the same round after round.
    if (s->time <= tally.counted_up_to) continue;
    tally.counted_up_to = s->time;
    for (const gpu::XidEvent& x : s->xids) {
      tally.last_xid = x.xid;
      ++tally.count;
    }
  }
}

std::string MetricsService::Render() {
  telemetry::MetricsInput in;
  in.hostname = state_->hostname;
  in.version = kVersion;
  in.driver = state_->fleet.driver_name;
  in.simulated = state_->fleet.simulated;
  std::vector<int> jobs_on = jobs_ ? jobs_->JobsPerGpu() : std::vector<int>();
  const std::map<std::string, GpuHealthSummary>* health = alerts_ ? &alerts_->LatestHealth() : nullptr;
  in.gpus.reserve(state_->fleet.gpus.size());
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    const gpu::GpuInfo& info = state_->fleet.gpus[i];
    telemetry::GpuMetrics g;
    g.info = &info;
    g.latest = state_->telemetry->Latest(info.index);
    g.lost = state_->telemetry->State(info.index) == telemetry::GpuState::kLost;
    const XidTally& tally = xids_[info.uuid];
    g.last_xid = tally.last_xid;
    g.xid_count = tally.count;
    if (i < jobs_on.size()) g.jobs = jobs_on[i];
    if (health) {
      if (auto h = health->find(info.uuid); h != health->end()) {
        g.health_score = h->second.score;
        g.verdict = h->second.verdict;
      }
    }
    if (self_heal_) g.health_state = alerts::GpuHealthName(self_heal_->StateOf(static_cast<int>(i)));
    if (auto r = state_->failure_risk.find(info.uuid); r != state_->failure_risk.end()) g.failure_risk = r->second;
    in.gpus.push_back(g);
  }
  if (jobs_) {
    in.jobs_by_state = jobs_->CountByState();
    in.gpu_seconds_by_user = jobs_->GpuSecondsByUser(state_->clock->Now());
    in.scheduler_pass_seconds = jobs_->last_pass_seconds();
  }
  if (alerts_) {
    in.alerts_firing = alerts_->Firing();
    in.ib_ports = alerts_->IbPorts();
  }
  if (connections_) in.connections = connections_();
  return telemetry::RenderMetrics(in);
}

}  // namespace gpuherd::daemon
