#include "daemon/self_heal_service.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/events.h"
#include "gpu/xid.h"
#include "telemetry/telemetry.h"

namespace gpuherd::daemon {

using alerts::GpuHealth;
using alerts::HealthInput;
using alerts::HealthInputKind;
using nlohmann::json;

namespace {

constexpr char kEventHealth[] = "gpu.health";            // a state transition
constexpr char kEventJudged[] = "gpu.fault_judged";      // a fault through the rules
constexpr char kEventRequalify[] = "gpu.requalify";      // the burn-in queued, a drain kept
constexpr char kEventJobXid[] = "job.xid";               // an owner told
// A double-bit error or a loss this soon after a fatal XID on the same GPU is
// the same incident reported twice (the driver logs the XID first).
constexpr DurationMs kSameIncidentMs = kMinuteMs;

json EvidenceJson(const std::vector<alerts::Evidence>& evidence) {
  json out = json::array();
  for (const alerts::Evidence& e : evidence) {
    json j = {{"time", e.time}, {"kind", e.kind}, {"detail", e.detail}};
    if (e.xid) j["xid"] = e.xid;
    if (!e.job_id.empty()) j["job_id"] = e.job_id;
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<alerts::Evidence> EvidenceFromJson(const std::string& text) {
  std::vector<alerts::Evidence> out;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return out;
  for (const json& e : j) {
    if (!e.is_object()) continue;
    alerts::Evidence ev;
    ev.time = e.value("time", TimeMs{0});
    ev.kind = e.value("kind", "");
    ev.xid = e.value("xid", 0);
    ev.job_id = e.value("job_id", "");
    ev.detail = e.value("detail", "");
    out.push_back(std::move(ev));
  }
  return out;
}

store::Severity SeverityOf(GpuHealth to) {
  switch (to) {
    case GpuHealth::kInService: return store::Severity::kInfo;
    case GpuHealth::kSuspect:
    case GpuHealth::kRequalifying: return store::Severity::kWarning;
    case GpuHealth::kQuarantined:
    case GpuHealth::kRetired: return store::Severity::kCritical;
  }
  return store::Severity::kWarning;
}

bool Drains(GpuHealth s) {
  return s == GpuHealth::kQuarantined || s == GpuHealth::kRequalifying || s == GpuHealth::kRetired;
}

// What a requalification run says about the card.
HealthInputKind Judgement(const burnin::BurnInRun& run) {
  if (run.outcome == burnin::RunOutcome::kCouldNotRun || run.outcome == burnin::RunOutcome::kAborted) {
    return HealthInputKind::kRequalifyAborted;
  }
  if (run.outcome == burnin::RunOutcome::kPassed && run.health.verdict == burnin::Verdict::kHealthy) {
    return HealthInputKind::kRequalifyPassed;
  }
  return HealthInputKind::kRequalifyFailed;
}

std::string RunSummary(const burnin::BurnInRun& run) {
  std::string s = fmt::format("burn-in level {} {}, {} {}", run.level, burnin::RunOutcomeName(run.outcome),
                              burnin::VerdictName(run.health.verdict), run.health.score);
  std::string failed;
  for (const burnin::Check& c : run.checks) {
    if (c.outcome == burnin::CheckOutcome::kFail || c.outcome == burnin::CheckOutcome::kWarn) {
      failed += (failed.empty() ? "" : ", ") + c.name + (c.reason.empty() ? "" : " (" + c.reason + ")");
    }
  }
  if (!failed.empty()) s += ": " + failed;
  if (!run.outcome_reason.empty()) s += ": " + run.outcome_reason;
  return s;
}

struct Threshold {
  const char* key;
  bool duration;
};
constexpr Threshold kThresholds[] = {
    {"window", true},          {"suspect_jobs", false},         {"quarantine_jobs", false},
    {"retire_fatal", false},   {"retire_quarantines", false},   {"requarantine_window", true},
    {"suspect_clears_after", true}, {"requalify_timeout", true},   {"short_job_max", true},
};

}  // namespace

std::string JobXidSubject(const std::string& job_id, int xid) { return fmt::format("job {} xid {}", job_id, xid); }

const std::vector<std::string>& SelfHealRuleNames() {
  static const std::vector<std::string> kNames = {
      "application_xid",     "application_xid_without_job", "same_xid_several_jobs", "same_xid_many_jobs",
      "suspect_xid",         "unknown_xid",                 "fatal_fault",           "fatal_faults_repeated"};
  return kNames;
}

Status SetSelfHealThreshold(SelfHealOptions* options, const std::string& assignment) {
  std::string known;
  for (const Threshold& t : kThresholds) known += (known.empty() ? "" : ", ") + std::string(t.key);
  const size_t eq = assignment.find('=');
  const std::string key = assignment.substr(0, eq);
  const Threshold* found = nullptr;
  for (const Threshold& t : kThresholds) {
    if (key == t.key) found = &t;
  }
  if (eq == std::string::npos || !found) {
    return InvalidArgument("--self-heal takes KEY=VALUE with KEY one of " + known + "; got \"" +
                           assignment.substr(0, 60) + "\"");
  }
  const std::string value = assignment.substr(eq + 1);
  int64_t number = 0;
  if (found->duration) {
    DurationMs ms = 0;
    if (!ParseDuration(value, &ms) || ms <= 0 || ms > 366LL * 24 * kHourMs) {
      return InvalidArgument(fmt::format("--self-heal {}: a duration from 1s to 366d like 24h, got \"{}\"", key,
                                         value.substr(0, 60)));
    }
    number = ms;
  } else {
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || errno != 0 || n < 0 || n > 1000) {
      return InvalidArgument(fmt::format("--self-heal {}: a count from 0 (off) to 1000, got \"{}\"", key,
                                         value.substr(0, 60)));
    }
    number = n;
  }
  auto& r = options->rules;
  auto& s = options->states;
  if (key == "window") r.window = number;
  if (key == "suspect_jobs") r.suspect_jobs = static_cast<int>(number);
  if (key == "quarantine_jobs") r.quarantine_jobs = static_cast<int>(number);
  if (key == "retire_fatal") r.retire_fatal = static_cast<int>(number);
  if (key == "retire_quarantines") s.quarantines_for_retire = static_cast<int>(number);
  if (key == "requarantine_window") s.requarantine_window = number;
  if (key == "suspect_clears_after") s.suspect_clears_after = number;
  if (key == "requalify_timeout") s.requalify_timeout = number;
  if (key == "short_job_max") options->short_job_max = number;
  return Status::Ok();
}

Status SetSelfHealShadow(SelfHealOptions* options, const std::string& list) {
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string rule = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto& names = SelfHealRuleNames();
    if (rule != "all" && std::find(names.begin(), names.end(), rule) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += ", " + n;
      return InvalidArgument("--self-heal-shadow: \"" + rule.substr(0, 60) + "\" is not a rule (all" + known + ")");
    }
    options->shadow_rules.insert(rule);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return Status::Ok();
}

SelfHealService::SelfHealService(DaemonState* state, SelfHealQueue* queue, SelfHealOptions options)
    : state_(state), queue_(queue), options_(std::move(options)) {
  options_.rules.shadow = false;   // shadow is per rule here
  options_.states.shadow = false;
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    gpus_.push_back(Gpu{alerts::GpuStateMachine(options_.states)});
  }
}

int SelfHealService::PositionOf(const std::string& uuid) const {
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    if (state_->fleet.gpus[i].uuid == uuid) return static_cast<int>(i);
  }
  return -1;
}

