// The queue's read side (job_service.h): its jobs as the typed views of
// api/ (a listing, one job, a piece of its output), and the counts the GPU
// views and monitoring read. Nothing here changes the queue.
#include <algorithm>

#include <fmt/format.h>

#include <spdlog/spdlog.h>

#include "core/safe_file.h"
#include "daemon/job_service.h"
#include "daemon/queue/job_processes.h"
#include "fence/fence_report.h"

namespace gpuherd::daemon {
namespace {

using sched::JobState;

constexpr int64_t kLogChunkBytes = 256 * 1024;
// How many finished jobs `ps --all` lists: the most recent, read from the
// store at each listing (finished jobs are not kept in memory).
constexpr int kMaxListedFinished = 10000;

}  // namespace

std::vector<int> JobService::JobsPerGpu() const {
  std::vector<int> jobs(state_->fleet.gpus.size(), 0);
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
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
  std::map<std::string, double> seconds = fair_share_->gpu_seconds_done();
  for (sched::JobId id : active_) {
    const sched::Job& job = jobs_.at(id).job;
    if (double s = queue::FairShare::RunningGpuSeconds(job, now); s > 0) seconds[job.spec.user] += s;
  }
  return seconds;
}


api::JobView JobService::View(const sched::Job& job, TimeMs now, const SubmitExtras& extras) const {
  api::JobView v;
  v.id = job.id;
  v.name = job.spec.name;
  v.user = job.spec.user;
  v.state = sched::JobStateName(job.state);
  v.priority = job.spec.priority;
  v.gpu_twentieths = job.spec.gpu_twentieths;
  v.gpu_mem_bytes = job.spec.gpu_mem_bytes;
  v.assigned_gpus = job.gpus;
  v.gpu_uuids = job.gpu_uuids;
  v.submitted = job.submitted;
  v.started = job.started;
  v.ended = job.ended;
  v.attempt = job.attempt;
  v.restarts = RestartCount(job, extras.prior_attempts);
  v.fault_restarts = job.restarts;
  v.max_restarts = job.spec.max_restarts;
  v.preemptible = job.spec.preemptible;
  v.time_limit_ms = job.spec.time_limit;
  v.command = job.spec.argv;
  v.reason = job.reason;
  v.now = now;
  v.exit_code = job.exit_code;
  v.exit_signal = job.exit_signal;
  if (job.attempt > 0) v.logs = AttemptDir(job.id, job.attempt);
  v.after = job.spec.depends_on;
  v.after_any = job.spec.after_any;
  v.after_not_ok = job.spec.after_not_ok;
  v.array_id = extras.array_id;
  v.array_index = extras.array_index;
  v.array_size = extras.array_size;
  return v;
}


JobService::JobListing JobService::List(bool all, const std::string& user, const std::string& state) const {
  JobListing listing;
  listing.now = state_->clock->Now();
  auto wanted = [&](const std::string& job_user, const std::string& job_state) {
    return (user.empty() || job_user == user) && (state.empty() || job_state == state);
  };
  auto ended_view = [this](const Entry& e) {
    return ListedJob{std::make_shared<const api::JobView>(View(e.job, 0, e.extras)), false};
  };
  // Finished jobs live in the store only: read at each listing, oldest first.
  std::vector<ListedJob> finished_listing;
  if (all) {
    auto finished = state_->store->ListFinishedJobs(0, kMaxListedFinished);
    if (!finished.ok()) {
      spdlog::warn("cannot list finished jobs: {}", finished.status().ToString());
    } else {
      finished_listing.reserve(finished->size());
      for (const auto& r : *finished) {
        if (!wanted(r.user, r.state)) continue;
        Entry e;
        (void)FromRecord(r, &e);  // an unreadable spec still lists the stored facts
        finished_listing.push_back(ended_view(e));
      }
      // Jobs that ended in this turn are out of jobs_ and not yet in the
      // store; the answer goes out after the turn's commit, with them.
      for (const auto& node : finished_entries_) {
        const Entry& e = node.mapped();
        if (wanted(e.job.spec.user, sched::JobStateName(e.job.state))) finished_listing.push_back(ended_view(e));
      }
      std::sort(finished_listing.begin(), finished_listing.end(),
                [](const ListedJob& a, const ListedJob& b) { return a.view->id < b.view->id; });
    }
  }
  listing.jobs.reserve(jobs_.size() + finished_listing.size());
  auto add_unfinished = [&](const Entry& e) {
    if (!wanted(e.job.spec.user, sched::JobStateName(e.job.state))) return;
    // Made once per change (Touch, SetReason).
    if (!e.listed) e.listed = std::make_shared<const api::JobView>(View(e.job, 0, e.extras));
    listing.jobs.push_back({e.listed, true});
  };
  // Both are ordered by id, and a job is in one of them only: merged, the
  // listing is ordered by id too.
  auto unfinished = jobs_.begin();
  auto finished = finished_listing.begin();
  while (unfinished != jobs_.end() || finished != finished_listing.end()) {
    if (unfinished != jobs_.end() &&
        (finished == finished_listing.end() || unfinished->first < finished->view->id)) {
      add_unfinished((unfinished++)->second);
    } else {
      listing.jobs.push_back(std::move(*finished++));
    }
  }
  return listing;
}


// A fractional job's memory fence as its attempt folder tells it (docs/queue.md
// "Fractional GPUs: the memory fence"): used against the share.
api::MemoryFenceView JobService::MemoryFence(const sched::Job& job) const {
  fence::FenceReport report = fence::ReadFenceReport(AttemptDir(job.id, job.attempt));
  api::MemoryFenceView v;
  v.state = report.state;
  v.share_bytes = job.spec.gpu_mem_bytes;
  v.detail = report.detail;
  v.used_bytes = report.used_bytes;
  if (report.share_bytes && *report.share_bytes != job.spec.gpu_mem_bytes) v.fence_share_bytes = *report.share_bytes;
  return v;
}


Result<api::JobView> JobService::Show(sched::JobId id) {
  TimeMs now = state_->clock->Now();
  if (auto it = jobs_.find(id); it != jobs_.end()) {
    const sched::Job& job = it->second.job;
    api::JobView j = View(job, now, it->second.extras);
    if (job.state == JobState::kPending) {
      sched::PendingJob p;
      p.id = job.id;
      p.spec = job.spec;
      p.submitted = job.submitted;
      p.user_gpu_hours = RecentGpuHours(job.spec.user, now);
      j.priority_explained =
          sched::ExplainPriority(config_.scheduler.weights, sched::PriorityInputsOf(p, now, config_.scheduler));
    }
    if (job.spec.fractional() && job.attempt > 0) j.memory_fence = MemoryFence(job);
    if (executor_ != nullptr) j.containment = executor_->containment();
    return j;
  }
  // Ended: in the store, or, if it ended in this turn, among the entries
  // whose final record is not committed yet (List too).
  const Entry* ended = nullptr;
  for (const auto& node : finished_entries_) {
    if (node.key() == id) ended = &node.mapped();
  }
  Entry stored_entry;
  if (ended == nullptr) {
    auto stored = state_->store->GetJob(id);
    if (!stored.ok()) return stored.status();
    if (!stored->has_value()) return NotFound("no job " + std::to_string(id) + "; `gpuherd ps --all` lists them");
    // An unreadable spec still shows the stored facts; its error is not needed here.
    (void)FromRecord(**stored, &stored_entry);
    ended = &stored_entry;
  }
  const sched::Job& job = ended->job;
  api::JobView j = View(job, now, ended->extras);
  if (job.spec.fractional() && job.attempt > 0) j.memory_fence = MemoryFence(job);
  return j;
}


Result<SubmitExtras> JobService::ArrayPlaceOf(sched::JobId id) const {
  if (auto it = jobs_.find(id); it != jobs_.end()) return it->second.extras;
  for (const auto& node : finished_entries_) {
    if (node.key() == id) return node.mapped().extras;
  }
  auto stored = state_->store->GetJob(id);
  if (!stored.ok()) return stored.status();
  if (!stored->has_value()) return NotFound("no job " + std::to_string(id) + "; `gpuherd ps --all` lists them");
  Entry e;
  (void)FromRecord(**stored, &e);  // the array's place is kept even where the spec is unreadable
  return e.extras;
}

Result<api::ArraySummary> JobService::Array(sched::JobId array_id) const {
  auto first = ArrayPlaceOf(array_id);
  if (!first.ok()) return first.status();
  if (first->array_id != array_id) {
    return NotFound(fmt::format("job {} is not an array; an array's id is its first task's", array_id));
  }
  api::ArraySummary out;
  out.id = array_id;
  out.size = first->array_size;
  // Finished tasks from the store in one range read; unfinished ones, and
  // those that ended in this turn (not committed yet), from memory.
  auto stored = state_->store->ListJobStates(array_id, array_id + out.size - 1);
  if (!stored.ok()) return stored.status();
  std::map<sched::JobId, const Entry*> ended_now;
  for (const auto& node : finished_entries_) {
    if (node.key() >= array_id && node.key() < array_id + out.size) ended_now[node.key()] = &node.mapped();
  }
  auto row = stored->begin();
  for (int i = 0; i < out.size; ++i) {
    const sched::JobId id = array_id + i;
    while (row != stored->end() && row->id < id) ++row;
    std::string state, name;
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      state = sched::JobStateName(it->second.job.state);
      name = it->second.job.spec.name;
    } else {
      auto found = ended_now.find(id);
      const Entry* ended = found == ended_now.end() ? nullptr : found->second;
      if (ended != nullptr) {
        state = sched::JobStateName(ended->job.state);
        name = ended->job.spec.name;
      } else if (row != stored->end() && row->id == id) {
        state = row->state;
        name = row->name;
      }
    }
    if (state.empty()) continue;
    if (i == 0) {
      // NAME[0] as SubmitArray named it: the array's name is NAME.
      const std::string suffix = "[0]";
      out.name = name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0
                     ? name.substr(0, name.size() - suffix.size())
                     : name;
    }
    ++out.states[state];
    out.tasks.push_back({id, i, state});
  }
  return out;
}


