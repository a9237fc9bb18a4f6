// The alert engine inside the daemon: after every sampling round it builds
// the engine's input from the daemon's state (recent readings, which GPUs
// jobs hold, burn-in health history, InfiniBand counters), evaluates the
// rules, carries out each firing alert's action once (drain; checkpoint and
// move through the job service; notify) and records every transition in the
// turn's batch. Lives on the event-loop thread; not thread-safe.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alerts/engine.h"
#include "alerts/notify.h"
#include "alerts/rules.h"
#include "core/status.h"
#include "daemon/daemon_state.h"
#include "api/events.h"
#include "daemon/job_service.h"
#include "host/host.h"
#include "telemetry/prometheus.h"

namespace gpuherd::daemon {

struct AlertServiceOptions {
  std::vector<alerts::Rule> rules;  // the daemon passes DefaultRules() unless a file replaces them
  alerts::NotifyOptions notify;     // no webhook and no command: no notifier thread
  alerts::PayloadContext payload;   // the hostname the webhook payload names
  // Where /sys/class/infiniband is read; nullptr: the daemon's own host.
  std::unique_ptr<host::Host> ib_host;
  // Resolved alerts older than this are deleted at start.
  DurationMs resolved_retention = 30 * 24 * kHourMs;
  // Rules raised outside the engine whose owner takes its firing alerts back
  // at start (TakeAdopted) and decides when they resolve; other such alerts
  // resolve at start.
  std::vector<std::string> adopted_rules;
};

// The newest completed burn-in of a GPU, as /metrics shows it.
struct GpuHealthSummary {
  int score = 0;
  std::string verdict;
};

class AlertService {
 public:
  // `state` and `jobs` must outlive the service. Starts the notifier's
  // thread when a webhook or a command hook is configured; fails on a bad URL.
  static Result<std::unique_ptr<AlertService>> Create(DaemonState* state, JobService* jobs,
                                                      AlertServiceOptions options);

  // At start: takes back the pending and firing alerts a previous daemon
  // stored, so that an alert already firing does not fire (and act) again.
  Status Restore();
  // The firing alerts of AlertServiceOptions::adopted_rules that Restore
  // kept, once; listed and counted as firing until their owner resolves them
  // through RaiseExternal.
  std::vector<alerts::Alert> TakeAdopted() { return std::move(adopted_); }

  // After each sampling round, before the turn's commit: evaluates the rules
  // at `now` (the round's time) and acts.
  void AfterRound(TimeMs now);
  // After the turn's commit: hands the notifications of committed
  // transitions to the notifier, so that nobody is told of an alert the
  // store lost. `committed` false drops them.
  void AfterCommit(bool committed);
  // A burn-in was recorded in this turn: health history is reloaded before
  // the next evaluation.
  void OnBurnInsRecorded() { health_stale_ = true; }
  // An alert decided outside the rule engine (the failure-risk model):
  // recorded, acted on when firing and notified like the rules' own; listed
  // by ListJson and counted by Firing while it fires.
  void RaiseExternal(const alerts::AlertTransition& t);

  // GET /v1/alerts?all=1: {"alerts": [...], "now"}; `all` adds the alerts
  // resolved in the last day.
  Result<nlohmann::json> ListJson(bool all);

  // For /metrics: firing alerts counted by rule, the newest burn-in of each
  // GPU by UUID, and the InfiniBand ports' newest counters.
  std::vector<telemetry::AlertsFiring> Firing() const;
  const std::map<std::string, GpuHealthSummary>& LatestHealth();
  std::vector<telemetry::IbPortMetrics> IbPorts() const;

  const alerts::AlertEngine& engine() const { return engine_; }
  // nullptr when nothing is configured to be notified.
  alerts::Notifier* notifier() { return notifier_.get(); }

 private:
  AlertService(DaemonState* state, JobService* jobs, AlertServiceOptions options);

  Status ReloadHealth();
  void ReadIbPorts(TimeMs now);
  alerts::EvalInput BuildInput(TimeMs now);
  void Act(const alerts::AlertTransition& t);
  void Record(const alerts::AlertTransition& t);

  DaemonState* state_;
  JobService* jobs_;
  AlertServiceOptions options_;
  alerts::AlertEngine engine_;
  std::unique_ptr<alerts::Notifier> notifier_;
  // Readings kept per GPU: enough for the longest window, plus one.
  size_t samples_needed_ = 2;
  // GPU UUID → completed burn-ins (oldest first), and the newest one.
  std::map<std::string, std::vector<alerts::HealthPoint>> health_;
  std::map<std::string, GpuHealthSummary> latest_health_;
  bool health_stale_ = true;
  // "mlx5_0/1" → its readings, oldest first, trimmed to the longest window.
  std::map<std::string, alerts::IbPortInput> ib_ports_;
  bool ib_warned_ = false;
  // Payloads of this turn's transitions, sent after its commit.
  std::vector<nlohmann::json> unsent_;
  // Alerts raised from outside the engine and firing now, by (rule, subject);
  // the severity of each such rule ever raised, so that its series stays.
  std::map<std::pair<std::string, std::string>, alerts::Alert> external_;
  std::map<std::string, store::Severity> external_rules_;
  std::vector<alerts::Alert> adopted_;
};

}  // namespace gpuherd::daemon
