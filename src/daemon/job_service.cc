// The queue's state machine (job_service.h); its views are in
// job_service_views.cc, its records in job_service_store.cc.
#include "daemon/job_service.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/events.h"
#include "daemon/attempt_log.h"
#include "exec/job_files.h"
#include "gpu/xid.h"
#include "sched/dependencies.h"
#include "sched/job_spec.h"
#include "telemetry/telemetry.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using sched::JobState;
namespace fs = std::filesystem;

// The most pending jobs one scheduling pass ranks (see Schedule): the
// claimants, then by urgency and age. Slurm's main scheduler looks at 100 jobs
// a pass by default (default_queue_depth) and its backfill at 500
// (bf_max_job_test); 1,000 keeps a pass near 5 ms however deep the queue.
constexpr size_t kMaxPassJobs = 1000;
// A pass at least this often while jobs wait: aging and fair share move.
constexpr DurationMs kAgingPass = 30 * kSecondMs;

bool IsGpuFault(const store::EventRecord& e, const json& data) {
  if (e.kind == "gpu.lost") return true;
  if (e.kind == "gpu.xid") return gpu::XidIsFatal(data.value("xid", 0));
  if (e.kind == "gpu.ecc" || e.kind == "gpu.thermal") return e.severity == store::Severity::kCritical;
  return false;
}

sched::FleetState StaticFleet(const gpu::Fleet& fleet, const QueueConfig& config) {
  sched::FleetState f = sched::FleetStateFromFleet(fleet);
  f.host_cpus = config.host_cpus;
  f.host_mem_bytes = config.host_mem_bytes;
  return f;
}

}  // namespace

JobService::JobService(DaemonState* state, exec::JobExecutor* executor, QueueParts parts, QueueConfig config)
    : state_(state),
      executor_(executor),
      launcher_(parts.launcher),
      fair_share_(parts.fair_share),
      watchdog_(parts.watchdog),
      config_(std::move(config)),
      static_fleet_(StaticFleet(state->fleet, config_)),
      pool_(state) {}

Status JobService::Load() {
  auto last = state_->store->LastJobId();
  if (!last.ok()) return last.status();
  next_id_ = *last + 1;
  GPUHERD_RETURN_IF_ERROR(pool_.Load());
  TimeMs now = state_->clock->Now();
  auto finished = state_->store->ListFinishedJobs(now - config_.scheduler.weights.fair_window, 100000);
  if (!finished.ok()) return finished.status();
  fair_share_->Load(*finished);
  auto unfinished = state_->store->ListUnfinishedJobs();
  if (!unfinished.ok()) return unfinished.status();
  for (const auto& r : *unfinished) {
    Entry e;
    Status spec = FromRecord(r, &e);
    sched::Job& job = e.job;
    if (!spec.ok()) {
      job.reason = "stored spec unreadable: " + spec.message();
      Insert(std::move(e));
      Finish(jobs_.at(r.id), JobState::kFailed, jobs_.at(r.id).job.reason);
      continue;
    }
    const bool launched = job.state == JobState::kRunning || job.state == JobState::kStopping;
    const std::string record_dir = RecordDir(job.id, job.attempt);
    if (launched && !fs::exists(record_dir)) {
      Insert(std::move(e));
      std::error_code ec;
      if (fs::is_regular_file(fs::symlink_status(AttemptDir(job.id, job.attempt) + "/shim", ec))) {
        // Launched by a daemon from before the private tree: its record is in
        // the job's user's folder, which is not trusted (exec/job_trees.h). It
        // is neither re-adopted nor started again, which might run it twice.
        Finish(jobs_.at(r.id), JobState::kFailed,
               "launched by an earlier gpuherd that kept its supervisor's record in the job's folder, which is not "
               "trusted; not re-adopted: end its processes if any are left, then submit it again");
        continue;
      }
      // The daemon stopped between recording the start and launching it: the
      // attempt never ran, so it does not count as a restart.
      if (attempt_log_) attempt_log_->Ended(jobs_.at(r.id).job, "launch_failed", "the daemon stopped before launching it", nullptr);
      Requeue(jobs_.at(r.id), "the daemon stopped before launching it", false);
      continue;
    }
    if (launched) {
      // The shim may still run the job (it outlives the daemon), may have
      // recorded its exit meanwhile, or may be gone: Adopt sorts it out and
      // reports through OnExit when the attempt is over.
      Status adopted = executor_->Adopt(job.id, job.attempt, record_dir);
      if (!adopted.ok()) spdlog::warn("job {}: cannot re-adopt: {}", job.id, adopted.ToString());
      e.adopted = true;
      if (auto shim = exec::ReadShimFile(record_dir); shim.ok() && shim->has_value()) {
        e.shim_pid = (*shim)->pid;  // the watchdog matches the job's processes by its shim's session
      }
      if (attempt_log_ && e.shim_pid > 0) attempt_log_->Launched(job.id, job.attempt, e.shim_pid);
      if (job.state == JobState::kStopping) e.intent = StopIntent::kRequeue;
    }
    Insert(std::move(e));
  }
  ClaimsFromMarks();
  dirty_ = true;
  return Status::Ok();
}

namespace {

// The spec as a scheduling pass sees it: the scheduler (sched/scheduler.h)
// reads neither the command, its directory and environment, the labels and
// the name, nor the dependencies (the daemon checks those itself), and a
// client's environment alone is dozens of strings to copy per pass.
sched::JobSpec SchedulingSpec(const sched::JobSpec& spec) {
  sched::JobSpec lean = spec;
  lean.argv.clear();
  lean.cwd.clear();
  lean.env.clear();
  lean.name.clear();
  lean.labels.clear();
  lean.depends_on.clear();
  lean.after_any.clear();
  lean.after_not_ok.clear();
  return lean;
}

}  // namespace

