#include "exec/shim.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "exec/fd_io.h"
#include "exec/job_files.h"
#include "exec/shim_containment.h"
#include "exec/shim_fence.h"
#include "exec/shim_fork_server.h"
#include "exec/shim_input.h"
#include "host/clock.h"

namespace gpuherd::exec {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr int kLaunchFailedExit = 127;
// The job's child runs on this stack from clone to exec: a few frames of system calls.
constexpr size_t kChildStackSize = 64 * 1024;

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string Errno(int err) { return std::strerror(err); }

// Everything the job's child needs, prepared before it is cloned. The child
// shares the shim's memory (CLONE_VM | CLONE_VFORK, as posix_spawn does), which
// spares copying the shim's page tables for every job; so it may only make
// system calls, and it reports a failure by writing `failed` and `error` here
// before it exits. The shim is suspended until the child has exec'd or exited.
//
// The job's output folder, its logs and its fence files are made here, after
// the child became the job's user (job_trees.h, rule 3): the kernel checks
// the user's own permissions, and nothing the user planted can lead root.
struct JobStart {
  enum Stage { kNone, kCgroup, kStdio, kAffinity, kGroups, kGid, kUid, kOutputDir, kLogs, kFence, kDirectory, kExec };

  int null_fd = -1;
  const char* output_dir = nullptr;
  const std::vector<JobFile>* files = nullptr;  // made in output_dir
  const char* failed_file = nullptr;            // which of them could not be
  bool set_affinity = false;
  cpu_set_t cpus;
  uint64_t open_files = 0;  // the job's soft RLIMIT_NOFILE; 0: unchanged
  const UserSwitch* user = nullptr;  // the shim's, alive until the child execs
  const char* cwd = nullptr;
  std::vector<std::string> candidates;  // paths to try exec on, in PATH order
  std::vector<char*> argv, envp;
  const std::vector<int>* cgroup_fds = nullptr;  // see ShimContainment