bool SelfHealService::Shadowed(const std::string& rule) const {
  return options_.shadow_rules.count("all") || (!rule.empty() && options_.shadow_rules.count(rule));
}

Status SelfHealService::Load() {
  const TimeMs now = state_->clock->Now();
  for (size_t pos = 0; pos < gpus_.size(); ++pos) {
    Gpu& g = gpus_[pos];
    const std::string& uuid = state_->fleet.gpus[pos].uuid;
    auto rows = state_->store->ListHealthTransitions(uuid);
    if (!rows.ok()) return rows.status().Annotate("cannot read the GPUs' health");
    alerts::GpuHealthRecord record;
    for (const store::HealthTransitionRecord& row : *rows) {
      if (row.shadow) continue;
      auto from = alerts::GpuHealthFromName(row.from_state);
      auto to = alerts::GpuHealthFromName(row.to_state);
      if (!from || !to) continue;
      alerts::HealthTransition t{*from, *to, row.time, row.reason, EvidenceFromJson(row.evidence_json)};
      record.state = *to;
      record.since = row.time;
      if (*to == GpuHealth::kSuspect || *to == GpuHealth::kQuarantined) record.last_incident = row.time;
      if (*from == GpuHealth::kRequalifying && *to == GpuHealth::kInService) ++record.requalifications;
      g.requalify_job = 0;
      if (*to == GpuHealth::kRequalifying) {
        for (const alerts::Evidence& e : t.evidence) {
          if (e.kind == "burnin" && !e.job_id.empty()) g.requalify_job = std::atoll(e.job_id.c_str());
        }
      }
      record.history.push_back(std::move(t));
    }
    record.fault_drained = Drains(record.state);
    record.operator_drained = g.operator_drained = queue_->OperatorDrained(static_cast<int>(pos));
    g.drained = queue_->Drained(static_cast<int>(pos));
    // The requalification queued before the restart still counts as asked for.
    record.requalify_queued = false;
    g.machine = alerts::GpuStateMachine(options_.states, std::move(record));
    queue_->SetSuspect(static_cast<int>(pos), g.machine.state() == GpuHealth::kSuspect);
  }

  // The rules' memory: what they judged within the window.
  store::EventFilter filter;
  filter.kind_prefix = kEventJudged;
  filter.since = now - options_.rules.window;
  filter.limit = 100000;
  auto events = state_->store->ListEvents(filter);
  if (!events.ok()) return events.status().Annotate("cannot read the faults of the last window");
  for (const store::EventRecord& e : *events) {
    if (e.kind != kEventJudged) continue;
    json data = json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
    if (!data.is_object()) continue;
    alerts::SelfHealState::Seen seen{e.time, data.value("xid", 0), data.value("job_id", ""),
                                     data.value("fatal", false)};
    memory_.by_gpu[e.gpu_uuid].push_back(seen);
    if (data.value("owner_told", false) && !seen.job_id.empty()) {
      memory_.notified[seen.job_id + "/" + std::to_string(seen.xid)] = e.time;
    }
  }

  // A requalification whose job ended while no daemon ran.
  for (size_t pos = 0; pos < gpus_.size(); ++pos) {
    Gpu& g = gpus_[pos];
    if (g.machine.state() != GpuHealth::kRequalifying || g.requalify_job == 0) continue;
    auto job = state_->store->GetJob(g.requalify_job);
    if (!job.ok()) return job.status();
    if (!*job) continue;
    auto st = sched::ParseJobState((*job)->state);
    if (!st || !sched::IsFinal(*st)) {
      spdlog::info("GPU {}: requalification job {} carries on", state_->fleet.gpus[pos].index, g.requalify_job);
      continue;
    }
    sched::Job ended;
    ended.id = g.requalify_job;
    ended.state = *st;
    OnJobChanged(ended);
  }
  return Status::Ok();
}

