#include "alerts/self_heal_rules.h"

#include <fmt/format.h>

#include <set>

namespace gpuherd::alerts {
namespace {

void Prune(const SelfHealPolicy& p, SelfHealState& state, const std::string& gpu, TimeMs now) {
  auto& seen = state.by_gpu[gpu];
  while (!seen.empty() && now - seen.front().time > p.window) seen.pop_front();
  for (auto it = state.notified.begin(); it != state.notified.end();) {
    it = now - it->second > p.window ? state.notified.erase(it) : std::next(it);
  }
}

Evidence XidEvidence(const SelfHealState::Seen& s) {
  return {s.time, s.xid ? "xid" : "fault", s.xid, s.job_id,
          s.xid ? fmt::format("XID {}: {}", s.xid, gpu::XidDescription(s.xid)) : "hardware fault"};
}

RuleOutcome FatalOutcome(const SelfHealPolicy& p, SelfHealState& state, const std::string& gpu,
                         TimeMs time, const std::string& what) {
  RuleOutcome out;
  out.shadow = p.shadow;
  out.verdict = gpu::XidVerdict::kFatal;
  HealthInput in;
  in.time = time;
  std::vector<Evidence> fatal;
  for (const auto& s : state.by_gpu[gpu]) {
    if (s.fatal) fatal.push_back(XidEvidence(s));
  }
  in.evidence = fatal;
  if (p.retire_fatal > 0 && static_cast<int>(fatal.size()) >= p.retire_fatal) {
    out.rule = "fatal_faults_repeated";
    in.kind = HealthInputKind::kRetire;
    in.reason = fmt::format("{} fatal faults within {} h (latest {})", fatal.size(),
                            p.window / kHourMs, what);
  } else {
    out.rule = "fatal_fault";
    in.kind = HealthInputKind::kQuarantine;
    in.reason = what;
  }
  out.input = std::move(in);
  return out;
}

}  // namespace

RuleOutcome EvaluateXid(const SelfHealPolicy& p, SelfHealState& state, const XidObservation& x) {
  Prune(p, state, x.gpu, x.time);
  const gpu::XidInfo info = gpu::LookupXid(x.xid);
  const gpu::XidVerdict verdict = gpu::VerdictOf(info);
  auto& seen = state.by_gpu[x.gpu];
  seen.push_back({x.time, x.xid, x.job_id, verdict == gpu::XidVerdict::kFatal});
  const std::string what = fmt::format("XID {} ({})", x.xid, info.description);

  if (verdict == gpu::XidVerdict::kFatal) return FatalOutcome(p, state, x.gpu, x.time, what);

  RuleOutcome out;
  out.shadow = p.shadow;
  out.verdict = verdict;
  if (verdict == gpu::XidVerdict::kInformational) return out;

  if (verdict == gpu::XidVerdict::kSuspect || x.job_id.empty()) {
    // No program to blame, or a number nobody documents: watch the card.
    HealthInput in{HealthInputKind::kSuspect, x.time, what, {XidEvidence(seen.back())}};
    if (verdict == gpu::XidVerdict::kSuspect) {
      out.rule = info.known && info.in_use ? "suspect_xid" : "unknown_xid";
      if (!info.known) in.reason += ", not in NVIDIA's catalogue";
    } else {
      out.rule = "application_xid_without_job";
      in.reason += " with no job on the GPU";
    }
    out.input = std::move(in);
    return out;
  }

  // The application's, unless this card fails program after program.
  std::set<std::string> jobs;
  std::vector<Evidence> evidence;
  for (const auto& s : seen) {
    if (s.xid != x.xid || s.job_id.empty()) continue;
    if (jobs.insert(s.job_id).second) evidence.push_back(XidEvidence(s));
  }
  const int distinct = static_cast<int>(jobs.size());
  if (p.quarantine_jobs > 0 && distinct >= p.quarantine_jobs) {
    out.rule = "same_xid_many_jobs";
    out.input = HealthInput{HealthInputKind::kQuarantine, x.time,
                            fmt::format("{} from {} different jobs within {} h", what, distinct,
                                        p.window / kHourMs),
                            evidence};
  } else if (p.suspect_jobs > 0 && distinct >= p.suspect_jobs) {
    out.rule = "same_xid_several_jobs";
    out.input = HealthInput{HealthInputKind::kSuspect, x.time,
                            fmt::format("{} from {} different jobs within {} h", what, distinct,
                                        p.window / kHourMs),
                            evidence};
  } else {
    out.rule = "application_xid";
  }
  const std::string key = x.job_id + "/" + std::to_string(x.xid);
  if (!state.notified.count(key)) {
    state.notified[key] = x.time;
    out.notices.push_back(
        {x.job_id, x.owner, x.gpu, x.xid,
         fmt::format("job {} hit {}: NVIDIA attributes it to the application (restart it; "
                     "check the program or CUDA). The GPU was not drained.",
                     x.job_id, what)});
  }
  return out;
}

RuleOutcome EvaluateHardwareFault(const SelfHealPolicy& p, SelfHealState& state,
                                  const std::string& gpu, TimeMs time, const std::string& kind,
                                  const std::string& job_id, const std::string& detail) {
  Prune(p, state, gpu, time);
  state.by_gpu[gpu].push_back({time, 0, job_id, true});
  return FatalOutcome(p, state, gpu, time, detail.empty() ? kind : kind + ": " + detail);
}

}  // namespace gpuherd::alerts