  Stage failed = kNone;
  int error = 0;
};

// Opens (creating it) a regular file for writing below `dir`, as the job's
// child does: no link followed, and a FIFO or device in its place is
// refused (errno EINVAL) rather than waited on. -1 with errno set.
int OpenRegular(int dir, const char* name, int flags, mode_t mode) {
  const int fd = openat(dir, name, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC | flags, mode);
  if (fd < 0) return -1;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

int RunJobChild(void* arg) {
  auto* start = static_cast<JobStart*>(arg);
  auto fail = [start](JobStart::Stage stage, int error) {
    start->failed = stage;
    start->error = error;
    _exit(kLaunchFailedExit);
  };
  setpgid(0, 0);
  // First, as root: the job never runs a single instruction outside its group.
  if (start->cgroup_fds != nullptr) {
    if (int error = JoinPreparedCgroup(*start->cgroup_fds); error != 0) fail(JobStart::kCgroup, error);
  }
  // Ignored signals stay ignored across exec; the job starts with defaults.
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigaction(SIGHUP, &default_action, nullptr);
  sigaction(SIGPIPE, &default_action, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (start->set_affinity && sched_setaffinity(0, sizeof(start->cpus), &start->cpus) != 0) {
    fail(JobStart::kAffinity, errno);
  }
  // Back to the machine's usual open-files limit (never above the hard one);
  // a failure leaves the job with the shim's, which is no reason to refuse it.
  if (start->open_files > 0) {
    struct rlimit limit {};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
      limit.rlim_cur = std::min<rlim_t>(start->open_files, limit.rlim_max);
      (void)setrlimit(RLIMIT_NOFILE, &limit);
    }
  }
  switch (SwitchToUser(*start->user)) {
    case SwitchStep::kNone: break;
    case SwitchStep::kGroups: fail(JobStart::kGroups, errno); break;
    case SwitchStep::kGid: fail(JobStart::kGid, errno); break;
    case SwitchStep::kUid: fail(JobStart::kUid, errno); break;
  }
  // From here on as the job's user. The attempt's folder may exist already
  // (the user's own); nothing in it is followed.
  if (mkdir(start->output_dir, 0755) != 0 && errno != EEXIST) fail(JobStart::kOutputDir, errno);
  const int dir = open(start->output_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dir < 0) fail(JobStart::kOutputDir, errno);
  const int out = OpenRegular(dir, "stdout", O_APPEND, 0644);
  if (out < 0) fail(JobStart::kLogs, errno);
  const int err = OpenRegular(dir, "stderr", O_APPEND, 0644);
  if (err < 0) fail(JobStart::kLogs, errno);
  for (const JobFile& file : *start->files) {
    start->failed_file = file.name.c_str();
    const int fd = OpenRegular(dir, file.name.c_str(), O_TRUNC, file.mode);
    if (fd < 0) fail(JobStart::kFence, errno);
    if (!file.text.empty() && write(fd, file.text.data(), file.text.size()) != static_cast<ssize_t>(file.text.size())) {
      fail(JobStart::kFence, errno == 0 ? EIO : errno);
    }
    close(fd);
  }
  close(dir);
  if (dup2(start->null_fd, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0) fail(JobStart::kStdio, errno);
  // After dropping privileges, so that a directory the user may not enter fails here.
  if (chdir(start->cwd) != 0) fail(JobStart::kDirectory, errno);
  // As execvp does: go on past missing files, remember a permission problem.
  int error = ENOENT;
  for (const std::string& candidate : start->candidates) {
    execve(candidate.c_str(), start->argv.data(), start->envp.data());
    if (errno == EACCES) {
      error = EACCES;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      error = errno;
      break;
    }
  }
  fail(JobStart::kExec, error);
  return kLaunchFailedExit;
}

// The paths exec is tried on: argv[0] itself when it has a '/', else each
// directory of the job's PATH (not the daemon's).
std::vector<std::string> ExecCandidates(const LaunchSpec& spec) {
  const std::string& file = spec.argv[0];
  if (file.find('/') != std::string::npos) return {file};
  auto path_entry = spec.env.find("PATH");
  std::string path = path_entry == spec.env.end() ? kDefaultPath : path_entry->second;
  std::vector<std::string> candidates;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(begin, end - begin);
    candidates.push_back((dir.empty() ? "." : dir) + "/" + file);
    begin = end + 1;
  }
  return candidates;
}

std::string StageFailure(const LaunchSpec& spec, const JobStart& start) {
  std::string error = Errno(start.error);
  // What the user's own folder held instead of a file, said plainly.
  if (start.failed == JobStart::kLogs || start.failed == JobStart::kFence || start.failed == JobStart::kOutputDir) {
    if (start.error == ELOOP) error = "a symbolic link is in the way (links are not followed)";
    if (start.error == EINVAL || start.error == ENXIO) error = "something that is not a regular file is in the way";
  }
  switch (start.failed) {
    case JobStart::kCgroup: return "cannot join the job's control group: " + error;
    case JobStart::kStdio: return "cannot set up the standard descriptors: " + error;
    case JobStart::kAffinity: {
      std::string cpus;
      for (int cpu : spec.cpus) cpus += (cpus.empty() ? "" : ",") + std::to_string(cpu);
      return "cannot bind to CPUs " + cpus + ": " + error;
    }
    case JobStart::kGroups:
      return "cannot set the supplementary groups for gid " + std::to_string(start.user->gid) + ": " + error;
    case JobStart::kGid: return "cannot switch to gid " + std::to_string(start.user->gid) + ": " + error;
    case JobStart::kUid: return "cannot switch to uid " + std::to_string(start.user->uid.value_or(0)) + ": " + error;
    case JobStart::kOutputDir:
      return "cannot create the attempt's folder " + spec.output_dir + " as the job's user: " + error;
    case JobStart::kLogs: return "cannot open the job's logs in " + spec.output_dir + " as the job's user: " + error;
    case JobStart::kFence:
      return "cannot create the memory fence's " + std::string(start.failed_file ? start.failed_file : "files") +
             " in " + spec.output_dir + " as the job's user: " + error;
    case JobStart::kDirectory: return "cannot change to directory '" + std::string(start.cwd) + "': " + error;
    case JobStart::kExec: return "cannot run '" + spec.argv[0] + "': " + error;
    case JobStart::kNone: break;
  }
  return "";
}

// A grace period as the time-limit message says it: "30 s", "400 ms".
std::string GraceText(DurationMs grace) {
  return grace % 1000 == 0 ? std::to_string(grace / 1000) + " s" : std::to_string(grace) + " ms";
}

std::string DescribeEnd(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "killed by " + SignalName(WTERMSIG(status));
}

class Shim {
 public:
  Shim(const LaunchSpec& spec, const UserSwitch& user)
      : spec_(spec), user_(user), clock_(host::NewRealClock()), containment_(spec) {
    record_.job_id = spec.job_id;
    record_.attempt = spec.attempt;
  }

  // Returns the shim's exit status: 0 when the exit record was written.
  int Run() {
    int signal_fd = SetUpSignals();
    RedirectOwnStdio();
    record_.started = clock_->Now();
    if (signal_fd < 0) return Finish(LaunchFailed("cannot set up signal handling: " + Errno(errno)));
    // Room for the exit record, should the disk fill up while the job runs.
    (void)ReserveExitRecord(spec_.record_dir);
    JobStart start;
    start.null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    start.output_dir = spec_.output_dir.c_str();
    start.open_files = spec_.open_files;
    if (!user_.error.empty()) return Finish(LaunchFailed(user_.error));
    start.user = &user_;
    if (!spec_.cpus.empty()) {
      CPU_ZERO(&start.cpus);
      for (int cpu : spec_.cpus) {
        if (cpu < 0 || cpu >= CPU_SETSIZE) return Finish(LaunchFailed("CPU " + std::to_string(cpu) + " does not exist"));
        CPU_SET(cpu, &start.cpus);
      }
      start.set_affinity = true;
    }
    if (std::string error = containment_.Prepare(); !error.empty()) {
      (void)containment_.Remove();
      return Finish(LaunchFailed(error));
    }
    start.cgroup_fds = &containment_.join_fds();
    start.cwd = spec_.cwd.empty() ? spec_.output_dir.c_str() : spec_.cwd.c_str();
    start.candidates = ExecCandidates(spec_);
    std::vector<std::string> env_strings;
    std::map<std::string, std::string> env = spec_.env;
    const std::vector<JobFile> files = AddMemoryFence(spec_, &env);
    start.files = &files;
    for (const auto& [key, value] : env) env_strings.push_back(key + "=" + value);
    for (auto& e : env_strings) start.envp.push_back(e.data());
    start.envp.push_back(nullptr);
    std::vector<std::string> argv = spec_.argv;
    for (auto& a : argv) start.argv.push_back(a.data());
    start.argv.push_back(nullptr);
    // Left uninitialized: zeroing it would fault in every page for nothing.
    std::unique_ptr<char[]> stack(new char[kChildStackSize]);
    job_pid_ = clone(RunJobChild, stack.get() + kChildStackSize, CLONE_VM | CLONE_VFORK | SIGCHLD, &start);
    int clone_error = errno;
    containment_.CloseJoinFiles();
    close(start.null_fd);
    if (job_pid_ < 0) return Finish(LaunchFailed("cannot start the job: " + Errno(clone_error)));
    if (start.failed != JobStart::kNone) {
      int status;
      while (waitpid(job_pid_, &status, 0) < 0 && errno == EINTR) {
      }
      (void)containment_.Remove();  // the child, which ran no job code, has left it
      return Finish(LaunchFailed(StageFailure(spec_, start)));
    }
    if (spec_.time_limit > 0) time_limit_at_ = Steady() + std::chrono::milliseconds(spec_.time_limit);
    int status = Supervise(signal_fd);
    return Finish(Ended(status));
  }

 private:
  static SteadyTime Steady() { return std::chrono::steady_clock::now(); }

  int SetUpSignals() {
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1}) sigaddset(&set, sig);
    sigprocmask(SIG_SETMASK, &set, nullptr);
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  }