void SelfHealService::AfterCommit(bool committed) {
  if (committed) return;
  memory_ = alerts::SelfHealState();
  for (Gpu& g : gpus_) g = Gpu{alerts::GpuStateMachine(options_.states)};
  if (Status s = Load(); !s.ok()) spdlog::error("self-healing: cannot read the GPUs' states back: {}", s.ToString());
}

bool SelfHealService::Judges(const store::EventRecord& e) {
  if (e.kind == telemetry::kEventGpuXid || e.kind == telemetry::kEventGpuLost) return true;
  if (e.kind == telemetry::kEventGpuEcc) {
    json data = json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
    return data.is_object() && data.value("type", "") == "dbe";
  }
  return false;
}

void SelfHealService::OnGpuEvents(const std::vector<store::EventRecord>& events) {
  for (const store::EventRecord& e : events) {
    if (!Judges(e)) continue;
    const int pos = PositionOf(e.gpu_uuid);
    if (pos < 0) continue;
    std::vector<JobOnGpu> jobs = queue_->JobsOn(pos);
    // The requalification's own burn-in is no program to blame: the card is.
    if (!jobs.empty() && jobs.front().id == gpus_[pos].requalify_job) jobs.clear();
    const JobOnGpu job = jobs.empty() ? JobOnGpu{} : jobs.front();
    const std::string job_id = job.id ? std::to_string(job.id) : "";
    alerts::RuleOutcome outcome;
    int xid = 0;
    if (e.kind == telemetry::kEventGpuXid) {
      json data = json::parse(e.data_json, nullptr, /*allow_exceptions=*/false);
      xid = data.is_object() ? data.value("xid", 0) : 0;
      outcome = alerts::EvaluateXid(options_.rules, memory_, {e.time, e.gpu_uuid, xid, job_id, job.owner});
      if (gpu::XidIsFatal(xid)) gpus_[pos].last_fatal_xid = e.time;
    } else {
      const char* kind = e.kind == telemetry::kEventGpuLost ? "gpu_lost" : "ecc_dbe";
      if (gpus_[pos].last_fatal_xid && e.time - gpus_[pos].last_fatal_xid <= kSameIncidentMs) {
        // XID 48 comes with its double-bit error, XID 79 with the loss: one
        // incident, counted once towards retirement.
        outcome.rule = "same_incident";
        outcome.verdict = gpu::XidVerdict::kFatal;
        Event(e.time, kEventJudged, store::Severity::kInfo, pos,
              fmt::format("GPU {}: {} is part of the fatal XID just before it; counted once",
                          state_->fleet.gpus[pos].index, kind),
              {{"xid", 0}, {"fault", e.kind}, {"rule", outcome.rule}, {"fatal", false}, {"shadow", false}});
        continue;
      }
      outcome = alerts::EvaluateHardwareFault(options_.rules, memory_, e.gpu_uuid, e.time, kind, job_id, e.message);
    }
    Judge(pos, e, outcome, xid, job);
  }
}

