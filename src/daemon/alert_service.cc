#include "daemon/alert_service.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "alerts/ib_counters.h"
#include "daemon/risk_service.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;

// How far back GET /v1/alerts?all=1 lists resolved alerts, and how many.
constexpr DurationMs kRecentlyResolved = 24 * kHourMs;
constexpr int kMaxResolvedListed = 500;
// Burn-ins per GPU read for the health history; the default rule looks 30 days back.
constexpr int kHealthHistoryRuns = 100;

bool Completed(const store::BurnInRecord& r) { return r.outcome == "passed" || r.outcome == "faults_found"; }

store::AlertRecord ToRecord(const alerts::Alert& a) {
  store::AlertRecord r;
  r.rule = a.rule;
  r.subject = a.subject;
  r.gpu_index = a.gpu_index;
  r.state = alerts::AlertStateName(a.state);
  r.pending_since = a.pending_since;
  r.fired_at = a.fired_at;
  r.resolved_at = a.resolved_at;
  r.value = std::isfinite(a.value) ? a.value : 0;  // SQLite would store NaN as NULL and refuse the row
  r.severity = a.severity;
  r.action = alerts::ActionName(a.action);
  r.summary = a.summary;
  return r;
}

alerts::Alert FromRecord(const store::AlertRecord& r) {
  alerts::Alert a;
  a.rule = r.rule;
  a.subject = r.subject;
  a.gpu_index = r.gpu_index;
  a.state = alerts::ParseAlertState(r.state).value_or(alerts::AlertState::kInactive);
  a.pending_since = r.pending_since;
  a.fired_at = r.fired_at;
  a.resolved_at = r.resolved_at;
  a.value = r.value;
  a.severity = r.severity;
  a.action = alerts::ParseAction(r.action).value_or(alerts::Action::kNotify);
  a.summary = r.summary;
  return a;
}

}  // namespace

AlertService::AlertService(DaemonState* state, JobService* jobs, AlertServiceOptions options)
    : state_(state), jobs_(jobs), options_(std::move(options)), engine_(options_.rules) {
  DurationMs window = engine_.LongestWindow();
  DurationMs interval = std::max<DurationMs>(state_->sample_interval, 1);
  // One reading more than the window holds, so that a counter's increase
  // over the whole window has its starting point.
  samples_needed_ = static_cast<size_t>(window / interval) + 2;
}

Result<std::unique_ptr<AlertService>> AlertService::Create(DaemonState* state, JobService* jobs,
                                                           AlertServiceOptions options) {
  std::unique_ptr<alerts::Notifier> notifier;
  if (!options.notify.webhook_urls.empty() || !options.notify.command.empty()) {
    auto started = alerts::Notifier::Start(options.notify);
    if (!started.ok()) return started.status();
    notifier = std::move(started).value();
  }
  std::unique_ptr<AlertService> service(new AlertService(state, jobs, std::move(options)));
  service->notifier_ = std::move(notifier);
  return service;
}

Status AlertService::Restore() {
  TimeMs now = state_->clock->Now();
  GPUHERD_RETURN_IF_ERROR(state_->store->PruneResolvedAlerts(now - options_.resolved_retention));
  auto stored = state_->store->ListActiveAlerts();
  if (!stored.ok()) return stored.status().Annotate("cannot restore the active alerts");
  std::vector<alerts::Alert> active;
  for (const store::AlertRecord& r : *stored) active.push_back(FromRecord(r));
  engine_.Restore(active);
  // A stored alert of a rule no longer configured can never resolve through
  // the engine: it is resolved now, so that it does not stay active forever.
  std::vector<alerts::Alert> kept = engine_.Active();
  for (alerts::Alert a : active) {
    bool restored = std::any_of(kept.begin(), kept.end(),
                                [&](const alerts::Alert& k) { return k.rule == a.rule && k.subject == a.subject; });
    if (restored) continue;
    const auto& adopted = options_.adopted_rules;
    if (a.state == alerts::AlertState::kFiring &&
        std::find(adopted.begin(), adopted.end(), a.rule) != adopted.end()) {
      external_[{a.rule, a.subject}] = a;
      external_rules_[a.rule] = a.severity;
      adopted_.push_back(a);
      continue;
    }
    a.state = a.state == alerts::AlertState::kFiring ? alerts::AlertState::kResolved : alerts::AlertState::kInactive;
    a.resolved_at = a.state == alerts::AlertState::kResolved ? now : 0;
    state_->batch.alerts.push_back(ToRecord(a));
  }
  return ReloadHealth();
}

