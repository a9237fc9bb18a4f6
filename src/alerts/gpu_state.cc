#include "alerts/gpu_state.h"

#include <fmt/format.h>

namespace gpuherd::alerts {

std::string_view GpuHealthName(GpuHealth s) {
  switch (s) {
    case GpuHealth::kInService: return "in_service";
    case GpuHealth::kSuspect: return "suspect";
    case GpuHealth::kQuarantined: return "quarantined";
    case GpuHealth::kRequalifying: return "requalifying";
    case GpuHealth::kRetired: return "retired";
  }
  return "?";
}

std::optional<GpuHealth> GpuHealthFromName(std::string_view name) {
  for (GpuHealth s : {GpuHealth::kInService, GpuHealth::kSuspect, GpuHealth::kQuarantined,
                      GpuHealth::kRequalifying, GpuHealth::kRetired}) {
    if (GpuHealthName(s) == name) return s;
  }
  return std::nullopt;
}

std::string_view HealthInputKindName(HealthInputKind k) {
  switch (k) {
    case HealthInputKind::kSuspect: return "suspect";
    case HealthInputKind::kQuarantine: return "quarantine";
    case HealthInputKind::kRetire: return "retire";
    case HealthInputKind::kRequalifyStarted: return "requalify_started";
    case HealthInputKind::kRequalifyPassed: return "requalify_passed";
    case HealthInputKind::kRequalifyFailed: return "requalify_failed";
    case HealthInputKind::kRequalifyAborted: return "requalify_aborted";
    case HealthInputKind::kGpuIdle: return "gpu_idle";
    case HealthInputKind::kGpuBusy: return "gpu_busy";
    case HealthInputKind::kOperatorDrain: return "operator_drain";
    case HealthInputKind::kOperatorUndrain: return "operator_undrain";
    case HealthInputKind::kOperatorReturn: return "operator_return";
    case HealthInputKind::kTick: return "tick";
  }
  return "?";
}

std::string_view HealthActionKindName(HealthActionKind k) {
  switch (k) {
    case HealthActionKind::kDrainForFault: return "drain_for_fault";
    case HealthActionKind::kAvoidForLongJobs: return "avoid_for_long_jobs";
    case HealthActionKind::kQueueRequalification: return "queue_requalification";
    case HealthActionKind::kCancelRequalification: return "cancel_requalification";
    case HealthActionKind::kLiftFaultDrain: return "lift_fault_drain";
    case HealthActionKind::kRetire: return "retire";
  }
  return "?";
}

void GpuStateMachine::Move(GpuHealth to, const HealthInput& in, std::string reason,
                           HealthDecision& d) {
  HealthTransition t{record_.state, to, in.time, std::move(reason), in.evidence};
  record_.state = to;
  record_.since = in.time;
  record_.requalify_queued = false;
  record_.history.push_back(t);
  d.transitions.push_back(std::move(t));
}

void GpuStateMachine::Act(HealthActionKind kind, std::string reason, HealthDecision& d) {
  // The record follows what the daemon is told to do, so that a shadow run's
  // record shows the drains it would hold.
  if (kind == HealthActionKind::kDrainForFault) record_.fault_drained = true;
  if (kind == HealthActionKind::kLiftFaultDrain) {
    if (!record_.fault_drained) return;
    record_.fault_drained = false;
  }
  d.actions.push_back({kind, std::move(reason)});
}

int GpuStateMachine::QuarantinesSince(TimeMs from) const {
  int n = 0;
  for (const HealthTransition& t : record_.history) {
    // A requalification that ended without a result is no new fault.
    if (t.to == GpuHealth::kQuarantined && t.from != GpuHealth::kRequalifying && t.time >= from) ++n;
  }
  return n;
}

void GpuStateMachine::MaybeQueueRequalification(TimeMs now, HealthDecision& d) {
  if (record_.state != GpuHealth::kQuarantined || record_.requalify_queued) return;
  if (policy_.requalify_after <= 0 || !record_.idle_since) return;
  TimeMs idle_from = std::max(*record_.idle_since, record_.since);
  if (now - idle_from < policy_.requalify_after) return;
  record_.requalify_queued = true;
  Act(HealthActionKind::kQueueRequalification,
      fmt::format("quarantined and idle for {} s", (now - idle_from) / 1000), d);
}

HealthDecision GpuStateMachine::Apply(const HealthInput& in) {
  HealthDecision d;
  d.shadow = policy_.shadow;
  const GpuHealth s = record_.state;
  const std::string why = in.reason.empty() ? std::string(HealthInputKindName(in.kind)) : in.reason;
  switch (in.kind) {
    case HealthInputKind::kSuspect:
      if (s == GpuHealth::kRetired) break;
      record_.last_incident = in.time;
      if (s == GpuHealth::kInService) {
        Move(GpuHealth::kSuspect, in, why, d);
        Act(HealthActionKind::kAvoidForLongJobs, why, d);
      }
      break;

    case HealthInputKind::kQuarantine:
      if (s == GpuHealth::kRetired) break;
      record_.last_incident = in.time;
      if (s == GpuHealth::kRequalifying) {
        // A fault on the card while it is being requalified is a failed requalification.
        Move(GpuHealth::kRetired, in, "fault during requalification: " + why, d);
        Act(HealthActionKind::kCancelRequalification, why, d);
        Act(HealthActionKind::kRetire, why, d);
        break;
      }
      if (s == GpuHealth::kQuarantined) {
        record_.requalify_queued = false;  // a new fault: wait a full idle period again
        record_.since = in.time;
        break;
      }
      if (policy_.quarantines_for_retire > 0 &&
          QuarantinesSince(in.time - policy_.requarantine_window) + 1 >=
              policy_.quarantines_for_retire) {
        Move(GpuHealth::kRetired, in,
             fmt::format("quarantined {} times within {} days: {}",
                         policy_.quarantines_for_retire,
                         policy_.requarantine_window / (24 * 3600 * 1000), why),
             d);
        Act(HealthActionKind::kDrainForFault, why, d);
        Act(HealthActionKind::kRetire, why, d);
        break;
      }
      Move(GpuHealth::kQuarantined, in, why, d);
      Act(HealthActionKind::kDrainForFault, why, d);
      break;

    case HealthInputKind::kRetire:
      if (s == GpuHealth::kRetired) break;
      Move(GpuHealth::kRetired, in, why, d);
      if (s == GpuHealth::kRequalifying) Act(HealthActionKind::kCancelRequalification, why, d);
      if (!record_.fault_drained) Act(HealthActionKind::kDrainForFault, why, d);
      Act(HealthActionKind::kRetire, why, d);
      break;

    case HealthInputKind::kRequalifyStarted:
      if (s == GpuHealth::kQuarantined) Move(GpuHealth::kRequalifying, in, why, d);
      break;

    case HealthInputKind::kRequalifyPassed:
      if (s != GpuHealth::kRequalifying) break;
      ++record_.requalifications;
      Move(GpuHealth::kInService, in, why, d);
      Act(HealthActionKind::kLiftFaultDrain, why, d);
      break;

    case HealthInputKind::kRequalifyFailed:
      if (s != GpuHealth::kRequalifying) break;
      Move(GpuHealth::kRetired, in, why, d);
      Act(HealthActionKind::kRetire, why, d);
      break;

    case HealthInputKind::kRequalifyAborted:
      // Nothing was learnt about the card: quarantined again, and a new
      // burn-in once it has been idle for a full period.
      if (s != GpuHealth::kRequalifying) break;
      Move(GpuHealth::kQuarantined, in, why, d);
      break;

    case HealthInputKind::kGpuIdle:
      if (!record_.idle_since) record_.idle_since = in.time;
      MaybeQueueRequalification(in.time, d);
      break;

    case HealthInputKind::kGpuBusy:
      record_.idle_since.reset();
      break;

    case HealthInputKind::kOperatorDrain:
      record_.operator_drained = true;
      break;

    case HealthInputKind::kOperatorUndrain:
      record_.operator_drained = false;
      break;

    case HealthInputKind::kOperatorReturn:
      if (s == GpuHealth::kInService) break;
      Move(GpuHealth::kInService, in, why, d);
      if (s == GpuHealth::kRequalifying) Act(HealthActionKind::kCancelRequalification, why, d);
      Act(HealthActionKind::kLiftFaultDrain, why, d);
      break;

    case HealthInputKind::kTick:
      if (s == GpuHealth::kSuspect && policy_.suspect_clears_after > 0 &&
          in.time - std::max(record_.last_incident, record_.since) >= policy_.suspect_clears_after) {
        HealthInput quiet = in;
        quiet.evidence.push_back({in.time, "timer", 0, "",
                                  fmt::format("no incident for {} h",
                                              policy_.suspect_clears_after / 3600000)});
        Move(GpuHealth::kInService, quiet, "suspect cleared: no further incident", d);
      } else if (s == GpuHealth::kRequalifying && policy_.requalify_timeout > 0 &&
                 in.time - record_.since >= policy_.requalify_timeout) {
        Move(GpuHealth::kRetired, in, "requalification did not finish in time", d);
        Act(HealthActionKind::kCancelRequalification, "requalification timed out", d);
        Act(HealthActionKind::kRetire, "requalification timed out", d);
      }
      MaybeQueueRequalification(in.time, d);
      break;
  }
  return d;
}

}  // namespace gpuherd::alerts
