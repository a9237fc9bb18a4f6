// GET /metrics from the daemon's state: the fleet and its latest readings,
// XIDs seen per GPU, burn-in health, the queue and the alerts, rendered by
// telemetry::RenderMetrics. Lives on the event-loop thread; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "daemon/alert_service.h"
#include "daemon/daemon_state.h"
#include "daemon/job_service.h"
#include "daemon/self_heal_service.h"
#include "telemetry/prometheus.h"

namespace gpuherd::daemon {

class MetricsService {
 public:
  // Every pointer must outlive the service; `jobs` and `alerts` may be null
  // (their metrics are then left out).
  MetricsService(DaemonState* state, JobService* jobs, AlertService* alerts)
      : state_(state), jobs_(jobs), alerts_(alerts) {}

  // Each GPU's self-healing state (gpuherd_gpu_state); null: left out.
  void SetSelfHeal(const SelfHealService* self_heal) { self_heal_ = self_heal; }
  // The HTTP listeners' connection counts (gpuherd_http_*), asked for at
  // each render from the loop thread; unset: left out.
  void SetConnections(std::function<telemetry::ConnectionMetrics()> connections) {
    connections_ = std::move(connections);
  }
  // After each sampling round: counts the XIDs of the newest readings.
  void AfterRound();
  // The exposition (telemetry::kMetricsContentType).
  std::string Render();

 private:
  struct XidTally {
    TimeMs counted_up_to = 0;  // readings at or before this time are counted
    int last_xid = 0;
    uint64_t count = 0;
  };

  DaemonState* state_;
  JobService* jobs_;
  AlertService* alerts_;
  const SelfHealService* self_heal_ = nullptr;
  std::function<telemetry::ConnectionMetrics()> connections_;
  std::map<std::string, XidTally> xids_;  // by GPU UUID
};

}  // namespace gpuherd::daemon
