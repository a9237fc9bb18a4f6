#include "exec/executor.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include "exec/pidfd.h"

namespace gpuherd::exec {
namespace {

std::string AttemptName(int64_t job_id, int attempt) {
  return "job " + std::to_string(job_id) + " attempt " + std::to_string(attempt);
}

Status Validate(const LaunchSpec& spec) {
  std::string what = AttemptName(spec.job_id, spec.attempt);
  if (spec.argv.empty() || spec.argv[0].empty()) return InvalidArgument(what + " has no command to run");
  for (const std::string* dir : {&spec.record_dir, &spec.output_dir}) {
    if (dir->empty() || (*dir)[0] != '/') {
      return InvalidArgument(what + ": the attempt's folders must be absolute paths, not '" + *dir + "'");
    }
  }
  if (spec.time_limit < 0) return InvalidArgument(what + ": the time limit must not be negative");
  if (spec.grace < 0) return InvalidArgument(what + ": the grace period must not be negative");
  for (const auto& [key, value] : spec.env) {
    if (key.empty() || key.find('=') != std::string::npos) {
      return InvalidArgument(what + ": bad environment variable name '" + key + "'");
    }
  }
  return Status::Ok();
}

// A group left behind (its shim was killed) is ended and removed; the shim
// removes its own group before it records the exit, so usually there is none.
void RemoveLeftoverGroup(const host::Cgroups& cgroups, int64_t job_id, int attempt) {
  if (cgroups.version() == host::CgroupVersion::kNone) return;
  host::Cgroup group = cgroups.Child(host::JobCgroupName(job_id, attempt));
  bool exists = false;
  for (const auto& dir : group.Dirs()) exists = exists || access(dir.c_str(), F_OK) == 0;
  if (!exists) return;
  (void)host::KillCgroup(group, std::chrono::seconds(5));
  (void)host::RemoveCgroup(group);
}

}  // namespace

std::optional<std::vector<int>> Executor::GroupProcesses(int64_t job_id, int attempt) const {
  if (cgroups_->version() == host::CgroupVersion::kNone) return std::nullopt;
  std::vector<pid_t> pids = host::CgroupPids(cgroups_->Child(host::JobCgroupName(job_id, attempt)));
  return std::vector<int>(pids.begin(), pids.end());
}

Result<std::unique_ptr<Executor>> Executor::Start(ExecutorOptions options, ExitCallback on_exit) {
  auto cgroups = std::make_shared<const host::Cgroups>(host::Cgroups::Open(options.cgroup_mount, options.cgroup_parent));
  auto watcher = ExitWatcher::Start([cgroups, on_exit = std::move(on_exit)](ExitRecord record) {
    RemoveLeftoverGroup(*cgroups, record.job_id, record.attempt);
    on_exit(std::move(record));
  });
  if (!watcher.ok()) return watcher.status();
  if (options.shim_program.empty()) options.shim_program = DefaultShimProgram(options.launcher_program);
  auto launcher = LauncherClient::Spawn(options.launcher_program, options.shim_program);
  if (!launcher.ok()) return launcher.status();
  return std::unique_ptr<Executor>(
      new Executor(std::move(options), std::move(cgroups), std::move(launcher).value(), std::move(watcher).value()));
}

Executor::~Executor() { Shutdown(); }

Result<int> Executor::Launch(const LaunchSpec& requested) {
  GPUHERD_RETURN_IF_ERROR(Validate(requested));
  ++launches_in_flight_;
  struct Done {
    std::atomic<int>* count;
    ~Done() { --*count; }
  } done{&launches_in_flight_};
  LaunchSpec spec = requested;
  spec.cgroup = cgroups_->Child(host::JobCgroupName(spec.job_id, spec.attempt));
  if (spec.open_files == 0) spec.open_files = options_.job_open_files;
  if (watcher_->IsWatching(spec.job_id, spec.attempt)) {
    return Status(Code::kAlreadyExists, AttemptName(spec.job_id, spec.attempt) + " is already running");
  }
  Result<LaunchedShim> launched = Unavailable("not launched");
  {
    std::lock_guard lock(launcher_mu_);
    if (shut_down_) return FailedPrecondition("the executor is shut down");
    // A launcher that died (killed by an operator, OOM) is replaced for the
    // next launch.
    GPUHERD_RETURN_IF_ERROR(ReplaceDeadLauncher());
    launched = launcher_->Launch(spec);
    if (!launched.ok() && launched.status().code() == Code::kUnavailable && !launcher_->alive()) {
      // It died during this launch. Once it is reaped, a shim it forked either
      // got its go byte after its `shim` file was written, or exits without
      // running anything; so the file tells whether to adopt or to launch again.
      launcher_->Close();
      auto recorded = ReadShimFile(spec.record_dir);
      if (recorded.ok() && recorded->has_value()) {
        GPUHERD_RETURN_IF_ERROR(Adopt(spec.job_id, spec.attempt, spec.record_dir));
        return (*recorded)->pid;
      }
      GPUHERD_RETURN_IF_ERROR(ReplaceDeadLauncher());
      launched = launcher_->Launch(spec);
    }
  }
  if (!launched.ok()) return launched.status().Annotate("cannot launch " + AttemptName(spec.job_id, spec.attempt));
  GPUHERD_RETURN_IF_ERROR(watcher_->Watch(spec.job_id, spec.attempt, launched->shim, launched->pidfd, spec.record_dir));
  return launched->shim.pid;
}

Status Executor::ReplaceDeadLauncher() {
  if (launcher_->alive()) return Status::Ok();
  launcher_->Close();  // reaps it
  auto fresh = LauncherClient::Spawn(options_.launcher_program, options_.shim_program);
  if (!fresh.ok() && fresh.status().code() == Code::kUnavailable) {
    // Killed while it started (by an operator, the OOM killer): once more
    // before the launch fails.
    fresh = LauncherClient::Spawn(options_.launcher_program, options_.shim_program);
  }
  if (!fresh.ok()) return fresh.status();
  launcher_ = std::move(fresh).value();
  ++launcher_restarts_;
  return Status::Ok();
}

int Executor::launcher_restarts() const {
  std::lock_guard lock(launcher_mu_);
  return launcher_restarts_;
}

Status Executor::Signal(int64_t job_id, int attempt, int signal) {
  if (signal != SIGUSR1 && signal != SIGTERM) {
    return InvalidArgument("only SIGUSR1 (checkpoint) and SIGTERM (stop) can be sent to a job, not signal " +
                           std::to_string(signal));
  }
  return watcher_->Signal(job_id, attempt, signal);
}

Status Executor::Adopt(int64_t job_id, int attempt, const std::string& record_dir) {
  if (watcher_->IsWatching(job_id, attempt)) return Status::Ok();
  auto shim = ReadShimFile(record_dir);
  if (!shim.ok()) return shim.status().Annotate("cannot adopt " + AttemptName(job_id, attempt));
  if (!shim->has_value()) return watcher_->Watch(job_id, attempt, ShimIdentity{}, -1, record_dir);
  const ShimIdentity& id = **shim;
  // Open the pidfd first and check the start time after: if it still matches,
  // the pidfd is known to refer to our shim and not to a recycled pid.
  int pidfd = PidfdOpen(id.pid);
  if (pidfd >= 0 && !IsAlive(id)) {
    close(pidfd);
    pidfd = -1;
  }
  return watcher_->Watch(job_id, attempt, id, pidfd, record_dir);
}

std::string CgroupParentFor(const std::string& home) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (unsigned char ch : home) hash = (hash ^ ch) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", hash);
  return std::string("gpuherd/home-") + hex;
}

