// The job queue's state machine: submissions, the scheduling pass, starts,
// exits, preemption, GPU faults and drains, and the typed views of its jobs
// (job_service_views.cc). Its parts, made and wired in daemon.cc: the GPU
// pool (drains, health), the launcher (the job environment protocol and the
// launches), fair share and the memory watchdog (queue/). Lives on the
// event-loop thread (not thread-safe); every change it makes goes into the
// turn's WriteBatch, and every effect on processes (launch, signal) waits in
// `after_commit` until that batch is durable, so a crash never leaves a job
// running that the store does not know.
#pragma once

#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "api/gpus.h"
#include "api/jobs.h"
#include "core/status.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/queue/fair_share.h"
#include "daemon/queue/gpu_pool.h"
#include "daemon/queue/job_launcher.h"
#include "daemon/queue/memory_watchdog.h"
#include "daemon/turn_participant.h"
#include "exec/job_executor.h"
#include "sched/job.h"
#include "sched/scheduler.h"

namespace gpuherd::daemon {

class AttemptLog;

struct QueueConfig {
  sched::SchedulerConfig scheduler;     // weights, per-user limits, placement
  DurationMs memory_watchdog_grace = 30 * kSecondMs;  // over its share this long → stopped
  // The machine's CPUs and memory that jobs' --cpus and --mem are counted
  // against (host/machine.h); 0: unknown, not checked.
  int host_cpus = 0;
  uint64_t host_mem_bytes = 0;
};

// What a pipeline or a burn-in fixes for its jobs beyond the spec; kept with
// the stored spec, never settable through the API.
struct SubmitExtras {
  // GPUHERD_CHECKPOINT_DIR for every attempt, instead of checkpoints/<job id>:
  // a retry is a new job and must find the node's checkpoint.
  std::string checkpoint_dir;
  // Runs of the node before this job; GPUHERD_RESTART_COUNT counts them too.
  int prior_attempts = 0;
  // A maintenance job (a burn-in) on exactly these GPUs (UUIDs): see
  // sched::JobSpec::pinned_gpus.
  std::vector<std::string> pinned_gpus;
  // `submit --hold`: stored held, so that only `release` lets it start.
  bool hold = false;
  // A task of an array (SubmitArray): the array's id (its first task's),
  // the task's index and the array's size. array_id 0: not a task.
  sched::JobId array_id = 0;
  int array_index = 0, array_size = 0;
};

// What a running job puts on its GPUs, for a listener after each telemetry
// round (the simulated driver's load is wired to it in daemon.cc).
struct JobLoad {
  sched::JobId id = 0;
  std::string name;
  std::vector<int> gpus;       // fleet positions
  int gpu_twentieths = 0;      // the job's whole share (20 per whole GPU)
  uint64_t gpu_mem_bytes = 0;  // a fraction's memory share; 0 for whole GPUs
  int shim_pid = 0;            // 0 until launched
};

// The queue's parts that the daemon makes (daemon.cc) and the queue uses;
// all must outlive it.
struct QueueParts {
  queue::JobLauncher* launcher = nullptr;    // the job environment protocol, launches
  queue::FairShare* fair_share = nullptr;    // GPU time per user
  queue::MemoryWatchdog* watchdog = nullptr; // fractions over their memory share
};

class JobService : public TurnParticipant {
 public:
  // `state`, `executor` and the parts must outlive the service;
  // `state->fleet` must already be discovered (it is fixed for the daemon's
  // life) and `state->clock` set.
  JobService(DaemonState* state, exec::JobExecutor* executor, QueueParts parts, QueueConfig config);

  // At start: reloads unfinished jobs and drains from the store and re-adopts
  // running attempts (their shims may have outlived the previous daemon).
  Status Load();
  // Where attempts' starts, launches and ends are recorded (attempt_log.h);
  // set before Load. Null: not recorded.
  void SetAttemptLog(AttemptLog* log) { attempt_log_ = log; }

