// Pipeline jobs on a Slurm cluster: each job is an `sbatch` (the batch
// script in exec/slurm.h), its state comes from `squeue` polled on a
// thread of the backend's own, cancel is `scancel`, requeue `scontrol
// requeue`, SIGUSR1 `scancel --batch --signal=USR1`. Output, exit status
// and metrics files lie in the shared folder (the same path on every node).
// Lives on the event-loop thread; only the commands run elsewhere, and
// their results come back through `post`.
//
// No command runs on the loop: sbatch, squeue, scancel and scontrol run on
// the backend's threads (sbatch took 10 to 75 ms a call here, so a sweep of
// 1,000 points would otherwise hold the loop for over a minute). A job has
// its gpuherd id at once; sbatch runs once the turn that gave it is
// committed; its Slurm id follows when sbatch answers and is kept in
// <shared>/ids/<gpuherd id>, from which a restarted daemon finds it (or, if
// the daemon stopped before writing it, from the job's comment in squeue).
#pragma once

#include <map>
#include <memory>
#include <set>

#include "daemon/daemon_state.h"
#include "daemon/job_backend.h"
#include "daemon/work_queue.h"
#include "exec/command_runner.h"
#include "exec/slurm.h"

namespace gpuherd::daemon {

struct SlurmBackendOptions {
  exec::slurm::SlurmOptions site;     // shared_dir required
  DurationMs poll_interval = kSecondMs;
  DurationMs command_timeout = 30 * kSecondMs;
};

class SlurmBackend : public JobBackend {
 public:
  using PostToLoop = std::function<void(std::function<void()>)>;
  // `state` and `runner` must outlive the backend. Creates the shared
  // folder (mode 1777: the jobs write their files there as their users).
  static Result<std::unique_ptr<SlurmBackend>> Create(DaemonState* state, exec::CommandRunner* runner,
                                                      SlurmBackendOptions options, PostToLoop post);
  ~SlurmBackend() override;

  std::string name() const override { return "slurm"; }
  bool Owns(sched::JobId id) const override { return id > kSlurmJobIdBase; }
  Result<sched::JobId> Submit(const sched::JobSpec& spec, const Caller& owner, const SubmitExtras& extras,
                              const BackendOptions& options) override;
  Result<std::string> Act(sched::JobId id, const std::string& action, const Caller& caller,
                          const std::string& why = {}) override;
  Status Signal(sched::JobId id, int signal) override;
  Result<BackendJob> Show(sched::JobId id) override;
  std::string MetricsPath(sched::JobId id) const override;  // empty until sbatch answered
  Result<std::optional<sched::Job>> Recover(sched::JobId id) override;
  void SetStateListener(std::function<void(const sched::Job&)> listener) override { listener_ = std::move(listener); }

  size_t tracked() const { return tracked_.size(); }
  // After each turn's commit: runs the sbatch of the jobs submitted in the
  // turn (committed), or fails them without submitting (the commit failed).
  void AfterCommit(bool committed);

  // What one poll learned: squeue's lines for the jobs asked about, and for
  // those squeue no longer lists, what their exit files (or sacct) say.
  struct Gone {
    int64_t id = 0;  // the Slurm id
    std::optional<int> exit_code;  // from the job's exit file
    std::string sacct_state;       // from sacct where accounting is kept; "" otherwise
  };
  struct PollResult {
    Status status;  // squeue failed: nothing below is known
    std::vector<exec::slurm::QueueEntry> entries;
    std::map<int64_t, int> exit_codes;  // Slurm id → exit file, for entries in a final state
    std::vector<Gone> gone;
  };
  // Applies a poll's result on the loop (public for tests that feed it).
  void ApplyPoll(const PollResult& result);

 private:
  struct Tracked {
    sched::Job job;
    int64_t slurm_id = 0;  // 0 until sbatch answered
    std::string nodes, slurm_state;
    bool cancel_requested = false;
    int missing = 0;  // polls in a row that did not list it
    // A final state seen once: Slurm shows FAILED for a moment while it
    // requeues a job, so a final state counts when a second poll agrees.
    std::string final_seen;
    bool reported_running = false;
  };
  SlurmBackend(DaemonState* state, exec::CommandRunner* runner, SlurmBackendOptions options, PostToLoop post);
  // The Slurm id of a job, watched or not (from its id file); 0 when unknown.
  int64_t SlurmId(sched::JobId id) const;
  std::string IdFile(sched::JobId id) const;
  // Writes the id file (any thread); a failure is logged: the job runs, but a
  // restart will look for it in squeue.
  void SaveSlurmId(sched::JobId id, int64_t slurm_id) const;
  sched::JobId NextId();
  // On the loop, once sbatch answered for `id`.
  void OnSubmitted(sched::JobId id, const Result<int64_t>& slurm_id);
  void SchedulePoll();
  PollResult Poll(const std::vector<int64_t>& slurm_ids);  // on the poll thread
  void Finish(Tracked& t, sched::JobState state, const std::string& reason, std::optional<int> exit_code);
  void Report(const sched::Job& job);
  // Runs a command on the action thread, logging a failure.
  void RunLater(std::vector<std::string> argv, std::string what);

  DaemonState* state_;
  exec::CommandRunner* runner_;
  SlurmBackendOptions options_;
  PostToLoop post_;
  std::function<void(const sched::Job&)> listener_;
  std::map<sched::JobId, Tracked> tracked_;  // unfinished jobs
  std::map<int64_t, sched::JobId> by_slurm_id_;  // the tracked jobs sbatch answered for
  // This turn's sbatch calls, run by AfterCommit.
  std::vector<std::pair<sched::JobId, std::function<void()>>> unsent_;
  int64_t last_sequence_ = 0;
  bool poll_in_flight_ = false;
  TimeMs last_poll_ = 0;
  // Declared last: joined first, while the rest is still alive. Submissions
  // and actions share a thread, so a cancel runs after its job's sbatch.
  std::unique_ptr<WorkQueue> actions_;
  std::unique_ptr<WorkQueue> polls_;
};

}  // namespace gpuherd::daemon
