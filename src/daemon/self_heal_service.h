// Self-healing GPUs in the daemon: every XID and hardware fault telemetry
// reports goes through the self-heal rules (alerts/self_heal_rules.h) and each
// GPU's state machine (alerts/gpu_state.h); the service carries out what they
// decide through the queue (drain with origin fault and move the jobs, queue a
// requalification burn-in, lift the fault drain, retire), and makes every
// transition an event with its reason and evidence, stored with the turn.
//
// An operator's drain is never lifted here: the queue refuses to lift a drain
// whose origin is the operator's, and the service never asks for it. A rule in
// shadow mode records what it would have done ("gpu.health" events with
// "shadow": true) and changes nothing.
//
// State survives a restart: the transitions are stored (gpu_health_transitions)
// and the rules' memory is rebuilt from the "gpu.fault_judged" events of the
// last window; a requalification under way carries on with its queue job.
// Lives on the event-loop thread; not thread-safe.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alerts/engine.h"
#include "api/gpus.h"
#include "alerts/gpu_state.h"
#include "alerts/self_heal_rules.h"
#include "burnin/result.h"
#include "core/status.h"
#include "daemon/daemon_state.h"
#include "daemon/turn_participant.h"
#include "sched/job.h"

namespace gpuherd::daemon {

struct SelfHealOptions {
  alerts::SelfHealPolicy rules;
  // requalify_after: `daemon --requalify-after` (0: no requalification).
  alerts::GpuStatePolicy states;
  int requalify_level = 2;       // `--requalify-level`: a level runs the ones below it
  bool allow_gpu_reset = false;  // `--allow-gpu-reset`: only with no process on the GPU
  // Rules in shadow mode (`--self-heal-shadow`); "all" shadows every rule.
  std::set<std::string> shadow_rules;
  // `--self-heal short_job_max=`: the daemon hands it to the scheduler (rule
  // 12: jobs with a longer time limit, or none, go to suspect GPUs last).
  DurationMs short_job_max = kHourMs;
};

// The rule names `--self-heal-shadow` accepts.
const std::vector<std::string>& SelfHealRuleNames();
// "window=24h", "suspect_jobs=3", ... (`--self-heal KEY=VALUE`): sets one
// threshold; kInvalidArgument names the known keys.
Status SetSelfHealThreshold(SelfHealOptions* options, const std::string& assignment);
// "rule,rule" or "all"; kInvalidArgument names the known rules.
Status SetSelfHealShadow(SelfHealOptions* options, const std::string& list);

// "job 7 xid 31": the subject of an application_xid alert. One alert per job
// and XID, so that resolving one never takes another off the alert list.
std::string JobXidSubject(const std::string& job_id, int xid);

// A job holding a GPU, to whom an XID on it is attributed.
struct JobOnGpu {
  sched::JobId id = 0;
  std::string owner;
};

// What the service asks of the queue; the daemon binds it to JobService,
// tests to a fake.
class SelfHealQueue {
 public:
  virtual ~SelfHealQueue() = default;
  // Drains the GPU with origin fault (a drain already there stays as it is)
  // and checkpoints and moves every job on it.
  virtual void DrainForFault(int position, const std::string& reason) = 0;
  // Lifts a drain gpuherd made; FailedPrecondition for an operator's drain.
  virtual Status LiftFaultDrain(int position, const std::string& by) = 0;
  // Whether the GPU's drain is an operator's.
  virtual bool OperatorDrained(int position) const = 0;
  // Whether the GPU is drained at all (by anyone).
  virtual bool Drained(int position) const = 0;
  // Queues the requalification burn-in (a maintenance job pinned to the GPU).
  virtual Result<sched::JobId> QueueRequalification(int position, int level, bool reset_first) = 0;
  virtual void CancelRequalification(sched::JobId job, const std::string& reason) = 0;
  // Per fleet position: how many jobs hold it now.
  virtual std::vector<int> JobsPerGpu() const = 0;
  // The jobs holding GPU `position` now, lowest id first.
  virtual std::vector<JobOnGpu> JobsOn(int position) const = 0;
  // Marks the GPU suspect for the scheduler (rule 12: last for long jobs)
  // or clears the mark.
  virtual void SetSuspect(int position, bool suspect) = 0;
};

class SelfHealService : public TurnParticipant {
 public:
  using AlertSink = std::function<void(const alerts::AlertTransition&)>;