  // The shim holds none of the daemon's terminal or pipes.
  static void RedirectOwnStdio() {
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd < 0) return;
    for (int fd = 0; fd <= 2; ++fd) dup2(null_fd, fd);
    if (null_fd > 2) close(null_fd);
  }

  // Waits for the job to end while handling signals and deadlines; returns its
  // wait status.
  int Supervise(int signal_fd) {
    while (true) {
      int timeout_ms = -1;
      SteadyTime now = Steady();
      for (auto deadline : {time_limit_at_, kill_at_}) {
        if (!deadline) continue;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now).count();
        int ms = left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
        if (timeout_ms < 0 || ms < timeout_ms) timeout_ms = ms;
      }
      pollfd pfd{signal_fd, POLLIN, 0};
      poll(&pfd, 1, timeout_ms);
      signalfd_siginfo info;
      while (read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
        switch (info.ssi_signo) {
          case SIGUSR1:
            kill(-job_pid_, SIGUSR1);
            break;
          case SIGTERM:
          case SIGINT:
            BeginStop(ExitRecord::How::kStopped);
            break;
          case SIGCHLD:
            ShimContainment::ReapOrphans(job_pid_);
            break;
          default:
            break;
        }
      }
      if (auto status = ReapJob()) return *status;
      now = Steady();
      if (time_limit_at_ && now >= *time_limit_at_) {
        time_limit_at_.reset();
        BeginStop(ExitRecord::How::kTimeLimit);
      }
      if (kill_at_ && now >= *kill_at_) {
        kill_at_.reset();
        killed_after_grace_ = true;
        kill(-job_pid_, SIGKILL);
      }
    }
  }

  void BeginStop(ExitRecord::How why) {
    if (stop_reason_) return;
    stop_reason_ = why;
    time_limit_at_.reset();
    kill(-job_pid_, SIGTERM);
    containment_.SignalEscaped(job_pid_, SIGTERM);
    kill_at_ = Steady() + std::chrono::milliseconds(spec_.grace);
  }

  // The job's wait status once its main process ended. The rest of its
  // process group is killed first, while the unreaped leader still pins the
  // group id, then every other process of the job (ShimContainment).
  std::optional<int> ReapJob() {
    siginfo_t info{};
    if (waitid(P_PID, job_pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != job_pid_) {
      return std::nullopt;
    }
    kill(-job_pid_, SIGKILL);
    containment_problem_ = containment_.KillAll(job_pid_);
    int status = 0;
    while (waitpid(job_pid_, &status, 0) < 0 && errno == EINTR) {
    }
    ShimContainment::ReapOrphans(-1);
    oom_kills_ = containment_.OomKills();
    if (std::string removed = containment_.Remove(); containment_problem_.empty()) containment_problem_ = removed;
    return status;
  }

  ExitRecord LaunchFailed(const std::string& message) {
    ExitRecord r = record_;
    r.how = ExitRecord::How::kLaunchFailed;
    r.code = kLaunchFailedExit;
    r.message = message;
    return r;
  }

  ExitRecord Ended(int status) {
    ExitRecord r = record_;
    if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
    std::string end = DescribeEnd(status);
    if (!stop_reason_) {
      r.how = r.signal != 0 ? ExitRecord::How::kSignaled : ExitRecord::How::kExited;
      r.message = end;
      if (oom_kills_ > 0 && (r.signal != 0 || r.code != 0)) {
        r.out_of_memory = true;
        r.message = OutOfMemoryMessage(end);
      }
      AppendContainmentProblem(r);
      return r;
    }
    r.how = *stop_reason_;
    // Said as the steps taken ("SIGTERM, then SIGKILL after 30 s"), never
    // as a signal name twice ("killed by SIGTERM after SIGTERM").
    std::string cause = r.how == ExitRecord::How::kTimeLimit
                            ? "stopped at its time limit of " + FormatDuration(spec_.time_limit)
                            : "stopped on request";
    std::string how_it_ended;
    if (killed_after_grace_ && r.signal == SIGKILL) {
      how_it_ended = "SIGTERM, then SIGKILL after " + GraceText(spec_.grace);
    } else if (r.signal == SIGTERM) {
      how_it_ended = "SIGTERM ended it";
    } else {
      how_it_ended = "SIGTERM; it " + end;
    }
    r.message = cause + " (" + how_it_ended + ")";
    AppendContainmentProblem(r);
    return r;
  }

  std::string OutOfMemoryMessage(const std::string& end) const {
    std::string processes = oom_kills_ == 1 ? "a process" : std::to_string(oom_kills_) + " processes";
    if (spec_.limits.memory_bytes == 0) {
      return "out of memory: the kernel killed " + processes +
             " of the job (it has no --mem limit: the machine ran short); " + end;
    }
    return "out of memory: the kernel killed " + processes + " of the job at its memory limit (--mem " +
           std::to_string(spec_.limits.memory_bytes >> 20) + " MiB); " + end;
  }

  void AppendContainmentProblem(ExitRecord& r) const {
    if (!containment_problem_.empty()) r.message += " (containment: " + containment_problem_ + ")";
  }

  // The record only has to survive a daemon crash, not a power cut: a
  // rename without fsync is enough, and fsync would cost every job a disk flush.
  int Finish(ExitRecord record) {
    record.ended = clock_->Now();
    return WriteExitRecord(spec_.record_dir, record).ok() ? 0 : 1;
  }

  const LaunchSpec& spec_;
  const UserSwitch& user_;
  std::unique_ptr<host::Clock> clock_;
  ShimContainment containment_;
  std::string containment_problem_;
  int64_t oom_kills_ = 0;
  ExitRecord record_;
  pid_t job_pid_ = -1;
  std::optional<SteadyTime> time_limit_at_, kill_at_;
  std::optional<ExitRecord::How> stop_reason_;
  bool killed_after_grace_ = false;
};