void SelfHealService::Judge(int pos, const store::EventRecord& e, const alerts::RuleOutcome& outcome, int xid,
                            const JobOnGpu& job) {
  const bool shadow = Shadowed(outcome.rule);
  const gpu::GpuInfo& info = state_->fleet.gpus[pos];
  const bool fatal = outcome.verdict == gpu::XidVerdict::kFatal;
  std::string what = xid ? fmt::format("XID {}", xid) : e.kind == telemetry::kEventGpuLost ? "lost GPU" : "double-bit ECC error";
  std::string verdict;
  if (!outcome.input) {
    verdict = outcome.rule.empty() ? "informational" : "the application's; the GPU stays in service";
  } else {
    verdict = fmt::format("{} ({})", alerts::HealthInputKindName(outcome.input->kind), outcome.input->reason);
  }
  json data = {{"xid", xid},
               {"fault", e.kind},
               {"rule", outcome.rule},
               {"fatal", fatal},
               {"shadow", shadow},
               {"owner_told", !outcome.notices.empty()}};
  if (job.id) {
    data["job_id"] = std::to_string(job.id);
    data["owner"] = job.owner;
  }
  Event(e.time, kEventJudged, store::Severity::kInfo, pos,
        fmt::format("GPU {}: {}{} judged by rule {}: {}{}", info.index, what,
                    job.id ? fmt::format(" under job {}", job.id) : std::string(" with no job"),
                    outcome.rule.empty() ? "none" : outcome.rule, verdict, shadow ? " (shadow: nothing done)" : ""),
        data);
  if (!shadow) {
    for (const alerts::OwnerNotice& n : outcome.notices) TellOwner(n, e.time);
  }
  if (outcome.input) Apply(pos, *outcome.input, outcome.rule, shadow);
  if (shadow && fatal) {
    // The rule only watches: the fault is handled as without self-healing
    // (drained until an operator returns the GPU, its jobs moved).
    queue_->DrainForFault(pos, "fault: " + e.message);
  }
}