void JobService::Insert(Entry e) {
  ++unfinished_by_uid_[e.job.spec.uid];
  e.scheduled = SchedulingSpec(e.job.spec);
  sched::JobId id = e.job.id;
  auto [it, inserted] = jobs_.emplace(id, std::move(e));
  if (inserted) Index(it->second);
}

void JobService::Erase(sched::JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  auto count = unfinished_by_uid_.find(it->second.job.spec.uid);
  if (count != unfinished_by_uid_.end() && --count->second <= 0) unfinished_by_uid_.erase(count);
  Unindex(it->second);
  finished_entries_.push_back(jobs_.extract(it));
}

void JobService::SetState(Entry& e, JobState state) {
  Unindex(e);
  e.job.state = state;
  Index(e);
}

void JobService::Index(const Entry& e) {
  const sched::Job& job = e.job;
  if (job.state == JobState::kRunning || job.state == JobState::kStopping) active_.insert(job.id);
  if (job.state == JobState::kPending) {
    pending_order_.emplace(-job.spec.priority, job.submitted, job.id);
    unranked_.push_back(job.id);
  }
}

void JobService::Unindex(const Entry& e) {
  active_.erase(e.job.id);
  pending_order_.erase({-e.job.spec.priority, e.job.submitted, e.job.id});
}

void JobService::Touch(Entry& e) {
  touched_.insert(e.job.id);
  e.listed.reset();
  dirty_ = true;
}

void JobService::Event(const sched::Job& job, const std::string& kind, store::Severity severity,
                       const std::string& message) {
  state_->batch.events.push_back(api::NewEvent(state_->clock->Now(), kind, severity,
                                               fmt::format("job {} ({}): {}", job.id, job.spec.name, message),
                                               job.gpu_uuids.size() == 1 ? job.gpu_uuids[0] : "",
                                               {{"job", job.id}, {"attempt", job.attempt}, {"gpus", job.gpu_uuids}}));
}

namespace {

// A job without a name is called after its program: argv[0] without its directory.
std::string DefaultJobName(const sched::JobSpec& spec) {
  return fs::path(spec.argv.empty() ? "job" : spec.argv[0]).filename().string();
}

}  // namespace

Result<sched::JobId> JobService::Submit(sched::JobSpec spec, const Caller& caller, const SubmitExtras& extras) {
  if (!caller.authenticated) return Unauthenticated("submitting needs the unix socket or the API token");
  // A typed spec may come from code, not only from ParseJobSpec.
  GPUHERD_RETURN_IF_ERROR(sched::ValidateJobSpec(spec));
  spec.user = caller.user;
  spec.uid = caller.uid;
  spec.gid = caller.gid;
  spec.pinned_gpus = extras.pinned_gpus;
  if (spec.name.empty()) spec.name = DefaultJobName(spec);
  // Whether the job could ever fit depends only on the fleet's fixed facts.
  GPUHERD_RETURN_IF_ERROR(sched::CheckFits(spec, static_fleet_));
  for (const auto* deps : {&spec.depends_on, &spec.after_any, &spec.after_not_ok}) {
    for (sched::JobId dep : *deps) {
      if (dep <= 0 || dep >= next_id_) {
        return InvalidArgument("the job depends on job " + std::to_string(dep) + ", which does not exist");
      }
    }
  }
  auto queued = unfinished_by_uid_.find(caller.uid);
  GPUHERD_RETURN_IF_ERROR(sched::CheckQueueLimit(
      caller.user, queued == unfinished_by_uid_.end() ? 0 : queued->second, 1, config_.scheduler));
  Entry e;
  json stored_spec = {{"spec", sched::JobSpecToJson(spec)}, {"gid", spec.gid}, {"gpu_twentieths", spec.gpu_twentieths}};
  if (!extras.checkpoint_dir.empty()) stored_spec["checkpoint_dir"] = extras.checkpoint_dir;
  if (extras.prior_attempts > 0) stored_spec["prior_attempts"] = extras.prior_attempts;
  if (!extras.pinned_gpus.empty()) stored_spec["pinned_gpus"] = extras.pinned_gpus;
  if (extras.array_id > 0) {
    stored_spec["array"] = {{"id", extras.array_id}, {"index", extras.array_index}, {"size", extras.array_size}};
  }
  e.stored_spec = stored_spec.dump();
  e.extras = extras;
  e.job.id = next_id_++;
  e.job.spec = std::move(spec);
  e.job.submitted = state_->clock->Now();
  e.job.state = extras.hold ? JobState::kHeld : JobState::kPending;
  // The reason a held job shows, as `hold` gives one.
  if (extras.hold) e.job.reason = "held at submission by " + caller.user;
  sched::JobId id = e.job.id;
  Insert(std::move(e));
  Entry& stored = jobs_.at(id);
  Touch(stored);
  Event(stored.job, "job.submitted", store::Severity::kInfo,
        (extras.hold ? "submitted held by " : "submitted by ") + caller.user);
  return id;
}