  // A parsed spec (sched::ParseJobSpec); user, uid and gid come from
  // `caller`, pinned_gpus from `extras`.
  Result<sched::JobId> Submit(sched::JobSpec spec, const Caller& caller, const SubmitExtras& extras = {});
  // A job array: `count` jobs from one spec, task i with GPUHERD_ARRAY_INDEX=i
  // and GPUHERD_ARRAY_SIZE=count in its environment and "[i]" after its name.
  // All or nothing: every check runs before the first job is queued, and the
  // jobs are committed in the same turn. Ids are consecutive.
  // `hold`: every task is stored held (`submit --array N --hold`).
  Result<std::vector<sched::JobId>> SubmitArray(const sched::JobSpec& spec, int count, const Caller& caller,
                                                bool hold = false);
  // Called on the loop when a job starts, is requeued or finishes (before the
  // turn's commit). The listener must not call back into the service; it
  // may note what to do and act later in the turn.
  void SetStateListener(std::function<void(const sched::Job&)> listener) { listener_ = std::move(listener); }
  // Called at the end of OnRound with what every running job puts on its GPUs.
  void SetLoadListener(std::function<void(const std::vector<JobLoad>&)> listener) {
    load_listener_ = std::move(listener);
  }
  // Sends `signal` to a running job's processes (SIGUSR1: checkpoint now)
  // once the turn is committed.
  Status Signal(sched::JobId id, int signal);
  // "cancel", "hold", "release", "requeue": the new state, or why not.
  Result<std::string> Act(sched::JobId id, const std::string& action, const Caller& caller,
                          const std::string& why = {});
  // Many jobs cancelled in one call, so in one turn and one commit: no job
  // starts between two of the cancels (`scancel`'s filters). Selects `ids`
  // and, with a filter, the unfinished jobs matching every filter given
  // (state: pending, held, running or stopping; name: exact) of `user`, of
  // every user with `all` (admins only), else of the caller. With both, the
  // named ids that match the filters. An id that names no job, or a job the
  // caller may not cancel, refuses the whole request; a finished one is
  // reported as skipped.
  struct CancelRequest {
    std::vector<sched::JobId> ids;
    std::string user, state, name;
    bool all = false;
    bool filtered() const { return all || !user.empty() || !state.empty() || !name.empty(); }
  };
  Result<api::CancelOutcome> CancelMany(const CancelRequest& request, const Caller& caller);
  // An operator's drain (an admin's request): only an operator lifts it,
  // whatever its reason says.
  Status Drain(int gpu_position, const std::string& reason, const Caller& caller);
  // An operator lifting any drain.
  Status Undrain(int gpu_position, const Caller& caller);
  // gpuherd's own drain (an alert's action, the risk model); no-op when the
  // GPU is drained already (the first origin stays).
  void DrainFor(int gpu_position, queue::DrainOrigin origin, const std::string& reason);
  // Self-healing marks a GPU suspect or clears the mark: new long jobs go
  // elsewhere while other GPUs are free (scheduler rule 12).
  void SetSuspect(int gpu_position, bool suspect);
  // A passing burn-in returns the GPU when gpuherd drained it (not an
  // operator); FailedPrecondition otherwise.
  Status LiftAfterBurnIn(int gpu_position, const std::string& by);
  // Why a GPU is drained; nullopt when it is not.
  std::optional<std::string> DrainReason(const std::string& uuid) const {
    auto d = pool_.DrainOf(uuid);
    return d ? std::optional<std::string>(d->reason) : std::nullopt;
  }
  std::optional<queue::GpuDrain> DrainOf(const std::string& uuid) const { return pool_.DrainOf(uuid); }
  // GPUHERD_METRICS_FILE of the job's attempts (the launcher's).
  std::string MetricsFile(sched::JobId id) const { return launcher_->MetricsFile(id); }

  // GET /v1/jobs: jobs by id, of `user` and in `state` when given, finished
  // ones too when `all` (the 10,000 most recent, read from the store: the
  // daemon keeps only unfinished jobs in memory). An unfinished job's view is
  // made once per change and shared until the next (ListedJob::live), so
  // polling a deep queue builds nothing; the routes write it as the full
  // listing or as the compact one (?view=table, api::kJobTableColumns).
  struct ListedJob {
    std::shared_ptr<const api::JobView> view;  // its `now` is 0: the listing's is JobListing::now
    bool live = false;  // unfinished: this view object stands for the job until it changes
  };
  struct JobListing {
    std::vector<ListedJob> jobs;
    TimeMs now = 0;
  };
  JobListing List(bool all, const std::string& user, const std::string& state) const;
  // One job as `show` has it: with its ranking when pending, its memory fence
  // when a fraction that ran, how jobs are contained when unfinished.
  Result<api::JobView> Show(sched::JobId id);
  // Where job `id` stands in an array: array_id, array_index and array_size
  // of its SubmitExtras (array_id 0: not a task). NotFound for no such job.
  Result<SubmitExtras> ArrayPlaceOf(sched::JobId id) const;
  // The tasks of array `array_id` (its first task's id) and their states.
  Result<api::ArraySummary> Array(sched::JobId array_id) const;
  // A piece of the log of one attempt of a job from `offset` (at most 256
  // KiB); `attempt` 0 is the latest. An attempt the job has not had is
  // NotFound, naming how many it had.
  Result<api::LogChunk> Logs(sched::JobId id, const std::string& stream, int64_t offset, int attempt = 0);
  // Where an attempt's stdout and stderr are (exec/job_trees.h).
  std::string OutputDir(sched::JobId id, int attempt) const { return launcher_->AttemptDir(id, attempt); }