// The shim's life from its control pipe on descriptor 3 (see ShimMain).
int RunFromControlPipe() {
  uint32_t length = 0;
  if (!ReadExact(kShimControlFd, &length, sizeof(length)) || length == 0 || length > kMaxSpecBytes) return 1;
  std::string text(length, '\0');
  if (!ReadExact(kShimControlFd, text.data(), text.size())) return 1;
  auto input = DecodeShimInput(text);
  // Without a spec there is no attempt directory to record a failure in; the
  // daemon reports the attempt as a lost shim.
  if (!input.ok()) return 1;
  char go = 0;
  if (!ReadExact(kShimControlFd, &go, 1) || go != kShimGoByte) return 1;  // cancelled by the launcher
  close(kShimControlFd);
  setsid();
  return Shim(input->spec, input->user).Run();
}

}  // namespace

int ShimMain(int argc, char** argv) {
  const std::string fd = std::to_string(kShimControlFd);
  if (fcntl(kShimControlFd, F_GETFD) >= 0) {
    if (argc == 2 && argv[1] == fd) return RunFromControlPipe();
    if (argc == 3 && std::strcmp(argv[1], kForkServerArgument) == 0 && argv[2] == fd) {
      return ServeShimForks(kShimControlFd, argv, RunFromControlPipe);
    }
  }
  std::fprintf(stderr, "gpuherd-shim: an internal program of gpuherd: the launcher starts it, one per job, "
                       "with its control pipe on descriptor %d\n", kShimControlFd);
  return 2;
}

}  // namespace gpuherd::exec