void SelfHealService::TellOwner(const alerts::OwnerNotice& n, TimeMs now) {
  const int pos = PositionOf(n.gpu);
  Event(now, kEventJobXid, store::Severity::kWarning, pos, n.message,
        {{"job_id", n.job_id}, {"owner", n.owner}, {"xid", n.xid}});
  if (!alert_sink_) return;
  alerts::Alert a;
  a.rule = "application_xid";
  a.subject = JobXidSubject(n.job_id, n.xid);
  a.gpu_index = pos >= 0 ? state_->fleet.gpus[pos].index : -1;
  a.state = alerts::AlertState::kFiring;
  a.pending_since = a.fired_at = now;
  a.value = n.xid;
  a.severity = store::Severity::kWarning;
  a.action = alerts::Action::kNotify;
  a.summary = fmt::format("{} (owner {})", n.message, n.owner);
  const sched::JobId job = std::atoll(n.job_id.c_str());
  // The rules tell an owner once per job and XID within a window; one told
  // again (the window passed before this round's expiry) replaces its alert.
  auto [from, to] = job_alerts_.equal_range(job);
  for (auto it = from; it != to; ++it) {
    if (it->second.subject != a.subject) continue;
    ResolveAlert(it->second, now);
    job_alerts_.erase(it);
    break;
  }
  alert_sink_({alerts::AlertState::kInactive, alerts::AlertState::kFiring, now, a});
  job_alerts_.emplace(job, a);
}

void SelfHealService::Apply(int pos, const HealthInput& input, const std::string& rule, bool shadow) {
  Gpu& g = gpus_[pos];
  if (shadow) {
    alerts::GpuStateMachine copy = g.machine;
    Carry(pos, copy.Apply(input), rule, true);
    return;
  }
  Carry(pos, g.machine.Apply(input), rule, false);
}