  // From the executor's watcher thread, posted to the loop.
  void OnExit(const exec::ExitRecord& record);
  // Telemetry's events of this round: GPU faults drain the GPU and move its jobs.
  void OnGpuEvents(const std::vector<store::EventRecord>& events);
  // What a GPU fault does, on request (an alert's action): drains the GPU
  // unless it is drained already, then checkpoints and requeues every job
  // running on it. Jobs already stopping are left alone, so calling it twice
  // moves a job once. Returns how many jobs were told to move.
  int MoveJobsOff(int gpu_position, const std::string& reason,
                  queue::DrainOrigin origin = queue::DrainOrigin::kFault);

  // For monitoring. Per fleet position: how many running or stopping jobs hold it.
  std::vector<int> JobsPerGpu() const;
  // For the GPU views, per fleet position: the running or stopping jobs on
  // it, with the GPU memory each uses there and, for a fraction, its share.
  std::vector<std::vector<api::GpuJob>> JobsByGpu() const;
  // Unfinished jobs per state; states without a job are listed with 0.
  std::map<std::string, int> CountByState() const;
  // GPU time per user since the daemon started (attempts that ended) plus the
  // running attempts so far: never decreases while the daemon runs.
  std::map<std::string, double> GpuSecondsByUser(TimeMs now) const;
  // How long the last scheduling pass took; nullopt before the first one.
  std::optional<double> last_pass_seconds() const { return last_pass_seconds_; }
  // After each telemetry round: the memory watchdog, the load listener.
  void OnRound();

  // End of turn, before the commit: a scheduling pass when anything changed,
  // then the records of every job changed in this turn.
  void EndOfTurn() override;
  // Committed: the launches and signals this turn decided. Not committed:
  // they are dropped, and the queue is read back from the store (jobs
  // submitted in the turn vanish, jobs started in it are pending again), so
  // that nothing runs without its record.
  void AfterCommit(bool committed) override;

  size_t unfinished() const { return jobs_.size(); }
  // For tests and views: preemptor → the GPUs claimed for it.
  const std::map<sched::JobId, std::vector<int>>& claims() const { return claims_; }

 private:
  enum class StopIntent { kNone, kCancel, kRequeue, kFault, kMemory };
  struct Entry {
    sched::Job job;
    // The spec as stored (sched::JobSpecToJson) with the fields stored beside
    // it, serialized once: what is stored and reloaded.
    std::string stored_spec;
    StopIntent intent = StopIntent::kNone;
    TimeMs stop_deadline = 0;
    int shim_pid = 0;          // 0 until the launch thread reports back
    bool adopted = false;      // running since before this daemon started
    SubmitExtras extras;
    sched::JobId stopping_for = 0;  // the preemptor this attempt stops for
    std::set<sched::JobId> preempted_for;  // every preemptor it was stopped for (never twice)
    std::vector<int> stored_claim;  // the claim its stored spec holds (StoreMarks), as fleet positions
    // Its view while unchanged; reset by Touch and SetReason.
    mutable std::shared_ptr<const api::JobView> listed;
    // job.spec without what no scheduling pass reads (SchedulingSpec): what
    // each pass copies, so that a deep queue's pass copies no environments.
    sched::JobSpec scheduled;
  };

