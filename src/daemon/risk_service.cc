#include "daemon/risk_service.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuherd::daemon {
namespace {

// The alert resolves once the risk falls this far under the threshold, so
// that a risk hovering at the threshold does not flap.
constexpr double kResolveFactor = 0.5;

}  // namespace

RiskService::RiskService(DaemonState* state, AlertService* alerts,
                         std::unique_ptr<predict::RiskModel> model)
    : state_(state), alerts_(alerts), model_(std::move(model)) {}

std::unique_ptr<RiskService> RiskService::Create(DaemonState* state, AlertService* alerts,
                                                 const std::string& model_path) {
  auto model = predict::RiskModel::Load(model_path);
  if (!model.ok()) {
    if (model.status().code() == Code::kNotFound) {
      spdlog::info("no failure-risk model at {}: risk is not shown (train one with `gpuherd predict train`)",
                   model_path);
    } else {
      spdlog::warn("failure-risk model not used: {}", model.status().ToString());
    }
    return std::make_unique<RiskService>(state, alerts, nullptr);
  }
  spdlog::info("failure-risk model {} (alarm at risk >= {:.3f}, horizon {})", model_path,
               model->info().threshold, FormatDuration(model->info().horizon));
  const DurationMs window = model->info().window;
  auto service = std::make_unique<RiskService>(
      state, alerts, std::make_unique<predict::RiskModel>(std::move(model).value()));
  // The stored last hour: a restarted daemon scores from its first minute.
  if (state->store && state->clock) {
    const TimeMs now = state->clock->Now();
    for (const auto& g : state->fleet.gpus) {
      auto stored = state->store->QueryRollups(g.uuid, now - window - kMinuteMs, now + kMinuteMs);
      if (!stored.ok()) continue;
      for (auto& r : *stored) service->windows_[g.uuid].push_back(std::move(r));
    }
  }
  return service;
}

double RiskService::threshold() const { return model_ ? model_->info().threshold : 1.0; }

void RiskService::OnRollups(const std::vector<store::RollupRecord>& closed, TimeMs now) {
  if (!model_) return;
  const DurationMs window = model_->info().window;
  predict::FeatureOptions options;
  options.window = window;
  // Every GPU whose minute closed in this round, scored in one model call:
  // a call costs far more than a row.
  std::vector<const gpu::GpuInfo*> scored;
  std::vector<float> rows;
  for (const store::RollupRecord& r : closed) {
    const gpu::GpuInfo* info = nullptr;
    for (const auto& g : state_->fleet.gpus) {
      if (g.uuid == r.uuid) info = &g;
    }
    if (!info) continue;
    auto& minutes = windows_[r.uuid];
    minutes.push_back(r);
    // One minute before the window too: the first counter delta needs it.
    while (!minutes.empty() && minutes.front().minute <= r.minute - window - kMinuteMs) minutes.pop_front();
    // Scored only once the daemon has seen the GPU for a whole window: a
    // window cut short by the daemon's start (a card just warming up under
    // its first job) looks like a fresh card's first hour to the model and
    // raised false alarms.
    if (r.minute - minutes.front().minute < window - kMinuteMs) continue;
    const std::vector<store::RollupRecord> span(minutes.begin(), minutes.end());
    auto row = predict::ExtractFeatures(span, span.size() - 1, {info->temp_slowdown_c}, options);
    if (!row) continue;  // too little history yet
    rows.insert(rows.end(), row->begin(), row->end());
    scored.push_back(info);
  }
  if (scored.empty()) return;
  auto risk = model_->Predict(rows);
  if (!risk.ok()) {
    spdlog::error("failure risk: {}", risk.status().ToString());
    return;
  }
  for (size_t i = 0; i < scored.size(); ++i) {
    state_->failure_risk[scored[i]->uuid] = (*risk)[i];
    Step(*scored[i], (*risk)[i], now);
  }
}

void RiskService::Step(const gpu::GpuInfo& info, double risk, TimeMs now) {
  auto it = firing_.find(info.uuid);
  const bool firing = it != firing_.end();
  if (!firing && risk >= threshold()) {
    alerts::Alert a;
    a.rule = kRiskRule;
    a.subject = info.uuid;
    a.gpu_index = info.index;
    a.state = alerts::AlertState::kFiring;
    a.pending_since = now;
    a.fired_at = now;
    a.value = risk;
    a.severity = store::Severity::kCritical;
    a.action = alerts::Action::kCheckpointAndMove;
    a.summary = fmt::format("hardware fault predicted within {} (risk {:.2f}): GPU drained, its jobs "
                            "checkpointed and moved",
                            FormatDuration(model_->info().horizon), risk);
    firing_[info.uuid] = a;
    spdlog::warn("GPU {}: failure risk {:.3f} >= {:.3f}", info.index, risk, threshold());
    if (alerts_) alerts_->RaiseExternal({alerts::AlertState::kInactive, alerts::AlertState::kFiring, now, a});
  } else if (firing) {
    it->second.value = risk;
    if (risk < threshold() * kResolveFactor) {
      alerts::Alert a = it->second;
      a.state = alerts::AlertState::kResolved;
      a.resolved_at = now;
      firing_.erase(it);
      // The drain stays: an operator undrains the GPU once it is looked at.
      if (alerts_) alerts_->RaiseExternal({alerts::AlertState::kFiring, alerts::AlertState::kResolved, now, a});
    }
  }
}

}  // namespace gpuherd::daemon