Result<std::vector<sched::JobId>> JobService::SubmitArray(const sched::JobSpec& spec, int count, const Caller& caller,
                                                          bool hold) {
  if (count < 1 || count > sched::kMaxArraySize) {
    return InvalidArgument(fmt::format("an array has 1 to {} tasks, got {}", sched::kMaxArraySize, count));
  }
  if (!caller.authenticated) return Unauthenticated("submitting needs the unix socket or the API token");
  // The checks Submit makes, once for the whole array, so that no task can be
  // refused after the first was queued.
  GPUHERD_RETURN_IF_ERROR(sched::ValidateJobSpec(spec));
  GPUHERD_RETURN_IF_ERROR(sched::CheckFits(spec, static_fleet_));
  auto queued = unfinished_by_uid_.find(caller.uid);
  GPUHERD_RETURN_IF_ERROR(sched::CheckQueueLimit(
      caller.user, queued == unfinished_by_uid_.end() ? 0 : queued->second, count, config_.scheduler));
  const std::string name = spec.name.empty() ? DefaultJobName(spec) : spec.name;
  std::vector<sched::JobId> ids;
  ids.reserve(static_cast<size_t>(count));
  sched::JobSpec task = spec;
  // Submit takes consecutive ids in this turn: the first is the array's.
  const sched::JobId array_id = next_id_;
  for (int i = 0; i < count; ++i) {
    task.name = fmt::format("{}[{}]", name, i);
    task.env["GPUHERD_ARRAY_INDEX"] = std::to_string(i);
    task.env["GPUHERD_ARRAY_SIZE"] = std::to_string(count);
    SubmitExtras extras;
    extras.hold = hold;
    extras.array_id = array_id;
    extras.array_index = i;
    extras.array_size = count;
    auto id = Submit(task, caller, extras);
    // Cannot happen after the checks above; a failure here is a bug, and the
    // tasks queued so far still commit with the turn.
    if (!id.ok()) return Internal(fmt::format("array task {} refused after the checks passed: {}", i,
                                              id.status().message()));
    ids.push_back(*id);
  }
  return ids;
}

Result<std::string> JobService::Act(sched::JobId id, const std::string& action, const Caller& caller,
                                    const std::string& why) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    auto stored = state_->store->GetJob(id);
    if (stored.ok() && stored->has_value()) {
      return FailedPrecondition(fmt::format("job {} is already {}", id, (*stored)->state));
    }
    return NotFound("no job " + std::to_string(id) + "; `gpuherd ps --all` lists them");
  }
  Entry& e = it->second;
  sched::Job& job = e.job;
  if (!caller.authenticated || !caller.MayActOn(job.spec.uid)) {
    return PermissionDenied(fmt::format("job {} belongs to {}; only its owner or an admin may {} it", id,
                                        job.spec.user, action));
  }
  auto refuse = [&] {
    return FailedPrecondition(fmt::format("cannot {} job {}: it is {}", action, id, sched::JobStateName(job.state)));
  };
  if (action == "cancel") {
    const std::string reason = why.empty() ? "cancelled by " + caller.user : why;
    if (job.state == JobState::kPending || job.state == JobState::kHeld) {
      Finish(e, JobState::kCancelled, reason);
      return std::string("cancelled");
    }
    if (job.state == JobState::kRunning || job.state == JobState::kStopping) {
      Stop(e, StopIntent::kCancel, reason);
      return std::string("stopping");
    }
    return refuse();
  }
  if (action == "hold") {
    if (job.state != JobState::kPending) return refuse();
    SetState(e, JobState::kHeld);
    job.reason = "held by " + caller.user;
    claims_.erase(id);
    Touch(e);
    Event(job, "job.held", store::Severity::kInfo, job.reason);
    return std::string("held");
  }
  if (action == "release") {
    if (job.state != JobState::kHeld) return refuse();
    SetState(e, JobState::kPending);
    job.reason.clear();
    Touch(e);
    Event(job, "job.released", store::Severity::kInfo, "released by " + caller.user);
    return std::string("pending");
  }
  if (action == "requeue") {
    if (job.state != JobState::kRunning) return refuse();
    Stop(e, StopIntent::kRequeue, "requeued by " + caller.user);
    return std::string("stopping");
  }
  return InvalidArgument("unknown action '" + action + "'; use cancel, hold, release or requeue");
}

Status JobService::Signal(sched::JobId id, int signal) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.state != JobState::kRunning) {
    return FailedPrecondition(fmt::format("job {} is not running", id));
  }
  const int attempt = it->second.job.attempt;
  after_commit_.push_back([this, id, attempt, signal] {
    auto e = jobs_.find(id);
    // Not launched yet (no shim to ask): the signal has nobody to reach.
    if (e == jobs_.end() || e->second.job.attempt != attempt || (e->second.shim_pid == 0 && !e->second.adopted)) {
      return;
    }
    Status s = executor_->Signal(id, attempt, signal);
    if (!s.ok()) spdlog::warn("job {}: cannot send signal {}: {}", id, signal, s.ToString());
  });
  return Status::Ok();
}

Status JobService::Drain(int pos, const std::string& reason, const Caller& caller) {
  if (!caller.admin) return PermissionDenied("only an admin (root, the daemon's user or the admin group) may drain GPUs");
  GPUHERD_RETURN_IF_ERROR(pool_.CheckPosition(pos));
  std::string why = reason.empty() ? "drained by " + caller.user : reason + " (" + caller.user + ")";
  pool_.Drain(pos, queue::DrainOrigin::kOperator, why);
  dirty_ = true;
  return Status::Ok();
}

Status JobService::Undrain(int pos, const Caller& caller) {
  if (!caller.admin) return PermissionDenied("only an admin (root, the daemon's user or the admin group) may undrain GPUs");
  // A GPU off the bus would only fail every job given to it: it returns to
  // work once it answers again, not on an operator's word.
  if (state_->telemetry != nullptr && pos >= 0 && pos < static_cast<int>(state_->fleet.gpus.size()) &&
      state_->telemetry->State(pos) == telemetry::GpuState::kLost) {
    return FailedPrecondition(fmt::format(
        "GPU {} is lost (off the bus or not answering): it cannot take work; it can be undrained once it answers "
        "again (after a GPU reset or a reboot)",
        state_->fleet.gpus[pos].index));
  }
  GPUHERD_RETURN_IF_ERROR(pool_.Lift(pos, queue::DrainLifter::kOperator, caller.user));
  dirty_ = true;
  return Status::Ok();
}

void JobService::DrainFor(int pos, queue::DrainOrigin origin, const std::string& reason) {
  if (pool_.Drain(pos, origin, reason)) dirty_ = true;
}

