// The job queue on this machine: submissions, the scheduling pass, launches
// through the executor, exits, preemption, GPU faults, drains and the GPU
// memory watchdog. Lives on the event-loop thread (not thread-safe); every
// change it makes goes into the turn's WriteBatch, and every effect on
// processes (launch, signal) waits in `after_commit` until that batch is
// durable, so a crash never leaves a job running that the store does not know.
#pragma once

#include <functional>
#include <map>
#include <unordered_map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/gpus.h"
#include "core/state_dir.h"
#include "core/status.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/mps_control.h"
#include "daemon/queue/gpu_pool.h"
#include "daemon/turn_participant.h"
#include "daemon/work_queue.h"
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

// What a pipeline fixes for its node's jobs beyond the spec; kept with the
// stored spec, never settable through the API.
// How often a job was started again (the one restart counter): every
// attempt after its first, whatever ended the one before (a GPU fault, a lost
// supervisor, a preemption, a requeue), plus a pipeline node's runs before
// this job. `show`, `--json` ("restarts") and GPUHERD_RESTART_COUNT give this
// number. Only the restarts after faults (GPU faults, lost supervisors; shown
// as "fault_restarts") count against --max-restarts: a job is never failed
// for being preempted or requeued.
int RestartCount(const sched::Job& job, int prior_attempts);

struct SubmitExtras {
  // GPUHERD_CHECKPOINT_DIR for every attempt, instead of checkpoints/<job id>:
  // a retry is a new job and must find the node's checkpoint.
  std::string checkpoint_dir;
  // Runs of the node before this job; GPUHERD_RESTART_COUNT counts them too.
  int prior_attempts = 0;
  // A maintenance job (a burn-in) on exactly these GPUs (UUIDs): see
  // sched::JobSpec::pinned_gpus.
  std::vector<std::string> pinned_gpus;
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

class JobService : public TurnParticipant {
 public:
  // Runs `task` on the event loop (thread-safe); how launch results come back.
  using PostToLoop = std::function<void(std::function<void()>)>;
  // Runs `task` off the loop (launches fork); null: a thread of the service's own.
  using RunOffLoop = std::function<void(std::function<void()>)>;

  // `state` and `executor` must outlive the service; `state->fleet` must
  // already be discovered (it is fixed for the daemon's life) and
  // `state->clock` set. Launches run through `run_off_loop` and report back
  // through `post`; tests pass functions that queue both for them to pump.
  JobService(DaemonState* state, exec::JobExecutor* executor, StateDir dir, QueueConfig config, PostToLoop post,
             RunOffLoop run_off_loop = nullptr);

  // At start: reloads unfinished jobs and drains from the store and re-adopts
  // running attempts (their shims may have outlived the previous daemon).
  Status Load();
  // With --mps: fractional jobs on a GPU whose fractions are all one user's
  // connect to its MPS server. Null (the default): they time-share the SMs.
  void SetMps(const MpsControl* mps) { mps_ = mps; }
  // Where attempts' starts, launches and ends are recorded (attempt_log.h);
  // set before Load. Null: not recorded.
  void SetAttemptLog(AttemptLog* log) { attempt_log_ = log; }

  Result<sched::JobId> Submit(const nlohmann::json& spec, const Caller& caller,
                              const SubmitExtras& extras = {});
  // A job array: `count` jobs from one spec, task i with GPUHERD_ARRAY_INDEX=i
  // and GPUHERD_ARRAY_SIZE=count in its environment and "[i]" after its name.
  // All or nothing: every check runs before the first job is queued, and the
  // jobs are committed in the same turn. Ids are consecutive.
  Result<std::vector<sched::JobId>> SubmitArray(const nlohmann::json& spec, int count, const Caller& caller);
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
  Result<std::string> Act(sched::JobId id, const std::string& action, const Caller& caller);
  // Many jobs cancelled in one call, so in one turn and one commit: no job
  // starts between two of the cancels (`scancel`'s filters). Selects `ids`
  // and, with a filter, the unfinished jobs matching every filter given
  // (state: pending, held, running or stopping; name: exact) of `user`, of
  // every user with `all` (admins only), else of the caller. With both, the
  // named ids that match the filters. An id that names no job, or a job the
  // caller may not cancel, refuses the whole request; a finished one is
  // reported as skipped. {"cancelled": [ids], "stopping": [ids],
  // "skipped": [{"id", "reason"}]}.
  struct CancelRequest {
    std::vector<sched::JobId> ids;
    std::string user, state, name;
    bool all = false;
    bool filtered() const { return all || !user.empty() || !state.empty() || !name.empty(); }
  };
  Result<nlohmann::json> CancelMany(const CancelRequest& request, const Caller& caller);
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

