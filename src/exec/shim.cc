#include "exec/shim.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "exec/job_files.h"
#include "host/clock.h"

namespace gpuherd::exec {
namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
constexpr int kLaunchFailedExit = 127;

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Reports why the job could not be started to the shim through `fd` and ends
// the child. Runs in the job's child before exec.
[[noreturn]] void FailChild(int fd, const std::string& message) {
  ssize_t ignored = write(fd, message.data(), message.size());
  (void)ignored;
  _exit(kLaunchFailedExit);
}

std::string Errno(int err) { return std::strerror(err); }

// Drops to the spec's user: supplementary groups first, then the group, then
// the user, since each step needs the privileges the next one gives up.
std::optional<std::string> DropPrivileges(const LaunchSpec& spec) {
  if (!spec.uid && !spec.gid) return std::nullopt;
  if (geteuid() != 0) {
    if ((spec.uid && *spec.uid != geteuid()) || (spec.gid && *spec.gid != getegid())) {
      return "cannot run as uid " + (spec.uid ? std::to_string(*spec.uid) : std::string("-")) + " gid " +
             (spec.gid ? std::to_string(*spec.gid) : std::string("-")) +
             ": only a launcher running as root can switch users";
    }
    return std::nullopt;
  }
  struct passwd* pw = spec.uid ? getpwuid(*spec.uid) : nullptr;
  gid_t gid;
  if (spec.gid) {
    gid = *spec.gid;
  } else if (pw != nullptr) {
    gid = pw->pw_gid;
  } else {
    return "cannot run as uid " + std::to_string(*spec.uid) + ": no group given and the uid has no passwd entry";
  }
  if (pw != nullptr) {
    if (initgroups(pw->pw_name, gid) != 0) return "cannot set the groups of " + std::string(pw->pw_name) + ": " + Errno(errno);
  } else if (setgroups(1, &gid) != 0) {
    return "cannot set supplementary groups to " + std::to_string(gid) + ": " + Errno(errno);
  }
  if (setgid(gid) != 0) return "cannot switch to gid " + std::to_string(gid) + ": " + Errno(errno);
  if (spec.uid && setuid(*spec.uid) != 0) return "cannot switch to uid " + std::to_string(*spec.uid) + ": " + Errno(errno);
  return std::nullopt;
}

// Like execvp, but searches the PATH of the job's environment, not ours.
// Returns only on failure, with the errno that explains it.
int ExecInPath(const std::vector<std::string>& argv, char* const* args, char* const* envp, const std::string& path) {
  const std::string& file = argv[0];
  if (file.find('/') != std::string::npos) {
    execve(file.c_str(), args, envp);
    return errno;
  }
  int result = ENOENT;
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + file;
    execve(candidate.c_str(), args, envp);
    // Keep looking past missing files; remember a permission problem, as execvp does.
    if (errno == EACCES) {
      result = EACCES;
    } else if (errno != ENOENT && errno != ENOTDIR) {
      return errno;
    }
    begin = end + 1;
  }
  return result;
}

// The job's child, from fork to exec. `report_fd` is close-on-exec: the shim
// reads end-of-file when exec succeeded, a message when it did not.
[[noreturn]] void RunJobChild(const LaunchSpec& spec, int out_fd, int err_fd, int report_fd) {
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // Ignored signals stay ignored across exec; the job starts with defaults.
  signal(SIGHUP, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0 || dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) {
    FailChild(report_fd, "cannot set up the standard descriptors: " + Errno(errno));
  }
  if (!spec.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string list;
    for (int cpu : spec.cpus) {
      list += (list.empty() ? "" : ",") + std::to_string(cpu);
      if (cpu < 0 || cpu >= CPU_SETSIZE) FailChild(report_fd, "CPU " + std::to_string(cpu) + " does not exist");
      CPU_SET(cpu, &set);
    }
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      FailChild(report_fd, "cannot bind to CPUs " + list + ": " + Errno(errno));
    }
  }
  if (auto error = DropPrivileges(spec)) FailChild(report_fd, *error);
  // After dropping privileges, so that a directory the user may not enter fails here.
  const std::string& cwd = spec.cwd.empty() ? spec.dir : spec.cwd;
  if (chdir(cwd.c_str()) != 0) FailChild(report_fd, "cannot change to directory '" + cwd + "': " + Errno(errno));

  std::vector<std::string> env_strings;
  std::string path = kDefaultPath;
  for (const auto& [key, value] : spec.env) {
    env_strings.push_back(key + "=" + value);
    if (key == "PATH") path = value;
  }
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = spec.argv;
  std::vector<char*> args;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  int err = ExecInPath(spec.argv, args.data(), envp.data(), path);
  FailChild(report_fd, "cannot run '" + spec.argv[0] + "': " + Errno(err));
}