void JobService::SetSuspect(int pos, bool suspect) {
  if (!pool_.Has(pos)) return;
  if (pool_.SetSuspect(state_->fleet.gpus[pos].uuid, suspect)) dirty_ = true;
}

Status JobService::LiftAfterBurnIn(int pos, const std::string& by) {
  GPUHERD_RETURN_IF_ERROR(pool_.Lift(pos, queue::DrainLifter::kPassedBurnIn, by));
  dirty_ = true;
  return Status::Ok();
}

std::vector<sched::RunningJob> JobService::RunningJobs() const {
  std::vector<sched::RunningJob> running;
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    running.push_back({id, e.scheduled, e.job.started, e.job.gpus, e.job.state == JobState::kStopping, e.stop_deadline,
                       e.job.state == JobState::kStopping ? e.stopping_for : 0});
  }
  return running;
}

sched::FleetState JobService::BuildFleetState(const std::vector<sched::RunningJob>& running) const {
  sched::FleetState fleet = pool_.View(static_fleet_);
  sched::AccountRunningJobs(running, &fleet);
  return fleet;
}

double JobService::RecentGpuHours(const std::string& user, TimeMs now) const {
  double hours = fair_share_->EndedGpuHours(user, now);
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    if (e.job.spec.user == user && e.job.state == JobState::kRunning) {
      hours += queue::FairShare::RunningGpuHours(e.job, now);
    }
  }
  return hours;
}

void JobService::Schedule() {
  TimeMs now = state_->clock->Now();
  const std::vector<sched::RunningJob> running = RunningJobs();
  sched::FleetState fleet = BuildFleetState(running);
  std::vector<sched::PendingJob> pending;
  std::map<std::string, double> hours;  // per user, computed once per pass
  // Cancelled after the loop: Finish erases the job from jobs_.
  std::vector<sched::JobId> dependency_failed;
  // The work of one pass is bounded: at most kMaxPassJobs pending jobs are
  // ranked, the first by (priority, submission, id) and every claimant; the
  // others wait their turn with the reason they had.
  // The claimants, then the first of pending_order_: a pass touches only
  // the jobs it ranks, however deep the queue.
  std::vector<Entry*> candidates;
  std::set<sched::JobId> taken;
  for (const auto& [id, gpus] : claims_) {
    auto it = jobs_.find(id);
    if (it != jobs_.end() && it->second.job.state == JobState::kPending && taken.insert(id).second) {
      candidates.push_back(&it->second);
    }
  }
  for (auto k = pending_order_.begin(); k != pending_order_.end() && candidates.size() < kMaxPassJobs; ++k) {
    const sched::JobId id = std::get<2>(*k);
    if (!taken.insert(id).second) continue;
    candidates.push_back(&jobs_.at(id));
  }
  // Jobs queued since the last pass and left out of this one say why.
  for (sched::JobId id : unranked_) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || taken.count(id) || it->second.job.state != JobState::kPending) continue;
    if (it->second.job.reason.empty()) {
      SetReason(it->second, fmt::format("waiting: more than {} jobs in line", kMaxPassJobs));
    }
  }
  unranked_.clear();
  for (Entry* entry : candidates) {
    Entry& e = *entry;
    const sched::JobId id = e.job.id;
    const sched::Job& job = e.job;
    sched::PendingJob p;
    p.id = id;
    p.spec = e.scheduled;
    p.submitted = job.submitted;
    auto h = hours.find(job.spec.user);
    if (h == hours.end()) h = hours.emplace(job.spec.user, RecentGpuHours(job.spec.user, now)).first;
    p.user_gpu_hours = h->second;
    p.deps = sched::Dependencies::kSatisfied;
    if (auto c = claims_.find(id); c != claims_.end()) p.claimed_gpus = c->second;
    // Rule 2 (sched/dependencies.h) on each dependency's state: unfinished
    // ones from jobs_, finished ones from the store once (a final state
    // never changes).
    auto check = sched::CheckDependencies(job.spec, [&](sched::JobId dep) -> std::optional<JobState> {
      if (auto d = jobs_.find(dep); d != jobs_.end()) return d->second.job.state;
      auto known = finished_dep_state_.find(dep);
      if (known == finished_dep_state_.end()) {
        auto stored = state_->store->GetJob(dep);
        // A store error is not an answer: the job waits for the next pass.
        if (!stored.ok()) {
          spdlog::warn("job {}: cannot read job {} it depends on: {}", id, dep, stored.status().message());
          return std::nullopt;
        }
        auto final_state = stored->has_value() ? sched::ParseJobState((*stored)->state) : std::nullopt;
        if (final_state && !sched::IsFinal(*final_state)) {
          // It ended in this turn, which is not committed yet: ask again next turn.
          dirty_ = true;
          return std::nullopt;
        }
        known = finished_dep_state_.emplace(dep, final_state.value_or(JobState::kCancelled)).first;
      }
      return known->second;
    });
    if (!check) continue;
    p.deps = check->deps;
    p.blocking_dep = check->blocking;
    p.blocking_dep_state = check->blocking_state;
    if (p.deps == sched::Dependencies::kFailed) dependency_failure_[id] = sched::DependencyFailureReason(*check);
    if (p.deps == sched::Dependencies::kFailed) {
      dependency_failed.push_back(id);
      continue;
    }
    pending.push_back(std::move(p));
  }
  for (sched::JobId id : dependency_failed) {
    Finish(jobs_.at(id), JobState::kCancelled, dependency_failure_[id]);
    dependency_failure_.erase(id);
  }
  if (pending.empty()) return;
  sched::Decisions decisions = sched::Schedule(fleet, pending, running, now, config_.scheduler);
  ApplyDecisions(decisions);
  for (const auto& w : decisions.waiting) {
    auto it = jobs_.find(w.job);
    // Shown live; stored with the job's next change.
    // Formatted on the stack: every pass says this of every waiting job,
    // and mostly nothing changed.
    if (it == jobs_.end()) continue;
    fmt::memory_buffer line;
    fmt::format_to(std::back_inserter(line), "#{} in line: {}", w.rank, w.reason);
    SetReason(it->second, std::string_view(line.data(), line.size()));
  }
}