int Executor::RemoveStaleCgroups() {
  int removed = 0;
  for (const std::string& name : cgroups_->ListChildren()) {
    int64_t job_id = 0;
    int attempt = 0;
    if (!host::ParseJobCgroupName(name, &job_id, &attempt) || watcher_->IsWatching(job_id, attempt)) continue;
    host::Cgroup group = cgroups_->Child(name);
    (void)host::KillCgroup(group, std::chrono::seconds(5));
    if (host::RemoveCgroup(group).ok()) ++removed;
  }
  return removed;
}

void Executor::Shutdown() {
  bool was_shut_down = false;
  {
    std::lock_guard lock(launcher_mu_);
    was_shut_down = shut_down_;
    shut_down_ = true;
    if (launcher_) launcher_->Close();
  }
  // No launch starts after this; one that forked its shim before it still
  // has to register it with the watcher. Its shim makes its group under the
  // parent later, on its own, so the parent may go only when every shim
  // launched is counted and none is running: counting before a late launch
  // registered removed the parent under a shim about to make its group.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (launches_in_flight_ > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool shims_running = watcher_->WatchedCount() > 0 || launches_in_flight_ > 0;
  watcher_->Stop();
  if (!was_shut_down && !shims_running) (void)cgroups_->RemoveParentIfEmpty();
}

}  // namespace gpuherd::exec