void SelfHealService::Carry(int pos, const alerts::HealthDecision& d, const std::string& rule, bool shadow) {
  Gpu& g = gpus_[pos];
  for (const alerts::HealthTransition& t : d.transitions) RecordTransition(pos, t, rule, shadow, d.actions);
  if (shadow) return;
  if (!d.transitions.empty()) {
    g.rule = rule;
    queue_->SetSuspect(pos, g.machine.state() == GpuHealth::kSuspect);
    // An operator returned a retired card: its alert is over.
    if (g.machine.state() != GpuHealth::kRetired) {
      if (auto it = retired_alerts_.find(pos); it != retired_alerts_.end()) {
        ResolveAlert(it->second, d.transitions.back().time);
        retired_alerts_.erase(it);
      }
    }
  }
  const gpu::GpuInfo& info = state_->fleet.gpus[pos];
  const TimeMs now = state_->clock->Now();
  for (const alerts::HealthAction& a : d.actions) {
    switch (a.kind) {
      case alerts::HealthActionKind::kDrainForFault:
        queue_->DrainForFault(pos, "fault: " + a.reason);
        g.drained = true;
        break;
      case alerts::HealthActionKind::kAvoidForLongJobs:
        break;  // the suspect mark above: scheduler rule 12
      case alerts::HealthActionKind::kQueueRequalification: {
        const bool reset = options_.allow_gpu_reset;
        auto job = queue_->QueueRequalification(pos, options_.requalify_level, reset);
        if (!job.ok()) {
          Event(now, kEventRequalify, store::Severity::kWarning, pos,
                fmt::format("GPU {}: cannot queue its requalification: {}", info.index, job.status().message()),
                {{"error", job.status().message()}});
          break;
        }
        g.requalify_job = *job;
        HealthInput started{HealthInputKind::kRequalifyStarted, now,
                            fmt::format("requalification burn-in queued as job {} (level {}{}): {}", *job,
                                        options_.requalify_level, reset ? ", GPU reset first if no process uses it" : "",
                                        a.reason),
                            {{now, "burnin", 0, std::to_string(*job),
                              fmt::format("level {} burn-in", options_.requalify_level)}}};
        Carry(pos, g.machine.Apply(started), "requalify", false);
        break;
      }
      case alerts::HealthActionKind::kCancelRequalification:
        if (g.requalify_job) queue_->CancelRequalification(g.requalify_job, a.reason);
        g.requalify_job = 0;
        break;
      case alerts::HealthActionKind::kLiftFaultDrain: {
        if (!queue_->Drained(pos)) break;
        Status lifted = queue_->LiftFaultDrain(pos, "gpuherd self-heal: " + a.reason);
        g.drained = queue_->Drained(pos);
        if (!lifted.ok()) {
          Event(now, kEventRequalify, store::Severity::kInfo, pos,
                fmt::format("GPU {} is healthy again; its drain stays: {}", info.index, lifted.message()),
                {{"drain_kept", true}});
        }
        break;
      }
      case alerts::HealthActionKind::kRetire:
        if (alert_sink_) {
          alerts::Alert al;
          al.rule = "gpu_retired";
          al.subject = info.uuid;
          al.gpu_index = info.index;
          al.state = alerts::AlertState::kFiring;
          al.pending_since = al.fired_at = now;
          al.value = 1;
          al.severity = store::Severity::kCritical;
          al.action = alerts::Action::kNotify;
          al.summary = fmt::format("GPU {} ({}) retired: {}; it stays drained until an operator inspects the "
                                   "hardware and returns it (gpuherd undrain {})",
                                   info.index, info.name, a.reason, info.index);
          alert_sink_({alerts::AlertState::kInactive, alerts::AlertState::kFiring, now, al});
          retired_alerts_[pos] = al;
        }
        break;
    }
  }
}

void SelfHealService::RecordTransition(int pos, const alerts::HealthTransition& t, const std::string& rule,
                                       bool shadow, const std::vector<alerts::HealthAction>& actions) {
  const gpu::GpuInfo& info = state_->fleet.gpus[pos];
  json evidence = EvidenceJson(t.evidence);
  json acts = json::array();
  for (const alerts::HealthAction& a : actions) acts.push_back(alerts::HealthActionKindName(a.kind));
  store::HealthTransitionRecord row;
  row.time = t.time;
  row.gpu_uuid = info.uuid;
  row.from_state = alerts::GpuHealthName(t.from);
  row.to_state = alerts::GpuHealthName(t.to);
  row.reason = t.reason;
  row.evidence_json = evidence.dump();
  row.shadow = shadow;
  state_->batch.health_transitions.push_back(row);
  Event(t.time, kEventHealth, shadow ? store::Severity::kInfo : SeverityOf(t.to), pos,
        fmt::format("{}GPU {} {} -> {}: {}", shadow ? "shadow (nothing done): " : "", info.index,
                    row.from_state, row.to_state, t.reason),
        {{"from", row.from_state},
         {"to", row.to_state},
         {"reason", t.reason},
         {"rule", rule},
         {"evidence", evidence},
         {"actions", acts},
         {"shadow", shadow}});
}