void JobService::SetReason(Entry& e, std::string_view reason) {
  if (e.job.reason == reason) return;
  e.job.reason.assign(reason);
  e.listed.reset();
}

TimeMs JobService::NextDue(TimeMs now) const {
  // When a running job's GPUs are expected back (its time limit or its stop
  // deadline): a reservation may come due then, and backfill changes.
  TimeMs due = now + kAgingPass;
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    if (e.job.state == JobState::kStopping && e.stop_deadline > now) due = std::min(due, e.stop_deadline);
    if (e.job.state == JobState::kRunning && e.job.spec.time_limit > 0) {
      TimeMs end = e.job.started + e.job.spec.time_limit;
      if (end > now) due = std::min(due, end);
    }
  }
  return due;
}

std::string JobService::GpuSignature() const {
  // What of the GPUs' live state the scheduler obeys, beyond drains (which
  // mark the queue dirty themselves): lost, throttling, health.
  sched::FleetState view = pool_.View(static_fleet_);
  std::string sig;
  for (const auto& g : view.gpus) {
    sig += g.lost ? 'L' : '-';
    sig += g.thermal_throttling ? 'T' : '-';
    sig += g.healthy ? 'h' : 'u';
    sig += g.drained ? 'd' : '-';
  }
  return sig;
}

// The preemption protocol (design-notes "Preemption"): a preemptor P's
// victims are marked stopping_for P and stopped once each for P; the GPUs
// the scheduler chose for P are claimed for it from that pass until P starts,
// leaves the queue, is held, or the scheduler drops the claim; no other job
// starts on a claimed GPU (checked here as well as in the scheduler), so the
// victims cannot come back onto the GPUs they were stopped to free.
void JobService::ApplyDecisions(const sched::Decisions& decisions) {
  for (sched::JobId p : decisions.dropped_claims) claims_.erase(p);
  std::map<int, sched::JobId> claimed;  // GPU → the job it is claimed for
  for (const auto& [p, gpus] : claims_) {
    for (int g : gpus) claimed.emplace(g, p);
  }
  for (const auto& start : decisions.starts) {
    auto it = jobs_.find(start.job);
    if (it == jobs_.end() || it->second.job.state != JobState::kPending) continue;
    auto taken = std::find_if(start.gpus.begin(), start.gpus.end(), [&](int g) {
      auto c = claimed.find(g);
      return c != claimed.end() && c->second != start.job;
    });
    if (taken != start.gpus.end()) {
      SetReason(it->second, fmt::format("GPU {} is claimed for job {}", *taken, claimed.at(*taken)));
      continue;
    }
    claims_.erase(start.job);
    Start(it->second, start.gpus);
  }
  for (const auto& p : decisions.preemptions) {
    auto preemptor = jobs_.find(p.for_job);
    if (preemptor == jobs_.end() || preemptor->second.job.state != JobState::kPending) continue;
    // A preemption under way for P is not repeated while its victims stop.
    if (claims_.count(p.for_job) && StoppingFor(p.for_job) > 0) continue;
    std::vector<int> claim = p.gpus;
    std::vector<sched::JobId> victims;
    for (sched::JobId victim : p.victims) {
      auto it = jobs_.find(victim);
      if (it == jobs_.end()) continue;
      Entry& v = it->second;
      if (p.gpus.empty()) claim.insert(claim.end(), v.job.gpus.begin(), v.job.gpus.end());
      // Stopped at most once for one preemptor, over all its attempts.
      if (v.job.state != JobState::kRunning || v.preempted_for.count(p.for_job)) continue;
      victims.push_back(victim);
    }
    std::sort(claim.begin(), claim.end());
    claim.erase(std::unique(claim.begin(), claim.end()), claim.end());
    claims_[p.for_job] = claim;
    for (sched::JobId victim : victims) {
      Entry& v = jobs_.at(victim);
      Stop(v, StopIntent::kRequeue, fmt::format("preempted for job {}", p.for_job));
      v.stopping_for = p.for_job;
      v.preempted_for.insert(p.for_job);
      StoreMarks(v);
    }
  }
  // A claim whose victims are all gone and whose job did not start in this
  // pass holds GPUs for nothing: dropped, the next pass decides afresh.
  for (auto it = claims_.begin(); it != claims_.end();) {
    auto job = jobs_.find(it->first);
    const bool live = job != jobs_.end() && job->second.job.state == JobState::kPending;
    const bool decided_now = std::any_of(decisions.preemptions.begin(), decisions.preemptions.end(),
                                         [&](const sched::PreemptDecision& p) { return p.for_job == it->first; });
    if (!live || (!decided_now && StoppingFor(it->first) == 0 && !ClaimStillFreeing(it->second))) {
      it = claims_.erase(it);
    } else {
      ++it;
    }
  }
}

int JobService::StoppingFor(sched::JobId preemptor) const {
  int n = 0;
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    if (e.job.state == JobState::kStopping && e.stopping_for == preemptor) ++n;
  }
  return n;
}

bool JobService::ClaimStillFreeing(const std::vector<int>& gpus) const {
  // Whether a GPU of the claim is still held by a job that is stopping.
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    if (e.job.state != JobState::kStopping) continue;
    for (int g : e.job.gpus) {
      if (std::find(gpus.begin(), gpus.end(), g) != gpus.end()) return true;
    }
  }
  return false;
}