Result<api::LogChunk> JobService::Logs(sched::JobId id, const std::string& stream, int64_t offset, int attempt) {
  if (stream != "stdout" && stream != "stderr") return InvalidArgument("stream must be stdout or stderr");
  if (offset < 0) return InvalidArgument("offset must not be negative");
  if (attempt < 0) return InvalidArgument("attempt must be 1 or more (0: the latest)");
  auto job = Show(id);
  if (!job.ok()) return job.status();
  const int attempts = job->attempt;
  if (attempt > attempts) {
    return NotFound(attempts == 0 ? fmt::format("job {} has no attempt {}: it has not started yet", id, attempt)
                                  : fmt::format("job {} has no attempt {}: it has had {} attempt{} (1-{})", id, attempt,
                                                attempts, attempts == 1 ? "" : "s", attempts));
  }
  if (attempt == 0) attempt = attempts;
  api::LogChunk out;
  out.next_offset = offset;
  out.attempt = attempt;
  out.attempts = attempts;
  // An earlier attempt has ended: its output will not grow.
  out.final = attempt < attempts ||
              sched::IsFinal(sched::ParseJobState(job->state).value_or(JobState::kFailed));
  if (attempt == 0) return out;
  // The log is the job's user's file (exec/job_trees.h): read as hostile,
  // from jobs/ (only root writes there) down, no link followed.
  auto chunk = ReadBeneath(launcher_->JobsDir(), fmt::format("{}/{}/{}", id, attempt, stream),
                           static_cast<uint64_t>(offset), static_cast<size_t>(kLogChunkBytes));
  if (chunk.status().code() == Code::kNotFound) return out;
  if (!chunk.ok()) return chunk.status().Annotate(fmt::format("the {} of job {} is not served", stream, id));
  const auto size = static_cast<int64_t>(chunk->size);
  if (offset > size) offset = size;
  out.data = std::move(chunk->data);
  out.next_offset = offset + static_cast<int64_t>(out.data.size());
  out.truncated = out.next_offset < size;
  return out;
}


