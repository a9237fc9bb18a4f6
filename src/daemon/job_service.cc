#include "daemon/job_service.h"

#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/owned_dirs.h"
#include "daemon/attempt_log.h"
#include "exec/job_files.h"
#include "fence/fence_report.h"
#include "gpu/sim/sim_driver.h"
#include "gpu/xid.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using sched::JobState;
namespace fs = std::filesystem;

constexpr int64_t kLogChunkBytes = 256 * 1024;
// How many finished jobs `ps --all` lists: the most recent.
constexpr size_t kMaxListedFinished = 100000;

std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  size_t pos = 0;
  while (pos < list.size()) {
    size_t comma = list.find(',', pos);
    std::string part = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = part.find('-');
    try {
      int lo = std::stoi(part.substr(0, dash));
      int hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
      for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    } catch (...) {
      return {};
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return cpus;
}

// CPUs of the GPUs' NUMA node that this process may actually use: a simulated
// fleet's affinity names CPUs this machine may not have.
std::vector<int> AffinityFor(const gpu::Fleet& fleet, const std::vector<int>& gpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::set<int> cpus;
  for (int g : gpus) {
    if (g < 0 || g >= static_cast<int>(fleet.gpus.size())) continue;
    for (int c : ParseCpuList(fleet.gpus[g].cpu_affinity)) {
      if (c >= 0 && c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) cpus.insert(c);
    }
  }
  return {cpus.begin(), cpus.end()};
}

bool IsGpuFault(const store::EventRecord& e, const json& data) {
  if (e.kind == "gpu.lost") return true;
  if (e.kind == "gpu.xid") return gpu::XidIsFatal(data.value("xid", 0));
  if (e.kind == "gpu.ecc" || e.kind == "gpu.thermal") return e.severity == store::Severity::kCritical;
  return false;
}

}  // namespace

JobService::JobService(DaemonState* state, exec::Executor* executor, gpu::sim::SimDriver* sim, StateDir dir,
                       QueueConfig config, PostToLoop post)
    : state_(state),
      executor_(executor),
      sim_(sim),
      dir_(std::move(dir)),
      config_(std::move(config)),
      static_fleet_(sched::FleetStateFromFleet(state->fleet)),
      post_(std::move(post)),
      launches_(std::make_unique<WorkQueue>()) {}

std::string JobService::AttemptDir(sched::JobId id, int attempt) const {
  return fmt::format("{}/{}/{}", dir_.jobs_dir(), id, attempt);
}

Status JobService::FromRecord(const store::JobRecord& r, Entry* e) const {
  json stored = json::parse(r.spec_json, nullptr, false);
  e->spec_body = stored.is_object() ? stored.value("spec", json::object()) : json::object();
  e->stored_spec = r.spec_json;
  sched::Job& job = e->job;
  auto spec = sched::ParseJobSpec(e->spec_body);
  if (spec.ok()) job.spec = *spec;
  job.id = r.id;
  job.spec.name = r.name;
  job.spec.user = r.user;
  job.spec.uid = r.uid;
  job.spec.gid = stored.is_object() ? stored.value("gid", 0u) : 0u;
  if (stored.is_object()) {
    e->extras.checkpoint_dir = stored.value("checkpoint_dir", std::string());
    e->extras.prior_attempts = stored.value("prior_attempts", 0);
    e->extras.pinned_gpus = stored.value("pinned_gpus", std::vector<std::string>());
    job.spec.pinned_gpus = e->extras.pinned_gpus;
  }
  job.state = sched::ParseJobState(r.state).value_or(JobState::kFailed);
  job.submitted = r.submitted;
  job.started = r.started;
  job.ended = r.ended;
  job.attempt = r.attempt;
  job.restarts = r.restarts;
  job.exit_code = r.exit_code;
  job.exit_signal = r.exit_signal;
  job.reason = r.reason;
  json uuids = json::parse(r.gpus_json, nullptr, false);
  if (uuids.is_array()) {
    for (const auto& u : uuids) {
      job.gpu_uuids.push_back(u.get<std::string>());
      for (const auto& g : state_->fleet.gpus) {
        if (g.uuid == job.gpu_uuids.back()) job.gpus.push_back(g.index);
      }
    }
  }
  return spec.ok() ? Status::Ok() : spec.status();
}

