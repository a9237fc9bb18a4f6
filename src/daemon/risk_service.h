// Live failure risk: keeps each GPU's newest minute rollups (the model's
// window), scores them with the model in the state directory as each minute
// closes, publishes the risk in DaemonState::failure_risk (for /v1/gpus and
// /metrics) and, when a GPU's risk reaches the model's threshold, raises the
// gpu_failure_risk alert through the alert service with its action: drain
// the GPU and checkpoint and requeue its jobs. Without a model file no risk
// is shown. Lives on the event-loop thread; not thread-safe.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alerts/engine.h"
#include "daemon/alert_service.h"
#include "daemon/daemon_state.h"
#include "predict/model.h"

namespace gpuherd::daemon {

inline constexpr const char* kRiskRule = "gpu_failure_risk";

class RiskService {
 public:
  // `state` must outlive the service; `alerts` may be null (risk is then
  // shown but nothing acts on it). `model` null: no risk is shown.
  RiskService(DaemonState* state, AlertService* alerts, std::unique_ptr<predict::RiskModel> model);
  // Loads <home>/predict/risk-model.json when it exists and takes each GPU's
  // last stored hour of rollups; an unreadable or outdated file is logged and
  // the daemon runs without risk.
  static std::unique_ptr<RiskService> Create(DaemonState* state, AlertService* alerts,
                                             const std::string& model_path);

  // The rollups closed in this round: scores each GPU whose minute closed.
  void OnRollups(const std::vector<store::RollupRecord>& closed, TimeMs now);

  bool has_model() const { return model_ != nullptr; }
  double threshold() const;

 private:
  void Step(const gpu::GpuInfo& info, double risk, TimeMs now);

  DaemonState* state_;
  AlertService* alerts_;
  std::unique_ptr<predict::RiskModel> model_;
  std::map<std::string, std::deque<store::RollupRecord>> windows_;  // by GPU UUID
  std::map<std::string, alerts::Alert> firing_;                     // by GPU UUID
};

}  // namespace gpuherd::daemon