  // The body of GET /v1/jobs: {"jobs": [...], "now": N}, jobs by id, finished
  // ones too when `all` (the 10,000 most recent, read from the store: the
  // daemon keeps only unfinished jobs in memory). An unfinished job's listing
  // is serialized once per change, so polling a deep queue costs no parsing.
  // With `table`, the compact listing instead (api::ParseJobTable reads it):
  // {"columns": [...], "rows": [[...]], "now": N}, the same jobs in the same
  // order, each row serialized once per change as well.
  std::string ListBody(bool all, const std::string& user, const std::string& state, bool table = false);
  Result<nlohmann::json> Show(sched::JobId id);
  // A piece of a job's log from `offset` (at most 256 KiB).
  Result<nlohmann::json> Logs(sched::JobId id, const std::string& stream, int64_t offset);

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
  // A job's listing, serialized around the value of its "now" field.
  struct ListedJob {
    std::string user, state;
    std::string head, tail;  // head + now + tail is the job's JSON
  };
  struct Entry {
    sched::Job job;
    nlohmann::json spec_body;  // the spec as submitted: what is stored and reloaded
    std::string stored_spec;   // spec_body and the fields stored with it, serialized once
    StopIntent intent = StopIntent::kNone;
    TimeMs stop_deadline = 0;
    int shim_pid = 0;          // 0 until the launch thread reports back
    bool adopted = false;      // running since before this daemon started
    SubmitExtras extras;
    TimeMs over_memory_since = 0;  // watchdog: first reading over the share
    sched::JobId stopping_for = 0;  // the preemptor this attempt stops for
    std::set<sched::JobId> preempted_for;  // every preemptor it was stopped for (never twice)
    std::vector<int> stored_claim;  // the claim its stored spec holds (StoreMarks), as fleet positions
    // Its listing and its table row while unchanged; reset by Touch and SetReason.
    mutable std::optional<ListedJob> listed;
    mutable std::optional<std::string> table_row;
  };
  // The job's row of the compact listing, in api::kJobTableColumns' order.
  static std::string TableRow(const sched::Job& job);

  void Touch(Entry& e);  // marks the job's record for this turn's batch
  void Event(const sched::Job& job, const std::string& kind, store::Severity severity, const std::string& message);
  void Schedule();
  void ApplyDecisions(const sched::Decisions& decisions);
  // Changes a reason shown live (not stored until the job's next change).
  void SetReason(Entry& e, std::string reason);
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
  // `prior_attempts`: SubmitExtras::prior_attempts of the job.
  nlohmann::json ToJson(const sched::Job& job, TimeMs now, int prior_attempts) const;
  ListedJob Listed(const sched::Job& job, int prior_attempts) const;
  nlohmann::json MemoryFence(const sched::Job& job) const;
  // Whether every running fraction on GPU `gpu` belongs to `uid`.
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
  double RecentGpuHours(const std::string& user, TimeMs now) const;
  // Adds a running attempt's GPU time to gpu_seconds_done_ when it ends.
  void AccountGpuTime(const sched::Job& job, TimeMs end);
  std::string AttemptDir(sched::JobId id, int attempt) const;
  // Tells the attempt log why the current attempt of `e` ended (OnExit).
  void NoteAttemptEnd(const Entry& e, const exec::ExitRecord& r);

  DaemonState* state_;
  exec::JobExecutor* executor_;
  const MpsControl* mps_ = nullptr;
  AttemptLog* attempt_log_ = nullptr;
  StateDir dir_;
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
  std::map<std::string, double> gpu_seconds_done_;  // user → GPU-seconds of ended attempts
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
  PostToLoop post_;
  std::function<void(const sched::Job&)> listener_;
  std::function<void(const std::vector<JobLoad>&)> load_listener_;
  RunOffLoop run_off_loop_;
  // Declared last: destroyed first, finishing the launches it holds while the
  // rest of the service is still alive.
  std::unique_ptr<WorkQueue> launches_;
  // user → (end time, GPU-hours) of recently finished jobs, for fair share.
  std::multimap<std::string, std::pair<TimeMs, double>> usage_;
};

}  // namespace gpuherd::daemon