Status JobService::Load() {
  auto last = state_->store->LastJobId();
  if (!last.ok()) return last.status();
  next_id_ = *last + 1;
  auto drains = state_->store->ListDrains();
  if (!drains.ok()) return drains.status();
  for (const auto& d : *drains) drains_[d.uuid] = d.reason;
  TimeMs now = state_->clock->Now();
  auto finished = state_->store->ListFinishedJobs(now - config_.scheduler.weights.fair_window, 100000);
  if (!finished.ok()) return finished.status();
  for (const auto& r : *finished) {
    json spec = json::parse(r.spec_json, nullptr, false);
    double gpus = spec.is_object() ? spec.value("gpu_tenths", 0) / 10.0 : 0;
    if (r.started > 0 && r.ended > r.started) usage_.emplace(r.user, std::make_pair(r.ended, gpus * (r.ended - r.started) / 3.6e6));
  }
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
    if ((job.state == JobState::kRunning || job.state == JobState::kStopping) &&
        !fs::exists(AttemptDir(job.id, job.attempt))) {
      // The daemon stopped between recording the start and launching it: the
      // attempt never ran, so it does not count as a restart.
      Insert(std::move(e));
      if (attempt_log_) attempt_log_->Ended(jobs_.at(r.id).job, "launch_failed", "the daemon stopped before launching it", nullptr);
      Requeue(jobs_.at(r.id), "the daemon stopped before launching it", false);
      continue;
    }
    if (job.state == JobState::kRunning || job.state == JobState::kStopping) {
      // The shim may still run the job (it outlives the daemon), may have
      // recorded its exit meanwhile, or may be gone: Adopt sorts it out and
      // reports through OnExit when the attempt is over.
      Status adopted = executor_->Adopt(job.id, job.attempt, AttemptDir(job.id, job.attempt));
      if (!adopted.ok()) spdlog::warn("job {}: cannot re-adopt: {}", job.id, adopted.ToString());
      e.adopted = true;
      if (auto shim = exec::ReadShimFile(AttemptDir(job.id, job.attempt)); shim.ok() && shim->has_value()) {
        e.shim_pid = (*shim)->pid;  // the watchdog matches the job's processes by its shim's session
      }
      if (attempt_log_ && e.shim_pid > 0) attempt_log_->Launched(job.id, job.attempt, e.shim_pid);
      if (job.state == JobState::kStopping) e.intent = StopIntent::kRequeue;
    }
    Insert(std::move(e));
  }
  dirty_ = true;
  return Status::Ok();
}

void JobService::Insert(Entry e) {
  ++unfinished_by_uid_[e.job.spec.uid];
  sched::JobId id = e.job.id;
  jobs_.emplace(id, std::move(e));
}

void JobService::Erase(sched::JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  auto count = unfinished_by_uid_.find(it->second.job.spec.uid);
  if (count != unfinished_by_uid_.end() && --count->second <= 0) unfinished_by_uid_.erase(count);
  jobs_.erase(it);
}

void JobService::Touch(Entry& e) {
  touched_.insert(e.job.id);
  dirty_ = true;
}

void JobService::Event(const sched::Job& job, const std::string& kind, store::Severity severity,
                       const std::string& message) {
  store::EventRecord ev;
  ev.time = state_->clock->Now();
  ev.kind = kind;
  ev.severity = severity;
  ev.gpu_uuid = job.gpu_uuids.size() == 1 ? job.gpu_uuids[0] : "";
  ev.message = fmt::format("job {} ({}): {}", job.id, job.spec.name, message);
  ev.data_json = json{{"job", job.id}, {"attempt", job.attempt}, {"gpus", job.gpu_uuids}}.dump();
  state_->batch.events.push_back(std::move(ev));
}

namespace {

// A job without a name is called after its program: argv[0] without its directory.
std::string DefaultJobName(const sched::JobSpec& spec) {
  return fs::path(spec.argv.empty() ? "job" : spec.argv[0]).filename().string();
}

}  // namespace

Result<sched::JobId> JobService::Submit(const json& body, const Caller& caller, const SubmitExtras& extras) {
  if (!caller.authenticated) return Unauthenticated("submitting needs the unix socket or the API token");
  auto parsed = sched::ParseJobSpec(body);
  if (!parsed.ok()) return parsed.status();
  sched::JobSpec spec = std::move(parsed).value();
  spec.user = caller.user;
  spec.uid = caller.uid;
  spec.gid = caller.gid;
  spec.pinned_gpus = extras.pinned_gpus;
  if (spec.name.empty()) spec.name = DefaultJobName(spec);
  // Whether the job could ever fit depends only on the fleet's fixed facts.
  GPUHERD_RETURN_IF_ERROR(sched::CheckFits(spec, static_fleet_));
  for (sched::JobId dep : spec.depends_on) {
    if (dep <= 0 || dep >= next_id_) return InvalidArgument("depends_on names job " + std::to_string(dep) + ", which does not exist");
  }
  auto queued = unfinished_by_uid_.find(caller.uid);
  GPUHERD_RETURN_IF_ERROR(sched::CheckQueueLimit(
      caller.user, queued == unfinished_by_uid_.end() ? 0 : queued->second, config_.scheduler));
  Entry e;
  e.spec_body = body;
  json stored_spec = {{"spec", e.spec_body}, {"gid", spec.gid}, {"gpu_tenths", spec.gpu_tenths}};
  if (!extras.checkpoint_dir.empty()) stored_spec["checkpoint_dir"] = extras.checkpoint_dir;
  if (extras.prior_attempts > 0) stored_spec["prior_attempts"] = extras.prior_attempts;
  if (!extras.pinned_gpus.empty()) stored_spec["pinned_gpus"] = extras.pinned_gpus;
  e.stored_spec = stored_spec.dump();
  e.extras = extras;
  e.job.id = next_id_++;
  e.job.spec = std::move(spec);
  e.job.submitted = state_->clock->Now();
  e.job.state = JobState::kPending;
  sched::JobId id = e.job.id;
  Insert(std::move(e));
  Entry& stored = jobs_.at(id);
  Touch(stored);
  Event(stored.job, "job.submitted", store::Severity::kInfo, "submitted by " + caller.user);
  return id;
}