Status AlertService::ReloadHealth() {
  health_stale_ = false;
  health_.clear();
  latest_health_.clear();
  auto latest = state_->store->LatestBurnInPerGpu();
  if (!latest.ok()) return latest.status().Annotate("cannot read the burn-in history");
  for (const store::BurnInRecord& newest : *latest) {
    latest_health_[newest.gpu_uuid] = {newest.score, newest.verdict};
    store::BurnInFilter filter;
    filter.gpu_uuid = newest.gpu_uuid;
    filter.limit = kHealthHistoryRuns;
    auto runs = state_->store->ListBurnInRuns(filter);
    if (!runs.ok()) return runs.status().Annotate("cannot read the burn-in history");
    std::vector<alerts::HealthPoint>& points = health_[newest.gpu_uuid];
    for (auto it = runs->rbegin(); it != runs->rend(); ++it) {  // newest first → oldest first
      if (Completed(*it)) points.push_back({it->finished, it->score});
    }
  }
  return Status::Ok();
}

void AlertService::ReadIbPorts(TimeMs now) {
  const host::Host& host = options_.ib_host ? *options_.ib_host : *state_->host;
  auto ports = alerts::ReadIbCounters(host);
  if (!ports.ok()) {
    if (!ib_warned_) spdlog::warn("cannot read InfiniBand counters: {}", ports.status().ToString());
    ib_warned_ = true;
    return;
  }
  std::map<std::string, alerts::IbPortInput> next;
  for (alerts::IbPortCounters& p : *ports) {
    std::string key = p.device + "/" + p.port;
    alerts::IbPortInput& in = next[key];
    if (auto old = ib_ports_.find(key); old != ib_ports_.end()) in = std::move(old->second);
    in.device = p.device;
    in.port = p.port;
    in.recent.push_back({now, std::move(p.counters)});
    while (in.recent.size() > samples_needed_) in.recent.erase(in.recent.begin());
  }
  ib_ports_ = std::move(next);  // a port that disappeared leaves the input
}

alerts::EvalInput AlertService::BuildInput(TimeMs now) {
  if (health_stale_) {
    if (Status s = ReloadHealth(); !s.ok()) spdlog::warn("{}", s.ToString());
  }
  ReadIbPorts(now);
  alerts::EvalInput in;
  std::vector<int> jobs_on = jobs_ ? jobs_->JobsPerGpu() : std::vector<int>();
  in.gpus.reserve(state_->fleet.gpus.size());
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    const gpu::GpuInfo& info = state_->fleet.gpus[i];
    alerts::GpuInput g;
    g.info = &info;
    g.recent = state_->telemetry->Recent(info.index, samples_needed_);
    g.lost = state_->telemetry->State(info.index) == telemetry::GpuState::kLost;
    g.job_running = i < jobs_on.size() && jobs_on[i] > 0;
    if (auto h = health_.find(info.uuid); h != health_.end()) g.health = h->second;
    in.gpus.push_back(std::move(g));
  }
  for (auto& [key, port] : ib_ports_) in.ib_ports.push_back(port);
  return in;
}

void AlertService::AfterRound(TimeMs now) {
  std::vector<alerts::AlertTransition> transitions = engine_.Evaluate(BuildInput(now), now);
  for (const alerts::AlertTransition& t : transitions) {
    Record(t);
    if (t.to == alerts::AlertState::kFiring) Act(t);
  }
  for (json& payload : alerts::PayloadsFor(transitions, options_.payload)) unsent_.push_back(std::move(payload));
}

void AlertService::RaiseExternal(const alerts::AlertTransition& t) {
  const auto key = std::make_pair(t.alert.rule, t.alert.subject);
  external_rules_[t.alert.rule] = t.alert.severity;
  if (t.to == alerts::AlertState::kFiring || t.to == alerts::AlertState::kPending) {
    external_[key] = t.alert;
  } else if (auto it = external_.find(key); it != external_.end() && it->second.pending_since == t.alert.pending_since) {
    external_.erase(it);  // only the alert resolved, not a later one of the same subject
  }
  Record(t);
  if (t.to == alerts::AlertState::kFiring) Act(t);
  for (json& payload : alerts::PayloadsFor({t}, options_.payload)) unsent_.push_back(std::move(payload));
}

void AlertService::AfterCommit(bool committed) {
  std::vector<json> payloads = std::move(unsent_);
  unsent_.clear();
  if (!committed || !notifier_) return;
  for (const json& payload : payloads) notifier_->Send(payload);
}