std::vector<std::vector<api::GpuJob>> JobService::JobsByGpu() const {
  std::vector<std::vector<api::GpuJob>> out(state_->fleet.gpus.size());
  for (sched::JobId id : active_) {
    const Entry& e = jobs_.at(id);
    std::optional<fence::FenceReport> report;
    std::optional<std::optional<std::vector<int>>> group;  // its control group's pids, read once
    if (e.job.spec.fractional() && e.job.attempt > 0) report = fence::ReadFenceReport(AttemptDir(id, e.job.attempt));
    for (int g : e.job.gpus) {
      if (g < 0 || g >= static_cast<int>(out.size())) continue;
      api::GpuJob v;
      v.id = id;
      v.user = e.job.spec.user;
      v.name = e.job.spec.name;
      v.gpu_twentieths = e.job.spec.gpu_twentieths;
      if (e.job.spec.fractional()) v.share_bytes = e.job.spec.gpu_mem_bytes;
      // As the memory watchdog counts (queue/job_processes.h).
      const bool lost = state_->telemetry->State(g) == telemetry::GpuState::kLost;
      const gpu::GpuSample* s = lost ? nullptr : state_->telemetry->Latest(g);
      if (s != nullptr && e.shim_pid != 0) {
        if (!group) group = executor_ ? executor_->GroupProcesses(id, e.job.attempt) : std::nullopt;
        v.used_bytes = queue::JobGpuMemory(*s, *state_->host, e.shim_pid, *group);
      }
      if (report) {
        if (report->state != "none") v.fence = report->state;
        if (!v.used_bytes && !lost && report->used_bytes) v.used_bytes = report->used_bytes;
      }
      out[g].push_back(std::move(v));
    }
  }
  return out;
}

}  // namespace gpuherd::daemon
