#include "daemon/attempt_log.h"

#include <algorithm>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "api/job_detail.h"
#include "host/host.h"

namespace gpuherd::daemon {

std::string AttemptEndCause(AttemptStop stop, const std::string& stop_reason, const exec::ExitRecord& exit) {
  using How = exec::ExitRecord::How;
  switch (stop) {
    case AttemptStop::kCancel: return "cancelled";
    case AttemptStop::kRequeue: return stop_reason.rfind("requeued by", 0) == 0 ? "requeued" : "preempted";
    case AttemptStop::kFault: return "gpu_fault";
    case AttemptStop::kMemory: return "gpu_memory";
    case AttemptStop::kNone: break;
  }
  if (exit.out_of_memory) return "out_of_memory";
  switch (exit.how) {
    case How::kExited: return exit.code == 0 ? "completed" : "failed";
    case How::kSignaled: return "failed";
    case How::kTimeLimit: return "time_limit";
    case How::kStopped: return "cancelled";
    case How::kLaunchFailed: return "launch_failed";
    case How::kShimLost: return "supervisor_lost";
  }
  return "failed";
}

std::vector<int> AttemptLog::Positions(const std::vector<std::string>& uuids) const {
  std::vector<int> positions;
  for (const std::string& uuid : uuids) {
    for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
      if (state_->fleet.gpus[i].uuid == uuid) positions.push_back(static_cast<int>(i));
    }
  }
  return positions;
}

Status AttemptLog::Load() {
  auto rows = state_->store->ListOpenAttempts();
  if (!rows.ok()) return rows.status();
  for (store::AttemptRecord& r : *rows) {
    Open o;
    o.gpus = Positions(api::AttemptGpuUuids(r));
    // The readings of the previous daemon count on.
    o.util_sum = r.gpu_util_mean.value_or(0) * r.util_samples;
    o.record = std::move(r);
    open_[{o.record.job_id, o.record.attempt}] = std::move(o);
  }
  last_flush_ = state_->clock->Now();
  return Status::Ok();
}

void AttemptLog::Started(const sched::Job& job) {
  Open o;
  o.record = StartRecord(job);
  o.gpus = job.gpus;
  // A failed commit may bring an attempt number back: the new start wins.
  for (auto it = open_.lower_bound({job.id, 0}); it != open_.end() && it->first.first == job.id;) {
    it = open_.erase(it);
  }
  state_->batch.attempts.push_back(o.record);
  open_[{job.id, job.attempt}] = std::move(o);
}

void AttemptLog::Launched(sched::JobId id, int attempt, int shim_pid) {
  auto it = open_.find({id, attempt});
  if (it != open_.end()) it->second.shim_pid = shim_pid;
}

void AttemptLog::Ended(const sched::Job& job, const std::string& cause, const std::string& reason,
                       const exec::ExitRecord* exit) {
  auto it = open_.find({job.id, job.attempt});
  Open o;
  if (it != open_.end()) {
    o = std::move(it->second);
    open_.erase(it);
  } else {
    // Not seen starting (a commit that failed, a record from before this
    // version): what the job itself says.
    o.record = StartRecord(job);
  }
  if (o.record.attempt <= 0) return;  // never started: no attempt to end
  store::AttemptRecord r = Snapshot(o);
  r.ended = std::max(state_->clock->Now(), r.started);
  r.end_cause = cause;
  r.reason = reason;
  r.exit_code.reset();
  r.exit_signal.reset();
  if (exit != nullptr) {
    using How = exec::ExitRecord::How;
    if (exit->how == How::kExited || exit->how == How::kTimeLimit || exit->how == How::kStopped) {
      r.exit_code = exit->code;
    }
    if (exit->signal != 0) r.exit_signal = exit->signal;
  }
  state_->batch.attempts.push_back(std::move(r));
}

std::optional<store::AttemptRecord> AttemptLog::Running(sched::JobId id) const {
  auto it = open_.lower_bound({id, 0});
  if (it == open_.end() || it->first.first != id) return std::nullopt;
  return Snapshot(it->second);
}

store::AttemptRecord AttemptLog::StartRecord(const sched::Job& job) {
  store::AttemptRecord r;
  r.job_id = job.id;
  r.attempt = job.attempt;
  r.user = job.spec.user;
  r.gpus_json = nlohmann::json(job.gpu_uuids).dump();
  r.gpu_twentieths = job.spec.gpu_twentieths;
  r.started = job.started;
  return r;
}

store::AttemptRecord AttemptLog::Snapshot(const Open& o) {
  store::AttemptRecord r = o.record;
  if (r.util_samples > 0) r.gpu_util_mean = o.util_sum / r.util_samples;
  return r;
}

void AttemptLog::Sample(Open& o) {
  const bool fraction = o.record.gpu_twentieths > 0 && o.record.gpu_twentieths < sched::kTwentiethsPerGpu;
  double util_sum = 0;
  int util_gpus = 0;
  TimeMs newest = o.last_sample;
  std::optional<uint64_t> peak;
  for (int g : o.gpus) {
    const gpu::GpuSample* s = state_->telemetry->Latest(g);
    // Only readings taken while the attempt ran, each counted once.
    if (s == nullptr || s->time < o.record.started || s->time <= o.last_sample) continue;
    newest = std::max(newest, s->time);
    if (s->gpu_util_pct) {
      util_sum += std::clamp(*s->gpu_util_pct, 0.0, 100.0);
      ++util_gpus;
    }
    // The job's processes live in the session its shim created; a whole GPU
    // is the job's alone, so without a process list its used memory counts.
    uint64_t mine = 0;
    bool matched = false;
    if (o.shim_pid > 0) {
      for (const auto& p : s->processes) {
        if (p.pid == o.shim_pid || host::ProcessSession(*state_->host, p.pid).value_or(0) == o.shim_pid) {
          mine += p.used_memory_bytes;
          matched = true;
        }
      }
    }
    if (!matched && !fraction && s->mem_used_bytes) {
      mine = *s->mem_used_bytes;
      matched = true;
    }
    if (matched) peak = std::max(peak.value_or(0), mine);
  }
  o.last_sample = newest;
  if (util_gpus > 0) {
    o.util_sum += util_sum / util_gpus;
    ++o.record.util_samples;
  }
  if (peak) o.record.peak_gpu_mem_bytes = std::max(o.record.peak_gpu_mem_bytes.value_or(0), *peak);
}

void AttemptLog::OnRound() {
  for (auto& [key, o] : open_) Sample(o);
  const TimeMs now = state_->clock->Now();
  if (now - last_flush_ < kFlushInterval) return;
  last_flush_ = now;
  for (const auto& [key, o] : open_) state_->batch.attempts.push_back(Snapshot(o));
}

}  // namespace gpuherd::daemon