void JobService::Start(Entry& e, const std::vector<int>& gpus) {
  sched::Job& job = e.job;
  SetState(e, JobState::kRunning);
  job.attempt += 1;
  job.started = state_->clock->Now();
  job.gpus = gpus;
  job.gpu_uuids.clear();
  for (int g : gpus) job.gpu_uuids.push_back(state_->fleet.gpus.at(g).uuid);
  job.reason.clear();
  // A new attempt has no exit yet: `show` must not print the last one's.
  job.exit_code.reset();
  job.exit_signal.reset();
  e.intent = StopIntent::kNone;
  Touch(e);
  std::string where = gpus.empty() ? "no GPU" : "GPU " + fmt::format("{}", fmt::join(gpus, ","));
  Event(job, "job.started", store::Severity::kInfo, fmt::format("attempt {} started on {}", job.attempt, where));
  if (attempt_log_) attempt_log_->Started(job);
  if (listener_) listener_(job);
  queue::AttemptFacts facts;
  facts.checkpoint_dir = e.extras.checkpoint_dir;
  facts.prior_attempts = e.extras.prior_attempts;
  facts.mps_alone = job.spec.fractional() && job.gpus.size() == 1 && OneUserOn(job.gpus[0], job.spec.uid);
  exec::LaunchSpec launch = launcher_->Prepare(job, facts);
  sched::JobId id = job.id;
  int attempt = job.attempt;
  // Launched only once "running" is durable: a crash in between leaves a
  // running job without a shim, which the next start requeues; never a shim
  // for a job the store calls pending.
  after_commit_.push_back([this, id, attempt, launch = std::move(launch)]() mutable {
    launcher_->Launch(std::move(launch),
                      [this, id, attempt](const Result<int>& pid) { OnLaunched(id, attempt, pid); });
  });
}

void JobService::OnLaunched(sched::JobId id, int attempt, const Result<int>& pid) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.job.attempt != attempt) return;  // ended meanwhile
  Entry& e = it->second;
  if (!pid.ok()) {
    exec::ExitRecord failed;
    failed.job_id = id;
    failed.attempt = attempt;
    failed.how = exec::ExitRecord::How::kLaunchFailed;
    failed.message = pid.status().message();
    return OnExit(failed);
  }
  e.shim_pid = *pid;
  if (attempt_log_) attempt_log_->Launched(id, attempt, *pid);
  // A stop decided while the launch was under way is delivered now.
  if (e.job.state == JobState::kStopping) {
    Status s = executor_->Signal(id, attempt, SIGTERM);
    if (!s.ok()) spdlog::warn("job {}: cannot signal: {}", id, s.ToString());
  }
}

void JobService::Stop(Entry& e, StopIntent intent, const std::string& reason) {
  sched::Job& job = e.job;
  // A cancel wins over a requeue already under way; a fault over a requeue.
  if (job.state == JobState::kStopping && intent != StopIntent::kCancel) {
    if (e.intent == StopIntent::kRequeue && intent == StopIntent::kFault) e.intent = intent;
    return;
  }
  bool already = job.state == JobState::kStopping;
  SetState(e, JobState::kStopping);
  e.intent = intent;
  e.stop_deadline = SaturatingAdd(state_->clock->Now(), job.spec.checkpoint_grace);
  job.reason = reason;
  Touch(e);
  Event(job, "job.stopping", intent == StopIntent::kFault ? store::Severity::kWarning : store::Severity::kInfo,
        reason);
  if (already) return;
  sched::JobId id = job.id;
  int attempt = job.attempt;
  after_commit_.push_back([this, id, attempt] {
    auto it = jobs_.find(id);
    // Not launched yet: OnLaunched delivers the stop. Re-adopted attempts
    // (shim_pid 0 too) are known to the executor, so they are signalled here.
    if (it != jobs_.end() && it->second.shim_pid == 0 && !it->second.adopted) return;
    // The shim sends SIGTERM to the job's group and SIGKILL after the grace.
    Status s = executor_->Signal(id, attempt, SIGTERM);
    if (!s.ok()) spdlog::warn("job {}: cannot signal: {}", id, s.ToString());
  });
}

void JobService::Finish(Entry& e, JobState state, const std::string& reason) {
  sched::Job& job = e.job;
  fair_share_->AttemptEnded(job, state_->clock->Now());
  SetState(e, state);
  job.reason = reason;
  job.ended = state_->clock->Now();
  fair_share_->Finished(job);
  // The entry is erased below: its stored spec moves into the record.
  std::string stored_spec = std::move(e.stored_spec);
  store::JobRecord record = ToRecord(e);
  record.spec_json = std::move(stored_spec);
  state_->batch.jobs.push_back(std::move(record));
  touched_.erase(job.id);
  Event(job, "job." + std::string(sched::JobStateName(state)),
        state == JobState::kFailed ? store::Severity::kWarning : store::Severity::kInfo, reason);
  if (listener_) listener_(job);
  claims_.erase(job.id);
  Erase(job.id);
  dirty_ = true;
}

void JobService::Requeue(Entry& e, const std::string& reason, bool count_restart) {
  sched::Job& job = e.job;
  if (count_restart) {
    if (job.restarts >= job.spec.max_restarts) {
      Finish(e, JobState::kFailed,
             fmt::format("{}; no restarts after faults left ({} of {} used)", reason, job.restarts,
                         job.spec.max_restarts));
      return;
    }
    job.restarts += 1;
  }
  fair_share_->AttemptEnded(job, state_->clock->Now());
  SetState(e, JobState::kPending);
  job.gpus.clear();
  job.reason = reason + "; will resume from its checkpoint";
  e.intent = StopIntent::kNone;
  e.stopping_for = 0;
  e.shim_pid = 0;
  e.adopted = false;
  Touch(e);
  Event(job, "job.requeued", store::Severity::kInfo, job.reason);
  job.gpu_uuids.clear();  // after the event, which names the GPUs it left
  if (listener_) listener_(job);
}

