// The job queue on this machine: submissions, the scheduling pass, launches
// through the executor, exits, preemption, GPU faults, drains and the GPU
// memory watchdog. Lives on the event-loop thread (not thread-safe); every
// change it makes goes into the turn's WriteBatch, and every effect on
// processes (launch, signal) waits in `after_commit` until that batch is
// durable, so a crash never leaves a job running that the store does not know.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/state_dir.h"
#include "core/status.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/work_queue.h"
#include "exec/executor.h"
#include "sched/job.h"
#include "sched/scheduler.h"

namespace gpuherd::gpu::sim {
class SimDriver;
}

namespace gpuherd::daemon {

struct QueueConfig {
  sched::SchedulerConfig scheduler;     // weights, per-user limits, placement
  DurationMs memory_watchdog_grace = 30 * kSecondMs;  // over its share this long → stopped
};

class JobService {
 public:
  // Runs `task` on the event loop (thread-safe); how launch results come back.
  using PostToLoop = std::function<void(std::function<void()>)>;

  // `state`, `executor` and `sim` (null unless the fleet is simulated) must
  // outlive the service. Launches run on a thread of the service's own and
  // report back through `post`.
  JobService(DaemonState* state, exec::Executor* executor, gpu::sim::SimDriver* sim, StateDir dir,
             QueueConfig config, PostToLoop post);

  // At start: reloads unfinished jobs and drains from the store and re-adopts
  // running attempts (their shims may have outlived the previous daemon).
  Status Load();

  Result<sched::JobId> Submit(const nlohmann::json& spec, const Caller& caller);
  // "cancel", "hold", "release", "requeue": the new state, or why not.
  Result<std::string> Act(sched::JobId id, const std::string& action, const Caller& caller);
  Status Drain(int gpu_position, const std::string& reason, const Caller& caller);
  Status Undrain(int gpu_position, const Caller& caller);
  // Why a GPU is drained; nullopt when it is not.
  std::optional<std::string> DrainReason(const std::string& uuid) const {
    auto it = drains_.find(uuid);
    return it == drains_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }

  nlohmann::json List(bool all, const std::string& user, const std::string& state);
  Result<nlohmann::json> Show(sched::JobId id);
  // A piece of a job's log from `offset` (at most 256 KiB).
  Result<nlohmann::json> Logs(sched::JobId id, const std::string& stream, int64_t offset);

  // From the executor's watcher thread, posted to the loop.
  void OnExit(const exec::ExitRecord& record);
  // Telemetry's events of this round: GPU faults drain the GPU and move its jobs.
  void OnGpuEvents(const std::vector<store::EventRecord>& events);
  // After each telemetry round: the memory watchdog, the simulated load.
  void OnRound();

  // End of turn, before the commit: a scheduling pass when anything changed,
  // then the records of every job changed in this turn.
  void EndOfTurn();
  // After a successful commit: the launches and signals this turn decided.
  void AfterCommit();

  size_t unfinished() const { return jobs_.size(); }

 private:
  enum class StopIntent { kNone, kCancel, kRequeue, kFault, kMemory };
  struct Entry {
    sched::Job job;
    nlohmann::json spec_body;  // the spec as submitted: what is stored and reloaded
    StopIntent intent = StopIntent::kNone;
    TimeMs stop_deadline = 0;
    int shim_pid = 0;          // 0 until the launch thread reports back
    bool adopted = false;      // running since before this daemon started
    TimeMs over_memory_since = 0;  // watchdog: first reading over the share
  };

  void Touch(Entry& e);  // marks the job's record for this turn's batch
  void Event(const sched::Job& job, const std::string& kind, store::Severity severity, const std::string& message);
  void Schedule();
  void Start(Entry& e, const std::vector<int>& gpus);
  void Stop(Entry& e, StopIntent intent, const std::string& reason);
  void Finish(Entry& e, sched::JobState state, const std::string& reason);
  void Requeue(Entry& e, const std::string& reason, bool count_restart);
  exec::LaunchSpec MakeLaunch(const Entry& e) const;
  // On the loop, once the launch thread has started (or failed to start) an attempt.
  void OnLaunched(sched::JobId id, int attempt, const Result<int>& shim_pid);
  // Jobs holding GPUs now (running, or stopping after a signal).
  std::vector<sched::RunningJob> RunningJobs() const;
  // The scheduler's view of the fleet with `running` accounted on it.
  sched::FleetState BuildFleetState(const std::vector<sched::RunningJob>& running) const;
  store::JobRecord ToRecord(const Entry& e) const;
  // The inverse of ToRecord; the error says why the stored spec is unusable
  // (the other fields are filled in any case).
  Status FromRecord(const store::JobRecord& record, Entry* e) const;
  nlohmann::json ToJson(const sched::Job& job, TimeMs now) const;
  double RecentGpuHours(const std::string& user, TimeMs now) const;
  std::string AttemptDir(sched::JobId id, int attempt) const;

  DaemonState* state_;
  exec::Executor* executor_;
  gpu::sim::SimDriver* sim_;
  StateDir dir_;
  QueueConfig config_;
  sched::JobId next_id_ = 1;
  std::map<sched::JobId, Entry> jobs_;  // unfinished jobs
  std::map<std::string, std::string> drains_;  // uuid → reason
  std::set<sched::JobId> touched_;
  std::vector<std::function<void()>> after_commit_;
  bool dirty_ = true;  // something changed that may let a job start
  PostToLoop post_;
  // Declared last: destroyed first, finishing the launches it holds while the
  // rest of the service is still alive.
  std::unique_ptr<WorkQueue> launches_;
  // user → (end time, GPU-hours) of recently finished jobs, for fair share.
  std::multimap<std::string, std::pair<TimeMs, double>> usage_;
};

}  // namespace gpuherd::daemon