  void Touch(Entry& e);  // marks the job's record for this turn's batch
  void Event(const sched::Job& job, const std::string& kind, store::Severity severity, const std::string& message);
  void Schedule();
  void ApplyDecisions(const sched::Decisions& decisions);
  // Changes a reason shown live (not stored until the job's next change).
  void SetReason(Entry& e, std::string_view reason);
  // The next time a pass is due without any other change.
  TimeMs NextDue(TimeMs now) const;
  std::string GpuSignature() const;
  // Jobs stopping now for `preemptor`.
  int StoppingFor(sched::JobId preemptor) const;
  // Writes the preemption marks of `e` (preempted_for, stopping_for, its
  // claim) into its stored spec and touches it.
  void StoreMarks(Entry& e);
  // Writes every claim that changed since the last turn (stored_claims_).
  void StoreChangedClaims();
  // claims_ and stored_claims_ from the marks of the pending jobs.
  void ClaimsFromMarks();
  // The fleet positions of the GPU with this UUID (none when it is gone).
  void AppendPositions(const std::string& uuid, std::vector<int>* positions) const;
  bool ClaimStillFreeing(const std::vector<int>& gpus) const;
  void Start(Entry& e, const std::vector<int>& gpus);
  void Stop(Entry& e, StopIntent intent, const std::string& reason);
  void Finish(Entry& e, sched::JobState state, const std::string& reason);
  void Requeue(Entry& e, const std::string& reason, bool count_restart);
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
  // `prior_attempts`: SubmitExtras::prior_attempts of the job.
  api::JobView View(const sched::Job& job, TimeMs now, const SubmitExtras& extras) const;
  bool IsTaskOfArrayNamed(const sched::Job& job, const std::string& name) const;
  api::MemoryFenceView MemoryFence(const sched::Job& job) const;
  // Whether every running fraction on GPU `gpu` belongs to `uid` (MPS).
  bool OneUserOn(int gpu, uint32_t uid) const;
  // After a failed commit: the unfinished jobs as the store has them, keeping
  // what only memory knows of attempts that the store also calls running.
  void RestoreFromStore();
  // Bookkeeping of jobs_ that Submit's checks need without a scan.
  void Insert(Entry e);
  void Erase(sched::JobId id);
  // Every change of an unfinished job's state goes through here, so that
  // the indexes below stay true: a pass over a deep queue then touches the
  // jobs it ranks and the running ones, never every pending job.
  void SetState(Entry& e, sched::JobState state);
  void Index(const Entry& e);
  void Unindex(const Entry& e);
  // Fair share's GPU-hours of `user` plus its running attempts so far.
  double RecentGpuHours(const std::string& user, TimeMs now) const;
  std::string AttemptDir(sched::JobId id, int attempt) const { return launcher_->AttemptDir(id, attempt); }
  std::string RecordDir(sched::JobId id, int attempt) const { return launcher_->RecordDir(id, attempt); }
  // The memory watchdog's round: its warnings become events, its stops stops.
  void WatchMemory(TimeMs now);
  // Tells the attempt log why the current attempt of `e` ended (OnExit).
  void NoteAttemptEnd(const Entry& e, const exec::ExitRecord& r);

  DaemonState* state_;
  exec::JobExecutor* executor_;
  queue::JobLauncher* launcher_;
  queue::FairShare* fair_share_;
  queue::MemoryWatchdog* watchdog_;
  AttemptLog* attempt_log_ = nullptr;
  QueueConfig config_;
  sched::JobId next_id_ = 1;
  std::map<sched::JobId, Entry> jobs_;  // unfinished jobs; changed through Insert and Erase only
  // Indexes of jobs_ (Index, Unindex): running and stopping jobs; pending
  // jobs in the order a pass takes them (urgency, then submission, then id);
  // jobs that became pending since the last pass.
  std::set<sched::JobId> active_;
  std::set<std::tuple<int, TimeMs, sched::JobId>> pending_order_;
  std::vector<sched::JobId> unranked_;
  std::map<uint32_t, int> unfinished_by_uid_;  // jobs_ counted per submitting uid
  // The final state of a finished job named as a dependency, read from the
  // store once: a final state never changes, and a job held back by busy GPUs
  // would otherwise cost a query per dependency in every scheduling pass.
  std::unordered_map<sched::JobId, sched::JobState> finished_dep_state_;
  std::map<sched::JobId, std::string> dependency_failure_;  // why rule 2 cancels, within one pass
  const sched::FleetState static_fleet_;      // the fleet's fixed facts: names, memory, topology
  queue::GpuPool pool_;  // drains (typed origin), health, live GPU state
  std::optional<double> last_pass_seconds_;
  std::set<sched::JobId> touched_;
  // Preemptor → the GPUs claimed for it (see ApplyDecisions).
  std::map<sched::JobId, std::vector<int>> claims_;
  // The claims as the store has them (in each preemptor's record): the
  // difference is written at the end of the turn, so that a restart keeps
  // every claim and never stops a victim twice for one preemptor.
  std::map<sched::JobId, std::vector<int>> stored_claims_;
  std::vector<std::function<void()>> after_commit_;
  // Jobs that finished this turn, freed after its commit: off the loop when
  // there are many (a cancel of 20,000), so that no answer waits for it.
  std::vector<std::map<sched::JobId, Entry>::node_type> finished_entries_;
  // Exits delivered in this turn: a failed commit replays them onto the
  // restored queue (the executor reports each end once only).
  std::vector<exec::ExitRecord> exits_this_turn_;
  bool dirty_ = true;  // something changed that may let a job start
  TimeMs next_due_ = 0;        // see NextDue
  std::string gpu_signature_;  // see GpuSignature
  std::function<void(const sched::Job&)> listener_;
  std::function<void(const std::vector<JobLoad>&)> load_listener_;
};

}  // namespace gpuherd::daemon