Result<std::vector<sched::JobId>> JobService::SubmitArray(const json& body, int count, const Caller& caller) {
  if (count < 1 || count > sched::kMaxArraySize) {
    return InvalidArgument(fmt::format("an array has 1 to {} tasks, got {}", sched::kMaxArraySize, count));
  }
  if (!caller.authenticated) return Unauthenticated("submitting needs the unix socket or the API token");
  // The checks Submit makes, once for the whole array, so that no task can be
  // refused after the first was queued.
  auto parsed = sched::ParseJobSpec(body);
  if (!parsed.ok()) return parsed.status();
  GPUHERD_RETURN_IF_ERROR(sched::CheckFits(*parsed, static_fleet_));
  auto queued = unfinished_by_uid_.find(caller.uid);
  GPUHERD_RETURN_IF_ERROR(sched::CheckQueueLimit(
      caller.user, (queued == unfinished_by_uid_.end() ? 0 : queued->second) + count - 1, config_.scheduler));
  const std::string name = parsed->name.empty() ? DefaultJobName(*parsed) : parsed->name;
  std::vector<sched::JobId> ids;
  ids.reserve(static_cast<size_t>(count));
  json task = body;
  for (int i = 0; i < count; ++i) {
    task["name"] = fmt::format("{}[{}]", name, i);
    task["env"]["GPUHERD_ARRAY_INDEX"] = std::to_string(i);
    task["env"]["GPUHERD_ARRAY_SIZE"] = std::to_string(count);
    auto id = Submit(task, caller);
    // Cannot happen after the checks above; a failure here is a bug, and the
    // tasks queued so far still commit with the turn.
    if (!id.ok()) return Internal(fmt::format("array task {} refused after the checks passed: {}", i,
                                              id.status().message()));
    ids.push_back(*id);
  }
  return ids;
}

Result<std::string> JobService::Act(sched::JobId id, const std::string& action, const Caller& caller) {
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
    if (job.state == JobState::kPending || job.state == JobState::kHeld) {
      Finish(e, JobState::kCancelled, "cancelled by " + caller.user);
      return std::string("cancelled");
    }
    if (job.state == JobState::kRunning || job.state == JobState::kStopping) {
      Stop(e, StopIntent::kCancel, "cancelled by " + caller.user);
      return std::string("stopping");
    }
    return refuse();
  }
  if (action == "hold") {
    if (job.state != JobState::kPending) return refuse();
    job.state = JobState::kHeld;
    job.reason = "held by " + caller.user;
    Touch(e);
    Event(job, "job.held", store::Severity::kInfo, job.reason);
    return std::string("held");
  }
  if (action == "release") {
    if (job.state != JobState::kHeld) return refuse();
    job.state = JobState::kPending;
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
  const gpu::GpuInfo& g = state_->fleet.gpus.at(pos);
  std::string why = reason.empty() ? "drained by " + caller.user : reason + " (" + caller.user + ")";
  drains_[g.uuid] = why;
  state_->batch.drains.push_back({g.uuid, true, why, state_->clock->Now()});
  store::EventRecord ev{0, state_->clock->Now(), "gpu.drained", store::Severity::kWarning, g.uuid,
                        fmt::format("GPU {} drained: {}", g.index, why), "{}"};
  state_->batch.events.push_back(ev);
  dirty_ = true;
  return Status::Ok();
}

Status JobService::Undrain(int pos, const Caller& caller) {
  if (!caller.admin) return PermissionDenied("only an admin (root, the daemon's user or the admin group) may undrain GPUs");
  const gpu::GpuInfo& g = state_->fleet.gpus.at(pos);
  if (!drains_.erase(g.uuid)) return FailedPrecondition(fmt::format("GPU {} is not drained", g.index));
  state_->batch.drains.push_back({g.uuid, false, "", state_->clock->Now()});
  store::EventRecord ev{0, state_->clock->Now(), "gpu.undrained", store::Severity::kInfo, g.uuid,
                        fmt::format("GPU {} returned to work by {}", g.index, caller.user), "{}"};
  state_->batch.events.push_back(ev);
  dirty_ = true;
  return Status::Ok();
}

std::vector<sched::RunningJob> JobService::RunningJobs() const {
  std::vector<sched::RunningJob> running;
  for (const auto& [id, e] : jobs_) {
    if (e.job.state != JobState::kRunning && e.job.state != JobState::kStopping) continue;
    running.push_back({id, e.job.spec, e.job.started, e.job.gpus, e.job.state == JobState::kStopping, e.stop_deadline});
  }
  return running;
}

sched::FleetState JobService::BuildFleetState(const std::vector<sched::RunningJob>& running) const {
  RefreshHealth();
  sched::FleetState fleet = static_fleet_;
  for (size_t i = 0; i < fleet.gpus.size(); ++i) {
    sched::GpuState& g = fleet.gpus[i];
    g.drained = drains_.count(g.uuid) > 0;
    if (auto h = health_.find(g.uuid); h != health_.end()) {
      g.health_score = h->second.score;
      g.healthy = !h->second.unhealthy;
    }
    if (!state_->telemetry) continue;
    g.lost = state_->telemetry->State(static_cast<int>(i)) == telemetry::GpuState::kLost;
    if (const gpu::GpuSample* s = state_->telemetry->Latest(static_cast<int>(i))) {
      g.temp_c = s->temp_c;
      g.memory_used_bytes = s->mem_used_bytes.value_or(0);
      g.thermal_throttling = s->throttle_reasons && (*s->throttle_reasons & gpu::throttle::kThermalMask);
    }
  }
  sched::AccountRunningJobs(running, &fleet);
  return fleet;
}