void AlertService::Record(const alerts::AlertTransition& t) {
  state_->batch.alerts.push_back(ToRecord(t.alert));
  const alerts::Alert& a = t.alert;
  std::string kind;
  store::Severity severity = store::Severity::kInfo;
  switch (t.to) {
    case alerts::AlertState::kPending: kind = "alert.pending"; break;
    case alerts::AlertState::kFiring:
      kind = "alert.firing";
      severity = a.severity;
      break;
    case alerts::AlertState::kResolved: kind = "alert.resolved"; break;
    case alerts::AlertState::kInactive: return;  // a pending alert that never fired: no news
  }
  std::string where = a.gpu_index >= 0                      ? fmt::format("GPU {}", a.gpu_index)
                      : a.rule.rfind("pipeline_", 0) == 0 ? a.subject
                                                          : "InfiniBand port " + a.subject;
  std::string message = fmt::format("{} {} on {}: {} (value {:g})", a.rule, alerts::AlertStateName(t.to), where,
                                    a.summary, a.value);
  json data = {{"rule", a.rule},
               {"subject", a.subject},
               {"from", alerts::AlertStateName(t.from)},
               {"value", a.value},
               {"action", alerts::ActionName(a.action)},
               {"pending_since", a.pending_since}};
  // A GPU's alert is on its UUID; one on a job ("job 7 xid 31") names the
  // job, and its event belongs to the GPU of its index.
  std::string gpu_uuid = a.gpu_index >= 0 ? a.subject : "";
  const auto& gpus = state_->fleet.gpus;
  if (a.gpu_index >= 0 && std::none_of(gpus.begin(), gpus.end(), [&](const auto& g) { return g.uuid == a.subject; })) {
    for (const gpu::GpuInfo& g : gpus) {
      if (g.index == a.gpu_index) gpu_uuid = g.uuid;
    }
  }
  state_->batch.events.push_back({0, t.time, kind, severity, gpu_uuid, message, data.dump()});
}

void AlertService::Act(const alerts::AlertTransition& t) {
  const alerts::Alert& a = t.alert;
  if (a.action != alerts::Action::kDrain && a.action != alerts::Action::kCheckpointAndMove) return;
  int pos = -1;
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    if (state_->fleet.gpus[i].uuid == a.subject) pos = static_cast<int>(i);
  }
  if (pos < 0 || !jobs_) {
    spdlog::warn("alert {} on {}: action {} needs a GPU of this fleet; only notified", a.rule, a.subject,
                 alerts::ActionName(a.action));
    return;
  }
  const std::string reason = "alert " + a.rule;
  const queue::DrainOrigin origin = a.rule == kRiskRule ? queue::DrainOrigin::kRisk : queue::DrainOrigin::kAlert;
  if (a.action == alerts::Action::kCheckpointAndMove) {
    int moved = jobs_->MoveJobsOff(pos, reason, origin);
    spdlog::warn("alert {} on GPU {}: drained, {} job(s) checkpointed and requeued", a.rule, a.gpu_index, moved);
    return;
  }
  // Drained already, by an operator or a fault: its origin and reason stay.
  jobs_->DrainFor(pos, origin, reason + " (gpuherd)");
}

Result<std::vector<api::Alert>> AlertService::List(bool all) {
  std::vector<api::Alert> list;
  for (const alerts::Alert& a : engine_.Active()) list.push_back(api::AlertOf(ToRecord(a)));
  for (const auto& [key, a] : external_) list.push_back(api::AlertOf(ToRecord(a)));
  if (all) {
    auto resolved = state_->store->ListResolvedAlerts(state_->clock->Now() - kRecentlyResolved, kMaxResolvedListed);
    if (!resolved.ok()) return resolved.status();
    for (const store::AlertRecord& r : *resolved) list.push_back(api::AlertOf(r));
  }
  // What the value is in, from its rule (external alerts carry none).
  std::map<std::string, std::string> units;
  for (const alerts::Rule& r : engine_.rules()) units[r.name] = alerts::ConditionUnit(r.condition);
  for (api::Alert& a : list) {
    if (auto it = units.find(a.rule); it != units.end()) a.unit = it->second;
  }
  return list;
}

std::vector<telemetry::AlertsFiring> AlertService::Firing() const {
  std::map<std::string, telemetry::AlertsFiring> by_rule;
  // Every rule is listed, firing or not, so that a series drops to 0 rather
  // than vanishing when its alert resolves.
  for (const alerts::Rule& r : engine_.rules()) by_rule[r.name] = {r.name, store::SeverityName(r.severity), 0};
  for (const auto& [name, severity] : external_rules_) by_rule[name] = {name, store::SeverityName(severity), 0};
  for (const alerts::Alert& a : engine_.Active()) {
    if (a.state == alerts::AlertState::kFiring) ++by_rule[a.rule].count;
  }
  for (const auto& [key, a] : external_) {
    if (a.state == alerts::AlertState::kFiring) ++by_rule[a.rule].count;
  }
  std::vector<telemetry::AlertsFiring> out;
  for (auto& [name, f] : by_rule) out.push_back(std::move(f));
  return out;
}

const std::map<std::string, GpuHealthSummary>& AlertService::LatestHealth() {
  if (health_stale_) {
    if (Status s = ReloadHealth(); !s.ok()) spdlog::warn("{}", s.ToString());
  }
  return latest_health_;
}

std::vector<telemetry::IbPortMetrics> AlertService::IbPorts() const {
  std::vector<telemetry::IbPortMetrics> out;
  for (const auto& [key, port] : ib_ports_) {
    if (port.recent.empty()) continue;
    out.push_back({port.device, port.port, port.recent.back().counters});
  }
  return out;
}

}  // namespace gpuherd::daemon