std::string DescribeEnd(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "killed by " + SignalName(WTERMSIG(status));
}

class Shim {
 public:
  explicit Shim(const LaunchSpec& spec) : spec_(spec), clock_(host::NewRealClock()) {
    record_.job_id = spec.job_id;
    record_.attempt = spec.attempt;
  }

  // Returns the shim's exit status: 0 when the exit record was written.
  int Run() {
    int signal_fd = SetUpSignals();
    RedirectOwnStdio();
    record_.started = clock_->Now();
    if (signal_fd < 0) return Finish(LaunchFailed("cannot set up signal handling: " + Errno(errno)));
    int out_fd = OpenLog(StdoutPath(spec_.dir));
    int err_fd = OpenLog(StderrPath(spec_.dir));
    if (out_fd < 0 || err_fd < 0) {
      return Finish(LaunchFailed("cannot open the log files in " + spec_.dir + ": " + Errno(errno)));
    }
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return Finish(LaunchFailed("cannot create a pipe: " + Errno(errno)));
    job_pid_ = fork();
    if (job_pid_ < 0) return Finish(LaunchFailed("cannot fork the job: " + Errno(errno)));
    if (job_pid_ == 0) {
      close(report[0]);
      RunJobChild(spec_, out_fd, err_fd, report[1]);
    }
    // Both sides set the group, so no signal can reach the job before it has one.
    setpgid(job_pid_, job_pid_);
    close(report[1]);
    close(out_fd);
    close(err_fd);
    std::string failure = ReadAll(report[0]);
    close(report[0]);
    if (!failure.empty()) {
      int status;
      while (waitpid(job_pid_, &status, 0) < 0 && errno == EINTR) {
      }
      return Finish(LaunchFailed(failure));
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

  int OpenLog(const std::string& path) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    // The job's user may read its own logs without the daemon.
    if (fd >= 0 && geteuid() == 0 && (spec_.uid || spec_.gid)) {
      if (fchown(fd, spec_.uid.value_or(-1), spec_.gid.value_or(-1)) != 0) {
        // Not fatal: the daemon still serves the logs.
      }
    }
    return fd;
  }

  static std::string ReadAll(int fd) {
    std::string out;
    char buf[512];
    while (true) {
      ssize_t n = read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
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
    kill_at_ = Steady() + std::chrono::milliseconds(spec_.grace);
  }

  // The job's wait status once its main process ended. The rest of its group
  // is killed first, while the unreaped leader still pins the group id.
  std::optional<int> ReapJob() {
    siginfo_t info{};
    if (waitid(P_PID, job_pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid != job_pid_) {
      return std::nullopt;
    }
    kill(-job_pid_, SIGKILL);
    int status = 0;
    while (waitpid(job_pid_, &status, 0) < 0 && errno == EINTR) {
    }
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
      return r;
    }
    r.how = *stop_reason_;
    std::string cause = r.how == ExitRecord::How::kTimeLimit
                            ? "time limit of " + FormatDuration(spec_.time_limit) + " reached"
                            : "stopped on request";
    std::string how_it_ended = killed_after_grace_ && r.signal == SIGKILL
                                   ? "killed by SIGKILL after the " + FormatDuration(spec_.grace) + " grace period"
                                   : end + " after SIGTERM";
    r.message = cause + "; " + how_it_ended;
    return r;
  }

  // The record only has to survive a daemon crash, not a power cut: a
  // rename without fsync is enough, and fsync would cost every job a disk flush.
  int Finish(ExitRecord record) {
    record.ended = clock_->Now();
    return WriteExitRecord(spec_.dir, record).ok() ? 0 : 1;
  }

  const LaunchSpec& spec_;
  std::unique_ptr<host::Clock> clock_;
  ExitRecord record_;
  pid_t job_pid_ = -1;
  std::optional<SteadyTime> time_limit_at_, kill_at_;
  std::optional<ExitRecord::How> stop_reason_;
  bool killed_after_grace_ = false;
};

}  // namespace

void RunShim(const LaunchSpec& spec) {
  setsid();
  int status = Shim(spec).Run();
  // _exit: the static destructors belong to the launcher this process was copied from.
  _exit(status);
}

}  // namespace gpuherd::exec