void JobService::OnExit(const exec::ExitRecord& r) {
  auto it = jobs_.find(r.job_id);
  if (it == jobs_.end() || it->second.job.attempt != r.attempt) return;  // an old attempt
  exits_this_turn_.push_back(r);
  Entry& e = it->second;
  sched::Job& job = e.job;
  using How = exec::ExitRecord::How;
  job.exit_code.reset();
  job.exit_signal.reset();
  if (r.how == How::kExited || r.how == How::kTimeLimit || r.how == How::kStopped) job.exit_code = r.code;
  if (r.signal != 0) job.exit_signal = r.signal;
  if (attempt_log_) NoteAttemptEnd(e, r);
  switch (e.intent) {
    case StopIntent::kCancel: return Finish(e, JobState::kCancelled, job.reason);
    case StopIntent::kRequeue: return Requeue(e, job.reason, false);
    case StopIntent::kFault: return Requeue(e, job.reason, true);
    case StopIntent::kMemory: return Finish(e, JobState::kFailed, job.reason);
    case StopIntent::kNone: break;
  }
  // The shim's message says which limit and what ended.
  if (r.out_of_memory) return Finish(e, JobState::kFailed, r.message);
  switch (r.how) {
    case How::kExited:
      if (r.code == 0) return Finish(e, JobState::kCompleted, "exited with code 0");
      return Finish(e, JobState::kFailed, fmt::format("exited with code {}", r.code));
    case How::kSignaled:
      return Finish(e, JobState::kFailed, fmt::format("killed by signal {} ({})", r.signal, strsignal(r.signal)));
    case How::kTimeLimit:
      // The shim's words say how it stopped (SIGTERM, then SIGKILL after the grace).
      if (r.message.rfind("stopped at its time limit", 0) == 0) return Finish(e, JobState::kFailed, r.message);
      return Finish(e, JobState::kFailed, "stopped at its time limit of " + FormatDuration(job.spec.time_limit));
    case How::kStopped:
      return Finish(e, JobState::kCancelled, "stopped");
    case How::kLaunchFailed:
      return Finish(e, JobState::kFailed, r.message);
    case How::kShimLost:
      // Its supervisor vanished (e.g. the machine rebooted): run it again.
      return Requeue(e, "its supervisor was lost (" + r.message + ")", true);
  }
}

void JobService::OnGpuEvents(const std::vector<store::EventRecord>& events) {
  for (const auto& ev : events) {
    json data = json::parse(ev.data_json, nullptr, false);
    if (!IsGpuFault(ev, data.is_object() ? data : json::object())) continue;
    int pos = -1;
    for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
      if (state_->fleet.gpus[i].uuid == ev.gpu_uuid) pos = static_cast<int>(i);
    }
    if (pos < 0) continue;
    MoveJobsOff(pos, "fault: " + ev.message);
  }
}

int JobService::MoveJobsOff(int pos, const std::string& why, queue::DrainOrigin origin) {
  if (!pool_.Has(pos)) return 0;
  const gpu::GpuInfo& g = state_->fleet.gpus[pos];
  pool_.Drain(pos, origin, why);
  int moved = 0;
  const std::vector<sched::JobId> active(active_.begin(), active_.end());  // Stop changes active_
  for (sched::JobId id : active) {
    auto found = jobs_.find(id);
    if (found == jobs_.end()) continue;
    Entry& e = found->second;
    if (std::find(e.job.gpus.begin(), e.job.gpus.end(), g.index) == e.job.gpus.end()) continue;
    // A job already stopping is not signalled again; a fault only turns a
    // requeue under way into a move.
    if (e.job.state == JobState::kRunning) ++moved;
    Stop(e, StopIntent::kFault, fmt::format("GPU {} {}", g.index, why));
  }
  dirty_ = true;
  return moved;
}

void JobService::OnRound() {
  TimeMs now = state_->clock->Now();
  // Finished jobs older than the fair-share window no longer count.
  fair_share_->Expire(now);
  if (load_listener_) {
    std::vector<JobLoad> loads;
    for (sched::JobId id : active_) {
      const Entry& e = jobs_.at(id);
      if (e.job.state != JobState::kRunning || e.job.gpus.empty()) continue;
      loads.push_back({id, e.job.spec.name, e.job.gpus, e.job.spec.gpu_twentieths,
                       e.job.spec.fractional() ? e.job.spec.gpu_mem_bytes : 0, e.shim_pid});
    }
    load_listener_(loads);
  }
  WatchMemory(now);
  // A deep queue costs nothing while nothing changes: a pass only when a
  // GPU's state changed, a running job's GPUs come due (reservations,
  // stops), or aging and fair share have moved for kAgingPass.
  std::string sig = GpuSignature();
  if (sig != gpu_signature_ || now >= next_due_) dirty_ = true;
  gpu_signature_ = std::move(sig);
}

void JobService::WatchMemory(TimeMs now) {
  std::vector<queue::WatchedJob> watched;
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    if (e.job.state != JobState::kRunning || !e.job.spec.fractional() || e.job.gpus.empty() || e.shim_pid == 0) {
      continue;
    }
    watched.push_back({id, e.job.attempt, e.job.gpus[0], e.shim_pid, e.job.spec.gpu_mem_bytes});
  }
  for (const queue::MemoryVerdict& v : watchdog_->Check(watched, now)) {
    auto it = jobs_.find(v.id);
    if (it == jobs_.end()) continue;
    if (v.act == queue::MemoryVerdict::Act::kWarn) {
      Event(it->second.job, "job.memory_over", store::Severity::kWarning, v.message);
    } else {
      Stop(it->second, StopIntent::kMemory, v.message);
    }
  }
}

void JobService::EndOfTurn() {
  if (dirty_) {
    dirty_ = false;
    auto started = std::chrono::steady_clock::now();
    Schedule();
    next_due_ = NextDue(state_->clock->Now());
    last_pass_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  StoreChangedClaims();
  for (sched::JobId id : touched_) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) state_->batch.jobs.push_back(ToRecord(it->second));
  }
  touched_.clear();
}

