// The launcher-facing part of the queue: what an attempt is started with
// (its command, limits, CPUs and the job protocol's environment, docs/queue.md "Job
// protocol"), where its files live (attempt folder, checkpoints, metrics
// file), and the launch itself, off the event loop: the job's folders are
// made with its owner, the executor starts the shim, and the result comes
// back on the loop. The queue decides when; this decides how.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/state_dir.h"
#include "core/status.h"
#include "daemon/mps_control.h"
#include "daemon/work_queue.h"
#include "exec/job_executor.h"
#include "gpu/types.h"
#include "sched/job.h"

namespace gpuherd::daemon {

// How often a job was started again (the one restart counter): every
// attempt after its first, whatever ended the one before (a GPU fault, a lost
// supervisor, a preemption, a requeue), plus a pipeline node's runs before
// this job. `show`, `--json` ("restarts") and GPUHERD_RESTART_COUNT give this
// number. Only the restarts after faults (GPU faults, lost supervisors; shown
// as "fault_restarts") count against --max-restarts: a job is never failed
// for being preempted or requeued.
int RestartCount(const sched::Job& job, int prior_attempts);

}  // namespace gpuherd::daemon

namespace gpuherd::daemon::queue {

// What the queue knows of an attempt beyond the job itself.
struct AttemptFacts {
  std::string checkpoint_dir;  // GPUHERD_CHECKPOINT_DIR; empty: checkpoints/<job id>
  int prior_attempts = 0;      // a pipeline node's runs before this job
  // A fraction whose GPU holds only its user's fractions may join that
  // GPU's MPS server (with --mps).
  bool mps_alone = false;
};

class JobLauncher {
 public:
  // Runs `task` on the event loop (thread-safe).
  using PostToLoop = std::function<void(std::function<void()>)>;
  // Runs `task` off the loop (launches fork); null: a thread of the launcher's own.
  using RunOffLoop = std::function<void(std::function<void()>)>;

  // `fleet` and `executor` must outlive the launcher.
  JobLauncher(const gpu::Fleet* fleet, StateDir dir, exec::JobExecutor* executor, PostToLoop post,
              RunOffLoop run_off_loop = nullptr);

  // With --mps: fractions alone with their user's connect to the GPU's MPS
  // server. Null (the default): they time-share the SMs.
  void SetMps(const MpsControl* mps) { mps_ = mps; }

  // An attempt's two folders (exec/job_trees.h): its output folder in the
  // job's tree (<home>/jobs/<id>/<attempt>: logs, fence files, default cwd)
  // and its record folder in the daemon's private tree.
  std::string AttemptDir(sched::JobId id, int attempt) const;
  std::string RecordDir(sched::JobId id, int attempt) const;
  // <home>/jobs: only root writes it; each job's folder below is its user's.
  std::string JobsDir() const { return dir_.jobs_dir(); }
  // GPUHERD_METRICS_FILE of every attempt of the job.
  std::string MetricsFile(sched::JobId id) const;

  // The attempt of `job` now starting on job.gpus, as the executor takes it.
  exec::LaunchSpec Prepare(const sched::Job& job, const AttemptFacts& facts) const;
  // Off the loop: the job's folders (owned by the user it runs as), then the
  // executor's launch; `done` runs on the loop with the shim's pid or why not.
  void Launch(exec::LaunchSpec launch, std::function<void(const Result<int>&)> done);
  // Other work the loop should not wait for (freeing many finished jobs), on
  // the same thread, after the launches queued before it.
  void OffLoop(std::function<void()> task) { run_off_loop_(std::move(task)); }

 private:
  const gpu::Fleet* fleet_;
  StateDir dir_;
  exec::JobExecutor* executor_;
  const MpsControl* mps_ = nullptr;
  PostToLoop post_;
  RunOffLoop run_off_loop_;
  // Declared last: destroyed first, finishing the launches it holds while
  // the rest of the launcher is still alive.
  std::unique_ptr<WorkQueue> launches_;
};

}  // namespace gpuherd::daemon::queue