void SelfHealService::Event(TimeMs now, const std::string& kind, store::Severity severity, int pos,
                            const std::string& message, const json& data) {
  const std::string uuid = pos >= 0 ? state_->fleet.gpus[pos].uuid : "";
  spdlog::log(severity == store::Severity::kCritical ? spdlog::level::err
              : severity == store::Severity::kWarning ? spdlog::level::warn
                                                      : spdlog::level::info,
              "{}: {}", kind, message);
  state_->batch.events.push_back(api::NewEvent(now, kind, severity, message, uuid, data));
}

void SelfHealService::OnRound(TimeMs now) {
  // An application's XID is news for a window: a job that runs for a week
  // does not keep its owner's alert firing all week.
  for (auto it = job_alerts_.begin(); it != job_alerts_.end();) {
    if (now - it->second.fired_at >= options_.rules.window) {
      ResolveAlert(it->second, now);
      it = job_alerts_.erase(it);
    } else {
      ++it;
    }
  }
  const std::vector<int> jobs = queue_->JobsPerGpu();
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const int pos = static_cast<int>(i);
    Gpu& g = gpus_[i];
    const bool op = queue_->OperatorDrained(pos);
    if (op != g.operator_drained) {
      g.operator_drained = op;
      Apply(pos, {op ? HealthInputKind::kOperatorDrain : HealthInputKind::kOperatorUndrain, now, "", {}}, "", false);
    }
    const bool drained = queue_->Drained(pos);
    if (g.drained && !drained && Drains(g.machine.state())) {
      // Someone lifted the drain of a card we keep out: only an operator may.
      Apply(pos,
            {HealthInputKind::kOperatorReturn, now, "an operator lifted its drain",
             {{now, "operator", 0, "", "gpuherd undrain"}}},
            "operator", false);
    }
    g.drained = drained;
    const bool busy = i < jobs.size() && jobs[i] > 0;
    if (busy != g.busy || busy) {
      g.busy = busy;
      if (busy) Apply(pos, {HealthInputKind::kGpuBusy, now, "", {}}, "", false);
    }
    if (!busy) Apply(pos, {HealthInputKind::kGpuIdle, now, "", {}}, "requalify", false);
    Apply(pos, {HealthInputKind::kTick, now, "", {}}, "timer", false);
  }
}

void SelfHealService::FinishRequalification(int pos, const HealthInput& input) {
  Gpu& g = gpus_[pos];
  if (g.machine.state() != GpuHealth::kRequalifying) return;
  Apply(pos, input, "requalify", false);
  g.requalify_job = 0;
}

void SelfHealService::ResolveAlert(alerts::Alert a, TimeMs now) {
  a.state = alerts::AlertState::kResolved;
  a.resolved_at = now;
  if (alert_sink_) alert_sink_({alerts::AlertState::kFiring, alerts::AlertState::kResolved, now, a});
}

const std::vector<std::string>& SelfHealService::AlertRules() {
  static const std::vector<std::string> kRules = {"application_xid", "gpu_retired"};
  return kRules;
}

void SelfHealService::AdoptAlerts(const std::vector<alerts::Alert>& firing) {
  const TimeMs now = state_->clock->Now();
  for (const alerts::Alert& a : firing) {
    if (a.state != alerts::AlertState::kFiring) continue;
    bool keep = false;
    if (a.rule == "application_xid" && a.subject.rfind("job ", 0) == 0) {
      // "job N xid X"; an alert stored before subjects named the XID is "job N".
      const sched::JobId id = std::atoll(a.subject.c_str() + 4);
      auto job = id > 0 ? state_->store->GetJob(id) : Result<std::optional<store::JobRecord>>(std::nullopt);
      std::optional<sched::JobState> st;
      if (job.ok() && *job) st = sched::ParseJobState((*job)->state);
      keep = st && !sched::IsFinal(*st) && now - a.fired_at < options_.rules.window;
      if (keep) job_alerts_.emplace(id, a);
    } else if (a.rule == "gpu_retired") {
      const int pos = PositionOf(a.subject);
      keep = pos >= 0 && StateOf(pos) == GpuHealth::kRetired;
      if (keep) retired_alerts_[pos] = a;
    }
    if (!keep) ResolveAlert(a, now);
  }
}