void JobService::RefreshHealth() const {
  constexpr DurationMs kHealthRefresh = 5 * kSecondMs;
  TimeMs now = state_->clock->Now();
  if (health_read_at_ != 0 && now - health_read_at_ < kHealthRefresh) return;
  health_read_at_ = now;
  auto latest = state_->store->LatestBurnInPerGpu();
  if (!latest.ok()) return;  // keep the previous verdicts; the store logs its own errors
  health_.clear();
  for (const store::BurnInRecord& r : *latest) {
    health_[r.gpu_uuid] = {r.score, r.verdict == "unhealthy"};
  }
}

double JobService::RecentGpuHours(const std::string& user, TimeMs now) const {
  double hours = 0;
  auto [lo, hi] = usage_.equal_range(user);
  for (auto it = lo; it != hi; ++it) {
    if (it->second.first >= now - config_.scheduler.weights.fair_window) hours += it->second.second;
  }
  for (const auto& [id, e] : jobs_) {
    if (e.job.spec.user == user && e.job.state == JobState::kRunning) {
      hours += e.job.spec.gpu_tenths / 10.0 * (now - e.job.started) / 3.6e6;
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
  for (auto& [id, e] : jobs_) {
    const sched::Job& job = e.job;
    if (job.state != JobState::kPending) continue;
    sched::PendingJob p;
    p.id = id;
    p.spec = job.spec;
    p.submitted = job.submitted;
    auto h = hours.find(job.spec.user);
    if (h == hours.end()) h = hours.emplace(job.spec.user, RecentGpuHours(job.spec.user, now)).first;
    p.user_gpu_hours = h->second;
    p.deps = sched::Dependencies::kSatisfied;
    bool unreadable = false;
    for (sched::JobId dep : job.spec.depends_on) {
      auto d = jobs_.find(dep);
      if (d != jobs_.end()) {
        if (p.deps == sched::Dependencies::kSatisfied) {
          p.deps = sched::Dependencies::kWaiting;
          p.blocking_dep = dep;
          p.blocking_dep_state = d->second.job.state;
        }
        continue;
      }
      auto known = finished_dep_completed_.find(dep);
      if (known == finished_dep_completed_.end()) {
        auto stored = state_->store->GetJob(dep);
        // A store error is not an answer: the job waits for the next pass.
        if (!stored.ok()) {
          spdlog::warn("job {}: cannot read job {} it depends on: {}", id, dep, stored.status().message());
          unreadable = true;
          break;
        }
        known = finished_dep_completed_
                    .emplace(dep, stored->has_value() && (*stored)->state == "completed")
                    .first;
      }
      if (!known->second) {
        p.deps = sched::Dependencies::kFailed;
        break;
      }
    }
    if (unreadable) continue;
    if (p.deps == sched::Dependencies::kFailed) {
      dependency_failed.push_back(id);
      continue;
    }
    pending.push_back(std::move(p));
  }
  for (sched::JobId id : dependency_failed) {
    Finish(jobs_.at(id), JobState::kCancelled, "a job it depends on did not complete");
  }
  if (pending.empty()) return;
  sched::Decisions decisions = sched::Schedule(fleet, pending, running, now, config_.scheduler);
  for (const auto& start : decisions.starts) {
    auto it = jobs_.find(start.job);
    if (it != jobs_.end()) Start(it->second, start.gpus);
  }
  for (const auto& p : decisions.preemptions) {
    for (sched::JobId victim : p.victims) {
      auto it = jobs_.find(victim);
      if (it != jobs_.end() && it->second.job.state == JobState::kRunning) {
        Stop(it->second, StopIntent::kRequeue, fmt::format("preempted for job {}", p.for_job));
      }
    }
  }
  for (const auto& w : decisions.waiting) {
    auto it = jobs_.find(w.job);
    // Shown live; stored with the job's next change.
    if (it != jobs_.end()) it->second.job.reason = fmt::format("#{} in line: {}", w.rank, w.reason);
  }
}

exec::LaunchSpec JobService::MakeLaunch(const Entry& e) const {
  const sched::Job& job = e.job;
  exec::LaunchSpec l;
  l.job_id = job.id;
  l.attempt = job.attempt;
  l.argv = job.spec.argv;
  l.cwd = job.spec.cwd;
  l.env = job.spec.env;
  l.dir = AttemptDir(job.id, job.attempt);
  // Jobs run as their submitter when the daemon can switch users (root).
  if (::geteuid() == 0 && job.spec.uid != 0) {
    l.uid = job.spec.uid;
    l.gid = job.spec.gid;
  }
  l.cpus = AffinityFor(state_->fleet, job.gpus);
  l.time_limit = job.spec.time_limit;
  l.grace = job.spec.checkpoint_grace;
  l.limits.memory_bytes = job.spec.mem_bytes;  // enforced in the job's control group
  l.limits.cpus = job.spec.cpus;

  // The job protocol (README "Job protocol").
  std::string visible;
  for (const auto& u : job.gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  l.env["CUDA_VISIBLE_DEVICES"] = job.spec.gpu_tenths > 0 ? visible : "";
  l.env["GPUHERD_JOB_ID"] = std::to_string(job.id);
  l.env["GPUHERD_JOB_NAME"] = job.spec.name;
  l.env["GPUHERD_ATTEMPT"] = std::to_string(job.attempt);
  l.env["GPUHERD_CHECKPOINT_DIR"] = e.extras.checkpoint_dir.empty()
                                        ? fmt::format("{}/{}", dir_.checkpoint_dir(), job.id)
                                        : e.extras.checkpoint_dir;
  l.env["GPUHERD_METRICS_FILE"] = fmt::format("{}/{}/metrics.jsonl", dir_.jobs_dir(), job.id);
  l.env["GPUHERD_RESTART_COUNT"] = std::to_string(e.extras.prior_attempts + job.attempt - 1);
  if (job.attempt > 1) l.env["GPUHERD_RESUME"] = "1";
  if (job.spec.fractional()) {
    l.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(job.spec.gpu_tenths * 10);
    l.env["GPUHERD_GPU_MEM_LIMIT_MB"] = std::to_string(job.spec.gpu_mem_bytes >> 20);
    // Exactly the share the scheduler counts: what the memory fence enforces.
    l.env["GPUHERD_GPU_MEM_LIMIT_BYTES"] = std::to_string(job.spec.gpu_mem_bytes);
    if (mps_ != nullptr && job.gpus.size() == 1 && OneUserOn(job.gpus[0], job.spec.uid)) {
      for (const auto& [key, value] : mps_->JobEnv(job.gpus[0], job.spec.gpu_mem_bytes)) l.env[key] = value;
    }
  }
  if (job.spec.whole_gpus() > 1) {
    // torchrun-style single-node rendezvous; the port is unique per job.
    l.env["MASTER_ADDR"] = "127.0.0.1";
    l.env["MASTER_PORT"] = std::to_string(29500 + job.id % 20000);
    l.env["WORLD_SIZE"] = std::to_string(job.spec.whole_gpus());
    l.env["LOCAL_WORLD_SIZE"] = std::to_string(job.spec.whole_gpus());
    bool all_nvlink = true;
    for (int a : job.gpus) {
      for (int b : job.gpus) {
        if (a != b && state_->fleet.topology.at(a).at(b) != gpu::Link::kNvLink) all_nvlink = false;
      }
    }
    l.env["NCCL_P2P_LEVEL"] = all_nvlink ? "NVL" : "PIX";
  }
  if (state_->fleet.simulated) {
    l.env["GPUHERD_SIM_GPU_MEM_FILE"] = fmt::format("{}/{}/sim_gpu_mem_mb", dir_.jobs_dir(), job.id);
  }
  return l;
}

void JobService::Start(Entry& e, const std::vector<int>& gpus) {
  sched::Job& job = e.job;
  job.state = JobState::kRunning;
  job.attempt += 1;
  job.started = state_->clock->Now();
  job.gpus = gpus;
  job.gpu_uuids.clear();
  for (int g : gpus) job.gpu_uuids.push_back(state_->fleet.gpus.at(g).uuid);
  job.reason.clear();
  e.intent = StopIntent::kNone;
  Touch(e);
  std::string where = gpus.empty() ? "no GPU" : "GPU " + fmt::format("{}", fmt::join(gpus, ","));
  Event(job, "job.started", store::Severity::kInfo, fmt::format("attempt {} started on {}", job.attempt, where));
  if (attempt_log_) attempt_log_->Started(job);
  if (listener_) listener_(job);
  exec::LaunchSpec launch = MakeLaunch(e);
  sched::JobId id = job.id;
  int attempt = job.attempt;
  // Launched only once "running" is durable: a crash in between leaves a
  // running job without a shim, which the next start requeues; never a shim
  // for a job the store calls pending.
  after_commit_.push_back([this, id, attempt, launch = std::move(launch)]() mutable {
    // Forks happen on the launch thread, so the loop goes on answering.
    launches_->Post([this, id, attempt, launch = std::move(launch)] {
      // The job's own directories (checkpoints, metrics, the attempt's logs
      // below) belong to the user it runs as.
      const std::string job_dir = fs::path(launch.dir).parent_path().string();
      for (const std::string& d : {job_dir, launch.env.at("GPUHERD_CHECKPOINT_DIR")}) {
        Status made = MakeHomeDirs(dir_, d, launch.uid ? std::optional<DirOwner>(DirOwner{*launch.uid, *launch.gid}) : std::nullopt);
        if (!made.ok()) spdlog::warn("job {}: {}", id, made.message());
      }
      Result<int> pid = executor_->Launch(launch);
      post_([this, id, attempt, pid] { OnLaunched(id, attempt, pid); });
    });
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
  job.state = JobState::kStopping;
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
  AccountGpuTime(job, state_->clock->Now());
  job.state = state;
  job.reason = reason;
  job.ended = state_->clock->Now();
  if (job.started > 0 && job.spec.gpu_tenths > 0) {
    usage_.emplace(job.spec.user,
                   std::make_pair(job.ended, job.spec.gpu_tenths / 10.0 * (job.ended - job.started) / 3.6e6));
  }
  state_->batch.jobs.push_back(ToRecord(e));
  touched_.erase(job.id);
  Event(job, "job." + std::string(sched::JobStateName(state)),
        state == JobState::kFailed ? store::Severity::kWarning : store::Severity::kInfo, reason);
  if (listener_) listener_(job);
  AddFinishedListing(job);
  Erase(job.id);
  dirty_ = true;
}

void JobService::Requeue(Entry& e, const std::string& reason, bool count_restart) {
  sched::Job& job = e.job;
  if (count_restart) {
    if (job.restarts >= job.spec.max_restarts) {
      Finish(e, JobState::kFailed,
             fmt::format("{}; no restarts left ({} of {} used)", reason, job.restarts, job.spec.max_restarts));
      return;
    }
    job.restarts += 1;
  }
  AccountGpuTime(job, state_->clock->Now());
  job.state = JobState::kPending;
  job.gpus.clear();
  job.reason = reason + "; will resume from its checkpoint";
  e.intent = StopIntent::kNone;
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

int JobService::MoveJobsOff(int pos, const std::string& why) {
  const gpu::GpuInfo& g = state_->fleet.gpus.at(pos);
  TimeMs now = state_->clock->Now();
  if (!drains_.count(g.uuid)) {
    drains_[g.uuid] = why;
    state_->batch.drains.push_back({g.uuid, true, why, now});
    state_->batch.events.push_back({0, now, "gpu.drained", store::Severity::kWarning, g.uuid,
                                    fmt::format("GPU {} drained until an operator returns it: {}", g.index, why),
                                    "{}"});
  }
  int moved = 0;
  for (auto& [id, e] : jobs_) {
    if (e.job.state != JobState::kRunning && e.job.state != JobState::kStopping) continue;
    if (std::find(e.job.gpus.begin(), e.job.gpus.end(), g.index) == e.job.gpus.end()) continue;
    // A job already stopping is not signalled again; a fault only turns a
    // requeue under way into a move.
    if (e.job.state == JobState::kRunning) ++moved;
    Stop(e, StopIntent::kFault, fmt::format("GPU {} {}", g.index, why));
  }
  dirty_ = true;
  return moved;
}

std::vector<int> JobService::JobsPerGpu() const {
  std::vector<int> jobs(state_->fleet.gpus.size(), 0);
  for (const auto& [id, e] : jobs_) {
    if (e.job.state != JobState::kRunning && e.job.state != JobState::kStopping) continue;
    for (int g : e.job.gpus) {
      if (g >= 0 && g < static_cast<int>(jobs.size())) ++jobs[g];
    }
  }
  return jobs;
}

std::map<std::string, int> JobService::CountByState() const {
  std::map<std::string, int> counts;
  for (JobState s : {JobState::kPending, JobState::kHeld, JobState::kRunning, JobState::kStopping}) {
    counts[sched::JobStateName(s)] = 0;
  }
  for (const auto& [id, e] : jobs_) ++counts[sched::JobStateName(e.job.state)];
  return counts;
}

std::map<std::string, double> JobService::GpuSecondsByUser(TimeMs now) const {
  std::map<std::string, double> seconds = gpu_seconds_done_;
  for (const auto& [id, e] : jobs_) {
    const sched::Job& job = e.job;
    if (job.state != JobState::kRunning && job.state != JobState::kStopping) continue;
    if (job.started <= 0 || now <= job.started) continue;
    seconds[job.spec.user] += job.spec.gpu_tenths / 10.0 * static_cast<double>(now - job.started) / 1000.0;
  }
  return seconds;
}

void JobService::AccountGpuTime(const sched::Job& job, TimeMs end) {
  if (job.state != JobState::kRunning && job.state != JobState::kStopping) return;
  if (job.started <= 0 || end <= job.started) return;
  gpu_seconds_done_[job.spec.user] += job.spec.gpu_tenths / 10.0 * static_cast<double>(end - job.started) / 1000.0;
}

void JobService::OnRound() {
  TimeMs now = state_->clock->Now();
  // Finished jobs older than the fair-share window no longer count.
  std::erase_if(usage_, [&](const auto& u) { return u.second.first < now - config_.scheduler.weights.fair_window; });
  // Simulated fleet: what the jobs put on each GPU, and their memory as the
  // jobs report it (GPUHERD_SIM_GPU_MEM_FILE) or their share.
  std::map<int, gpu::sim::Load> loads;
  for (auto& [id, e] : jobs_) {
    if (e.job.state != JobState::kRunning || e.job.gpus.empty()) continue;
    if (!sim_) continue;
    uint64_t per_gpu_mem = e.job.spec.fractional() ? e.job.spec.gpu_mem_bytes / 2 : 0;
    std::ifstream reported(fmt::format("{}/{}/sim_gpu_mem_mb", dir_.jobs_dir(), id));
    uint64_t mb = 0;
    if (reported >> mb) per_gpu_mem = mb << 20;
    for (int g : e.job.gpus) {
      auto& load = loads[g];
      load.util = std::min(1.0, load.util + std::max(0.1, e.job.spec.gpu_tenths / 10.0 / e.job.gpus.size()));
      load.processes.push_back({e.shim_pid, per_gpu_mem, e.job.spec.name});
    }
  }
  if (sim_) {
    for (int i = 0; i < static_cast<int>(state_->fleet.gpus.size()); ++i) sim_->SetLoad(i, loads[i]);
  }
  // The memory watchdog: a fractional job above its share is warned once,
  // then stopped after the grace; its neighbours are never touched.
  for (auto& [id, e] : jobs_) {
    if (e.job.state != JobState::kRunning || !e.job.spec.fractional() || e.job.gpus.empty() || e.shim_pid == 0) {
      continue;
    }
    const gpu::GpuSample* s = state_->telemetry->Latest(e.job.gpus[0]);
    if (!s) continue;
    uint64_t used = 0;
    // A job's processes live in the session its shim created (the session id
    // is the shim's pid), however many processes the job forked.
    for (const auto& p : s->processes) {
      if (p.pid == e.shim_pid || host::ProcessSession(*state_->host, p.pid).value_or(0) == e.shim_pid) used += p.used_memory_bytes;
    }
    if (used <= e.job.spec.gpu_mem_bytes) {
      e.over_memory_since = 0;
      continue;
    }
    std::string what = fmt::format("uses {} MiB of GPU memory, over its share of {} MiB", used >> 20,
                                   e.job.spec.gpu_mem_bytes >> 20);
    if (e.over_memory_since == 0) {
      e.over_memory_since = now;
      Event(e.job, "job.memory_over", store::Severity::kWarning,
            what + "; stopped in " + FormatDuration(config_.memory_watchdog_grace) + " unless it frees memory");
    } else if (now - e.over_memory_since >= config_.memory_watchdog_grace) {
      Stop(e, StopIntent::kMemory, what + " for " + FormatDuration(now - e.over_memory_since));
    }
  }
  dirty_ = true;  // aging and temperatures change what may start
}

void JobService::EndOfTurn() {
  if (dirty_) {
    dirty_ = false;
    auto started = std::chrono::steady_clock::now();
    Schedule();
    last_pass_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  }
  for (sched::JobId id : touched_) {
    auto it = jobs_.find(id);
    if (it != jobs_.end()) state_->batch.jobs.push_back(ToRecord(it->second));
  }
  touched_.clear();
}

void JobService::AfterCommit() {
  auto actions = std::move(after_commit_);
  after_commit_.clear();
  for (auto& action : actions) action();
}

store::JobRecord JobService::ToRecord(const Entry& e) const {
  const sched::Job& job = e.job;
  store::JobRecord r;
  r.id = job.id;
  r.name = job.spec.name;
  r.user = job.spec.user;
  r.uid = job.spec.uid;
  r.state = sched::JobStateName(job.state);
  r.priority = job.spec.priority;
  r.spec_json = e.stored_spec;
  r.submitted = job.submitted;
  r.started = job.started;
  r.ended = job.ended;
  r.attempt = job.attempt;
  r.restarts = job.restarts;
  r.gpus_json = json(job.gpu_uuids).dump();
  r.exit_code = job.exit_code;
  r.exit_signal = job.exit_signal;
  r.reason = job.reason;
  return r;
}

json JobService::ToJson(const sched::Job& job, TimeMs now) const {
  json j = {{"id", job.id},
            {"name", job.spec.name},
            {"user", job.spec.user},
            {"state", sched::JobStateName(job.state)},
            {"priority", job.spec.priority},
            {"gpu_tenths", job.spec.gpu_tenths},
            {"gpu_mem_bytes", job.spec.gpu_mem_bytes},
            {"assigned_gpus", job.gpus},
            {"gpu_uuids", job.gpu_uuids},
            {"submitted", job.submitted},
            {"started", job.started},
            {"ended", job.ended},
            {"attempt", job.attempt},
            {"restarts", job.restarts},
            {"max_restarts", job.spec.max_restarts},
            {"preemptible", job.spec.preemptible},
            {"time_limit_ms", job.spec.time_limit},
            {"command", job.spec.argv},
            {"reason", job.reason},
            {"now", now}};
  if (job.exit_code) j["exit_code"] = *job.exit_code;
  if (job.exit_signal) j["exit_signal"] = *job.exit_signal;
  if (job.attempt > 0) j["logs"] = AttemptDir(job.id, job.attempt);
  return j;
}

JobService::ListedJob JobService::Listed(const sched::Job& job) const {
  // Keys are sorted, so "now" follows "name" and is found after a comma; a
  // quote inside a string value is escaped and cannot fake the match.
  static constexpr char kNowKey[] = ",\"now\":";
  std::string text = ToJson(job, 0).dump(-1, ' ', false, json::error_handler_t::replace);
  size_t at = text.find(kNowKey);
  ListedJob listed{job.spec.user, sched::JobStateName(job.state), text, ""};
  if (at == std::string::npos) return listed;  // not reached: ToJson always writes "now"
  size_t value = at + sizeof(kNowKey) - 1;
  listed.head = text.substr(0, value);
  listed.tail = text.substr(value + 1);  // past the "0"
  return listed;
}

void JobService::AddFinishedListing(const sched::Job& job) {
  // Kept even before the first load, which cannot see what this turn has
  // not committed yet.
  finished_listing_[job.id] = Listed(job);
  while (finished_listing_.size() > kMaxListedFinished) finished_listing_.erase(finished_listing_.begin());
}

void JobService::LoadFinishedListing() {
  if (finished_listing_loaded_) return;
  auto finished = state_->store->ListFinishedJobs(0, static_cast<int>(kMaxListedFinished));
  if (!finished.ok()) {
    spdlog::warn("cannot list finished jobs: {}", finished.status().ToString());
    return;  // tried again at the next listing
  }
  for (const auto& r : *finished) {
    Entry e;
    (void)FromRecord(r, &e);  // an unreadable spec still lists the stored facts
    finished_listing_.emplace(r.id, Listed(e.job));
  }
  while (finished_listing_.size() > kMaxListedFinished) finished_listing_.erase(finished_listing_.begin());
  finished_listing_loaded_ = true;
}

std::string JobService::ListBody(bool all, const std::string& user, const std::string& state) {
  const TimeMs now = state_->clock->Now();
  const std::string now_text = std::to_string(now);
  if (all) LoadFinishedListing();
  std::string out = "{\"jobs\":[";
  bool first = true;
  auto add_unfinished = [&](const Entry& e) {
    if ((!user.empty() && e.job.spec.user != user) || (!state.empty() && sched::JobStateName(e.job.state) != state)) {
      return;
    }
    if (!first) out += ',';
    first = false;
    out += ToJson(e.job, now).dump(-1, ' ', false, json::error_handler_t::replace);
  };
  auto add_finished = [&](const ListedJob& f) {
    if ((!user.empty() && f.user != user) || (!state.empty() && f.state != state)) return;
    if (!first) out += ',';
    first = false;
    out += f.head;
    out += now_text;
    out += f.tail;
  };
  // Both maps are ordered by id, and a job is in one of them only: merged,
  // the listing is ordered by id too.
  auto unfinished = jobs_.begin();
  auto finished = all ? finished_listing_.begin() : finished_listing_.end();
  while (unfinished != jobs_.end() || finished != finished_listing_.end()) {
    if (unfinished != jobs_.end() && (finished == finished_listing_.end() || unfinished->first < finished->first)) {
      add_unfinished((unfinished++)->second);
    } else {
      add_finished((finished++)->second);
    }
  }
  out += "],\"now\":" + now_text + "}";
  return out;
}

bool JobService::OneUserOn(int gpu, uint32_t uid) const {
  for (const auto& [id, e] : jobs_) {
    if (e.job.state != JobState::kRunning || !e.job.spec.fractional() || e.job.spec.uid == uid) continue;
    if (std::find(e.job.gpus.begin(), e.job.gpus.end(), gpu) != e.job.gpus.end()) return false;
  }
  return true;
}

// A fractional job's memory fence as its attempt folder tells it (README
// "Fractional GPUs: the memory fence"): used against the share.
json JobService::MemoryFence(const sched::Job& job) const {
  fence::FenceReport report = fence::ReadFenceReport(AttemptDir(job.id, job.attempt));
  json j = {{"state", report.state}, {"share_bytes", job.spec.gpu_mem_bytes}};
  if (!report.detail.empty()) j["detail"] = report.detail;
  if (report.used_bytes) j["used_bytes"] = *report.used_bytes;
  if (report.share_bytes && *report.share_bytes != job.spec.gpu_mem_bytes) j["fence_share_bytes"] = *report.share_bytes;
  return j;
}

Result<json> JobService::Show(sched::JobId id) {
  TimeMs now = state_->clock->Now();
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    const sched::Job& job = it->second.job;
    json j = ToJson(job, now);
    if (job.state == JobState::kPending) {
      sched::PendingJob p;
      p.id = job.id;
      p.spec = job.spec;
      p.submitted = job.submitted;
      p.user_gpu_hours = RecentGpuHours(job.spec.user, now);
      j["priority_explained"] =
          sched::ExplainPriority(config_.scheduler.weights, sched::PriorityInputsOf(p, now, config_.scheduler));
    }
    if (job.spec.fractional() && job.attempt > 0) j["memory_fence"] = MemoryFence(job);
    if (executor_ != nullptr) j["containment"] = executor_->containment();
    return j;
  }
  auto stored = state_->store->GetJob(id);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return NotFound("no job " + std::to_string(id) + "; `gpuherd ps --all` lists them");
  Entry e;
  // An unreadable spec still shows the stored facts; its error is not needed here.
  (void)FromRecord(**stored, &e);
  const sched::Job& job = e.job;
  json j = ToJson(job, now);
  if (job.spec.fractional() && job.attempt > 0) j["memory_fence"] = MemoryFence(job);
  return j;
}

Result<json> JobService::Logs(sched::JobId id, const std::string& stream, int64_t offset) {
  if (stream != "stdout" && stream != "stderr") return InvalidArgument("stream must be stdout or stderr");
  if (offset < 0) return InvalidArgument("offset must not be negative");
  auto job = Show(id);
  if (!job.ok()) return job.status();
  bool final = sched::IsFinal(sched::ParseJobState((*job)["state"].get<std::string>()).value_or(JobState::kFailed));
  int attempt = (*job)["attempt"].get<int>();
  json out = {{"data", ""}, {"next_offset", offset}, {"final", final}, {"truncated", false}};
  if (attempt == 0) return out;
  std::ifstream in(AttemptDir(id, attempt) + "/" + stream, std::ios::binary);
  if (!in) return out;
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (offset > size) offset = size;
  int64_t n = std::min(kLogChunkBytes, size - offset);
  std::string data(static_cast<size_t>(n), '\0');
  in.seekg(offset);
  in.read(data.data(), n);
  out["data"] = data;
  out["next_offset"] = offset + n;
  out["truncated"] = offset + n < size;
  return out;
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
