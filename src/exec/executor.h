// The local executor: runs jobs on this machine, each under its own shim
// (see shim.h), through one launcher process (see launcher.h), and reports
// every end exactly once through a callback (see exit_watcher.h). Jobs and
// shims outlive the executor and the daemon; a new daemon re-attaches to them
// with Adopt.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "exec/exit_watcher.h"
#include "exec/job_executor.h"
#include "exec/launch_spec.h"
#include "exec/launcher.h"
#include "host/cgroups.h"

namespace gpuherd::exec {

struct ExecutorOptions {
  // The binary whose main() calls MaybeRunLauncher: the running gpuherd.
  std::string launcher_program = "/proc/self/exe";
  // The job supervisor binary; empty: DefaultShimProgram(launcher_program).
  std::string shim_program;
  // Containment (docs/queue.md "Containment"): where control groups are mounted
  // ("/sys/fs/cgroup"; empty: no control groups, the shim's subreaper only)
  // and the parent group this executor owns below it, one per state home so
  // that two daemons never touch each other's jobs.
  std::string cgroup_mount;
  std::string cgroup_parent = "gpuherd";
  // The soft open-files limit jobs get (LaunchSpec::open_files); 0: the
  // launcher's own.
  uint64_t job_open_files = 0;
};

// The parent group of the daemon whose state home is `home`:
// "gpuherd/home-<8 hex digits of a hash of the path>", so that daemons on
// different homes (tests, a second instance) never remove each other's groups.
std::string CgroupParentFor(const std::string& home);

// Thread-safe: any thread may call any method.
class Executor : public JobExecutor {
 public:
  // Called on the watcher thread, possibly before the Launch that started
  // the job has returned; must not block long (the daemon posts to its loop).
  using ExitCallback = std::function<void(ExitRecord)>;

  // Spawns the launcher and the watcher thread, and detects control groups
  // and creates the parent group (never fatal: see containment()).
  static Result<std::unique_ptr<Executor>> Start(ExecutorOptions options, ExitCallback on_exit);
  ~Executor() override;  // Shutdown()
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts the job's shim and returns its pid once the `shim` file is written,
  // so a caller that records the launch can always re-adopt it. The job
  // itself starts in the background; a command that cannot run is reported
  // through the callback (kLaunchFailed). Fast: well under a millisecond.
  // A launcher killed during the call is replaced and the launch completed:
  // retried when its shim never got to run, adopted when it did, so the job
  // never runs twice (killed in the instant between recording the shim and
  // starting it, the attempt is reported as kShimLost and never ran).
  Result<int> Launch(const LaunchSpec& spec) override;
  // SIGUSR1: forwarded to the job's process group (checkpoint now).
  // SIGTERM: a graceful stop: SIGTERM to the group, SIGKILL after the grace.
  // NotFound when the attempt is not running here.
  Status Signal(int64_t job_id, int attempt, int signal) override;
  // At daemon start, for an attempt the store says is running: a live shim
  // is watched again; a finished one delivers its record through the
  // callback; a missing one is delivered as kShimLost. Ok (and nothing new)
  // when the attempt is already watched.
  Status Adopt(int64_t job_id, int attempt, const std::string& record_dir) override;
  // Stops the watcher and the launcher; running shims and jobs are NOT touched
  // (nor their groups: the parent group goes only when no shim of this
  // executor runs or is being started, since a starting shim makes its group).
  void Shutdown();
  // How many times a dead launcher was replaced (for tests and diagnostics).
  int launcher_restarts() const;
  // "cgroup v1 (memory, cpu, pids, freezer) at ..." or "none (why), subreaper only".
  std::string containment() const override { return cgroups_->Describe(); }
  const host::Cgroups& cgroups() const { return *cgroups_; }
  std::optional<std::vector<int>> GroupProcesses(int64_t job_id, int attempt) const override;
  // At daemon start, after every running attempt was adopted: ends and
  // removes the control groups of attempts not watched here (their jobs
  // finished, or their shims died while no daemon ran). Returns how many.
  int RemoveStaleCgroups();

 private:
  Executor(ExecutorOptions options, std::shared_ptr<const host::Cgroups> cgroups,
           std::unique_ptr<LauncherClient> launcher, std::unique_ptr<ExitWatcher> watcher)
      : options_(std::move(options)),
        cgroups_(std::move(cgroups)),
        launcher_(std::move(launcher)),
        watcher_(std::move(watcher)) {}

  // Spawns a new launcher when the current one is gone; caller holds launcher_mu_.
  Status ReplaceDeadLauncher();

  const ExecutorOptions options_;
  // Shared with the exit callback, which removes what a lost shim left behind.
  std::shared_ptr<const host::Cgroups> cgroups_;
  mutable std::mutex launcher_mu_;
  std::unique_ptr<LauncherClient> launcher_;  // replaced when it died; guarded by launcher_mu_
  bool shut_down_ = false;                    // guarded by launcher_mu_
  std::atomic<int> launches_in_flight_{0};
  int launcher_restarts_ = 0;                 // guarded by launcher_mu_
  std::unique_ptr<ExitWatcher> watcher_;
};

}  // namespace gpuherd::exec