void SelfHealService::OnJobChanged(const sched::Job& job) {
  if (!sched::IsFinal(job.state)) return;
  auto [from, to] = job_alerts_.equal_range(job.id);
  for (auto it = from; it != to; ++it) ResolveAlert(it->second, state_->clock->Now());
  job_alerts_.erase(from, to);

  for (size_t pos = 0; pos < gpus_.size(); ++pos) {
    Gpu& g = gpus_[pos];
    if (g.requalify_job != job.id || g.machine.state() != GpuHealth::kRequalifying) continue;
    // Its runs may have been recorded while no daemon ran (the burn-in then
    // writes to the store): look there before calling it unfinished.
    store::BurnInFilter filter;
    filter.gpu_uuid = state_->fleet.gpus[pos].uuid;
    filter.limit = 20;
    auto rows = state_->store->ListBurnInRuns(filter);
    std::vector<burnin::BurnInRun> runs;
    if (rows.ok()) {
      for (const store::BurnInRecord& r : *rows) {
        json j = json::parse(r.json, nullptr, /*allow_exceptions=*/false);
        auto run = burnin::BurnInRunFromJson(j);
        if (run.ok() && run->job_id == job.id) runs.push_back(*run);
      }
    }
    if (!runs.empty()) {
      OnBurnInRuns(runs);
      continue;
    }
    const TimeMs now = state_->clock->Now();
    FinishRequalification(static_cast<int>(pos),
                          {HealthInputKind::kRequalifyAborted, now,
                           fmt::format("requalification job {} ended ({}) without a result; it is queued again "
                                       "after a full idle period",
                                       job.id, sched::JobStateName(job.state)),
                           {{now, "burnin", 0, std::to_string(job.id), sched::JobStateName(job.state)}}});
  }
}

std::set<int> SelfHealService::OnBurnInRuns(const std::vector<burnin::BurnInRun>& runs) {
  std::set<int> decided;
  for (const burnin::BurnInRun& run : runs) {
    const int pos = PositionOf(run.gpu_uuid);
    if (pos < 0) continue;
    Gpu& g = gpus_[pos];
    if (run.job_id > 0 && run.job_id == g.requalify_job) {
      const TimeMs now = state_->clock->Now();
      const HealthInputKind kind = Judgement(run);
      std::string reason = fmt::format("requalification (job {}) {}: {}", run.job_id,
                                       kind == HealthInputKind::kRequalifyPassed   ? "passed"
                                       : kind == HealthInputKind::kRequalifyFailed ? "failed"
                                                                                   : "ended without a result",
                                       RunSummary(run));
      FinishRequalification(pos, {kind, now, reason,
                                  {{now, "burnin", 0, std::to_string(run.job_id), RunSummary(run)}}});
      decided.insert(pos);
    }
    if (Drains(g.machine.state())) decided.insert(pos);
  }
  return decided;
}

alerts::GpuHealth SelfHealService::StateOf(int position) const {
  if (position < 0 || position >= static_cast<int>(gpus_.size())) return GpuHealth::kInService;
  return gpus_[position].machine.state();
}

json SelfHealService::StateJson(int position) const {
  if (position < 0 || position >= static_cast<int>(gpus_.size())) return json::object();
  const Gpu& g = gpus_[position];
  const alerts::GpuHealthRecord& r = g.machine.record();
  json j = {{"state", alerts::GpuHealthName(r.state)},
            {"since", r.since},
            {"requalifications", r.requalifications}};
  if (!r.history.empty()) {
    j["reason"] = r.history.back().reason;
    j["evidence"] = EvidenceJson(r.history.back().evidence);
  }
  if (!g.rule.empty()) j["rule"] = g.rule;
  if (g.requalify_job) j["requalify_job"] = g.requalify_job;
  return j;
}

}  // namespace gpuherd::daemon
