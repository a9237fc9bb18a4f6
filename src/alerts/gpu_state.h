// The life of one GPU between service and the scrap heap, as a pure state
// machine: inputs (faults classified by the self-heal rules, requalification
// results, operator actions, time passing) go in; transitions and the actions
// the daemon should take come out. No I/O and no clock: the caller passes time.
//
//   in_service -> suspect -> quarantined -> requalifying -> in_service
//                                                        \-> retired
//   any state  -> retired on a retire input (only an operator returns it)
//
// An operator's drain is the operator's: nothing here ever lifts it. The daemon
// executes the actions (drain with origin "fault", queue a burn-in, lift the
// fault drain); in shadow mode it records them and does nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/time.h"

namespace gpuherd::alerts {

enum class GpuHealth { kInService, kSuspect, kQuarantined, kRequalifying, kRetired };
std::string_view GpuHealthName(GpuHealth s);
std::optional<GpuHealth> GpuHealthFromName(std::string_view name);

// One fact behind a decision: "xid 48 at t on job 17", "burn-in 12 failed".
struct Evidence {
  TimeMs time = 0;
  std::string kind;    // "xid", "burnin", "operator", "timer", "ecc"
  int xid = 0;         // for kind "xid"
  std::string job_id;  // the job that ran on the GPU, if any
  std::string detail;
  bool operator==(const Evidence&) const = default;
};

enum class HealthInputKind {
  kSuspect,              // a rule found the card suspicious
  kQuarantine,           // a fault the card must not work through
  kRetire,               // a rule decided the card is done
  kRequalifyStarted,     // the daemon launched the requalification burn-in
  kRequalifyPassed,
  kRequalifyFailed,
  kRequalifyAborted,     // the burn-in ended without a result (cancelled, could not run)
  kGpuIdle,              // the GPU has had no job since `time` (re-sent as time passes)
  kGpuBusy,              // a job holds the GPU again
  kOperatorDrain,        // an operator drained it (any reason text)
  kOperatorUndrain,      // the operator lifted their drain
  kOperatorReturn,       // the operator returns a retired or quarantined card to service
  kTick,                 // time passed; timers may fire
};
std::string_view HealthInputKindName(HealthInputKind k);

struct HealthInput {
  HealthInputKind kind = HealthInputKind::kTick;
  TimeMs time = 0;
  std::string reason;
  std::vector<Evidence> evidence;
};

enum class HealthActionKind {
  kDrainForFault,        // drain with origin fault; checkpoint and move its jobs
  kAvoidForLongJobs,     // suspect: place new long jobs elsewhere when other GPUs are free
  kQueueRequalification, // run the requalification burn-in on it
  kCancelRequalification,
  kLiftFaultDrain,       // lift the fault drain (an operator's drain stays)
  kRetire,               // keep it drained until an operator acts; tell the operator
};
std::string_view HealthActionKindName(HealthActionKind k);

struct HealthAction {
  HealthActionKind kind;
  std::string reason;
  bool operator==(const HealthAction&) const = default;
};

struct HealthTransition {
  GpuHealth from;
  GpuHealth to;
  TimeMs time = 0;
  std::string reason;
  std::vector<Evidence> evidence;
};

struct HealthDecision {
  std::vector<HealthTransition> transitions;
  std::vector<HealthAction> actions;
  bool shadow = false;  // true: record these, perform none of the actions
  bool empty() const { return transitions.empty() && actions.empty(); }
};

struct GpuStatePolicy {
  // A quarantined GPU idle this long gets its requalification burn-in
  // (`daemon --requalify-after`, default 10 min; 0 turns requalification off).
  DurationMs requalify_after = 10 * 60 * 1000;
  // A suspect GPU with no new incident for this long returns to service:
  // three quiet days, long enough to span a weekend's mixed workload.
  DurationMs suspect_clears_after = 72LL * 3600 * 1000;
  // A requalification that has not reported after this long counts as failed
  // (a level 1 + 2 burn-in takes minutes; a hung one must not park the card).
  DurationMs requalify_timeout = 2LL * 3600 * 1000;
  // A card quarantined this many times within `requarantine_window` is retired
  // on the last one instead of being requalified again: a fault that comes back
  // after every passing burn-in is the card's, whatever the burn-in says.
  int quarantines_for_retire = 3;
  DurationMs requarantine_window = 7LL * 24 * 3600 * 1000;
  bool shadow = false;
};

// The state of one GPU plus what it needs to decide: timers and the operator's
// drain. Copyable, so the daemon can persist and restore it.
struct GpuHealthRecord {
  GpuHealth state = GpuHealth::kInService;
  TimeMs since = 0;                    // when `state` was entered
  TimeMs last_incident = 0;            // last suspect/quarantine input
  std::optional<TimeMs> idle_since;    // set while no job holds the GPU
  bool operator_drained = false;       // an operator's drain stands
  bool fault_drained = false;          // we drained it (origin fault)
  bool requalify_queued = false;       // the burn-in is asked for, not started yet
  int requalifications = 0;            // passed requalifications
  std::vector<HealthTransition> history;
};

class GpuStateMachine {
 public:
  explicit GpuStateMachine(GpuStatePolicy policy = {}, GpuHealthRecord record = {})
      : policy_(policy), record_(std::move(record)) {}

  HealthDecision Apply(const HealthInput& in);
  const GpuHealthRecord& record() const { return record_; }
  GpuHealth state() const { return record_.state; }
  const GpuStatePolicy& policy() const { return policy_; }

 private:
  void Move(GpuHealth to, const HealthInput& in, std::string reason, HealthDecision& d);
  void Act(HealthActionKind kind, std::string reason, HealthDecision& d);
  void MaybeQueueRequalification(TimeMs now, HealthDecision& d);
  int QuarantinesSince(TimeMs from) const;

  GpuStatePolicy policy_;
  GpuHealthRecord record_;
};

}  // namespace gpuherd::alerts