void JobService::AfterCommit(bool committed) {
  // A few are freed here; many on the launch thread (a bulk cancel's 20,000
  // specs took a tenth of its time to free).
  constexpr size_t kFreedOnTheLoop = 64;
  if (finished_entries_.size() <= kFreedOnTheLoop) {
    finished_entries_.clear();
  } else {
    auto entries = std::make_shared<decltype(finished_entries_)>(std::move(finished_entries_));
    finished_entries_.clear();
    launcher_->OffLoop([entries] { entries->clear(); });
  }
  auto actions = std::move(after_commit_);
  after_commit_.clear();
  auto exits = std::move(exits_this_turn_);
  exits_this_turn_.clear();
  if (!committed) {
    RestoreFromStore();
    for (const auto& r : exits) OnExit(r);
    return;
  }
  for (auto& action : actions) action();
}

bool JobService::OneUserOn(int gpu, uint32_t uid) const {
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    if (e.job.state != JobState::kRunning || !e.job.spec.fractional() || e.job.spec.uid == uid) continue;
    if (std::find(e.job.gpus.begin(), e.job.gpus.end(), gpu) != e.job.gpus.end()) return false;
  }
  return true;
}

// An array's tasks are named NAME[i] (SubmitArray): a filter on NAME means
// the whole array, as `scancel --name` does.
bool JobService::IsTaskOfArrayNamed(const sched::Job& job, const std::string& name) const {
  auto it = jobs_.find(job.id);
  if (it == jobs_.end() || it->second.extras.array_id == 0) return false;
  return job.spec.name == fmt::format("{}[{}]", name, it->second.extras.array_index);
}

Result<api::CancelOutcome> JobService::CancelMany(const CancelRequest& request, const Caller& caller) {
  if (!caller.authenticated) return Unauthenticated("cancelling needs the unix socket or the API token");
  if (request.ids.empty() && !request.filtered()) {
    return InvalidArgument("name the jobs to cancel: ids, or filters (user, state, name, all)");
  }
  std::optional<JobState> state;
  if (!request.state.empty()) {
    state = sched::ParseJobState(request.state);
    if (!state || sched::IsFinal(*state)) {
      return InvalidArgument("state must be pending, held, running or stopping; got '" + request.state + "'");
    }
  }
  if (request.all && !caller.admin) return PermissionDenied("cancelling every user's jobs (all) is for admins");
  if (!request.user.empty() && request.user != caller.user && !caller.admin) {
    return PermissionDenied("only an admin may cancel the jobs of " + request.user);
  }
  auto matches = [&](const sched::Job& job) {
    if (state && job.state != *state) return false;
    if (!request.name.empty() && job.spec.name != request.name && !IsTaskOfArrayNamed(job, request.name)) return false;
    if (!request.user.empty()) return job.spec.user == request.user;
    return request.all || job.spec.uid == caller.uid;
  };
  // Every check before the first cancel: all or nothing.
  std::vector<sched::JobId> chosen;
  api::CancelOutcome outcome;
  if (!request.ids.empty()) {
    std::vector<sched::JobId> ids = request.ids;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (sched::JobId id : ids) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) {
        auto stored = id > 0 && id < next_id_ ? state_->store->GetJob(id) : Result<std::optional<store::JobRecord>>(std::nullopt);
        if (!stored.ok()) return stored.status();
        if (!stored->has_value()) {
          return NotFound("no job " + std::to_string(id) + " (nothing was cancelled); `gpuherd ps --all` lists them");
        }
        outcome.skipped.push_back({id, "already " + (*stored)->state});
        continue;
      }
      const sched::Job& job = it->second.job;
      if (!caller.MayActOn(job.spec.uid)) {
        return PermissionDenied(fmt::format("job {} belongs to {}; only its owner or an admin may cancel it "
                                            "(nothing was cancelled)",
                                            id, job.spec.user));
      }
      if (!request.filtered() || matches(job)) chosen.push_back(id);
    }
  } else {
    for (const auto& [id, e] : jobs_) {
      if (matches(e.job)) chosen.push_back(id);
    }
  }
  // Each cancel adds its record and its event to the turn's one commit.
  state_->batch.jobs.reserve(state_->batch.jobs.size() + chosen.size());
  state_->batch.events.reserve(state_->batch.events.size() + chosen.size());
  for (sched::JobId id : chosen) {
    auto done = Act(id, "cancel", caller);
    if (!done.ok()) {
      outcome.skipped.push_back({id, done.status().message()});
    } else if (*done == "cancelled") {
      outcome.cancelled.push_back(id);
    } else {
      outcome.stopping.push_back(id);
    }
  }
  return outcome;
}

void JobService::NoteAttemptEnd(const Entry& e, const exec::ExitRecord& r) {
  AttemptStop stop = AttemptStop::kNone;
  switch (e.intent) {
    case StopIntent::kNone: stop = AttemptStop::kNone; break;
    case StopIntent::kCancel: stop = AttemptStop::kCancel; break;
    case StopIntent::kRequeue: stop = AttemptStop::kRequeue; break;
    case StopIntent::kFault: stop = AttemptStop::kFault; break;
    case StopIntent::kMemory: stop = AttemptStop::kMemory; break;
  }
  const std::string cause = AttemptEndCause(stop, e.job.reason, r);
  std::string reason = stop != AttemptStop::kNone ? e.job.reason : r.message;
  if (reason.empty() && r.how == exec::ExitRecord::How::kExited) reason = fmt::format("exited with code {}", r.code);
  if (reason.empty() && r.signal != 0) reason = fmt::format("killed by signal {} ({})", r.signal, strsignal(r.signal));
  attempt_log_->Ended(e.job, cause, reason, &r);
}

}  // namespace gpuherd::daemon