  // `state` (fleet discovered, clock and store set) and `queue` must outlive
  // the service.
  SelfHealService(DaemonState* state, SelfHealQueue* queue, SelfHealOptions options);

  // At start, after the queue has reloaded: the GPUs' states from the stored
  // transitions, the rules' memory from the events of the last window.
  Status Load();
  // A failed commit dropped the turn's transitions and the queue's drains:
  // the states are read back from the store (after the queue's own reload).
  void AfterCommit(bool committed) override;
  // Alerts on jobs (an application's XID) and retirements go here.
  void SetAlertSink(AlertSink sink) { alert_sink_ = std::move(sink); }
  // The alert rules the service raises and resolves itself.
  static const std::vector<std::string>& AlertRules();
  // At start, after Load and SetAlertSink: the service's alerts a previous
  // daemon left firing. An application_xid alert stays firing while its job
  // is unfinished and younger than the rules' window, and resolves now
  // otherwise; a gpu_retired alert stays while its GPU is retired.
  void AdoptAlerts(const std::vector<alerts::Alert>& firing);

  // Whether `event` is one the service judges (an XID, a double-bit ECC
  // error, a lost GPU): the queue's own fault handling must leave it alone.
  static bool Judges(const store::EventRecord& event);
  // Telemetry's events of this round; only those Judges() accepts are used.
  void OnGpuEvents(const std::vector<store::EventRecord>& events);
  // After each round: idle and busy GPUs, timers, an operator's drains and
  // returns. Requalifications due are queued here.
  void OnRound(TimeMs now);
  // A job changed state (the queue's listener): a requalification that ended
  // without its result, an application XID's alert resolved at its job's end.
  void OnJobChanged(const sched::Job& job);
  // Burn-in runs recorded: the requalification's result. Returns the fleet
  // positions whose drain the service decides on (requalifying, quarantined,
  // retired): a plain burn-in's automatic return must leave those alone.
  std::set<int> OnBurnInRuns(const std::vector<burnin::BurnInRun>& runs);

  alerts::GpuHealth StateOf(int position) const;
  // {"state", "since", "reason", "requalify_job"?, "requalifications", "shadow_rules"?}
  api::GpuHealthState HealthState(int position) const;
  const SelfHealOptions& options() const { return options_; }

 private:
  struct Gpu {
    alerts::GpuStateMachine machine;
    sched::JobId requalify_job = 0;   // the burn-in job while requalifying
    bool busy = false;
    bool operator_drained = false;
    bool drained = false;             // as last seen: a lift by someone else shows
    std::string rule = {};            // the rule behind the latest transition
    TimeMs last_fatal_xid = 0;        // for telling one incident's several reports apart
  };

  int PositionOf(const std::string& uuid) const;
  bool Shadowed(const std::string& rule) const;
  // Feeds `input` to GPU `pos`'s machine (or, for a shadowed rule, to a copy)
  // and carries out the decision.
  void Apply(int pos, const alerts::HealthInput& input, const std::string& rule, bool shadow);
  void Carry(int pos, const alerts::HealthDecision& decision, const std::string& rule, bool shadow);
  void RecordTransition(int pos, const alerts::HealthTransition& t, const std::string& rule, bool shadow,
                        const std::vector<alerts::HealthAction>& actions);
  void Judge(int pos, const store::EventRecord& event, const alerts::RuleOutcome& outcome, int xid,
             const JobOnGpu& job);
  void TellOwner(const alerts::OwnerNotice& notice, TimeMs now);
  void Event(TimeMs now, const std::string& kind, store::Severity severity, int pos, const std::string& message,
             const nlohmann::json& data);
  void FinishRequalification(int pos, const alerts::HealthInput& input);
  void ResolveAlert(alerts::Alert a, TimeMs now);

  DaemonState* state_;
  SelfHealQueue* queue_;
  SelfHealOptions options_;
  AlertSink alert_sink_;
  alerts::SelfHealState memory_;
  std::vector<Gpu> gpus_;  // by fleet position
  // Application-XID alerts firing on jobs, one per job and XID (subject
  // JobXidSubject): resolved when the job ends, or once they are a window
  // (SelfHealPolicy::window) old.
  std::multimap<sched::JobId, alerts::Alert> job_alerts_;
  // gpu_retired alerts by fleet position: resolved when the GPU leaves retired.
  std::map<int, alerts::Alert> retired_alerts_;
};

}  // namespace gpuherd::daemon
