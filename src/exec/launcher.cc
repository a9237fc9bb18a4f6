#include "exec/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/private_dirs.h"
#include "exec/as_user.h"
#include "exec/fd_io.h"
#include "exec/job_trees.h"
#include "exec/shim.h"
#include "exec/shim_fork_server.h"
#include "exec/shim_input.h"
#include "exec/spawn.h"

namespace gpuherd::exec {
namespace {

using nlohmann::json;

enum FrameType : uint8_t { kPing = 1, kLaunch = 2 };

// A request larger than this is refused.
constexpr uint32_t kMaxFrame = kMaxSpecBytes + 1;
// The launcher's end of the socketpair in its own process (the first after stdio).
constexpr int kLauncherFd = 3;
constexpr int kPingTimeoutMs = 10000;

// The fixed part of a reply; `error_len` bytes of error text follow it.
struct ReplyHeader {
  int32_t pid;
  uint32_t error_len;
  uint64_t start_time;
};

std::string Errno(int err) { return std::strerror(err); }

// ---- The launcher process ----

// Makes `record_dir` (<private base>/<id>/<attempt>) as described in
// job_trees.h. A folder left by a launch that was retried is taken again.
Status MakeRecordDir(const std::string& record_dir) {
  std::string base, relative;
  if (!SplitAttemptRecordDir(record_dir, &base, &relative)) {
    return InvalidArgument("the attempt's record folder must be <base>/<job id>/<attempt>, got " + record_dir);
  }
  auto base_fd = OpenPrivateDir(base);
  if (!base_fd.ok()) return base_fd.status();
  auto made = MakePrivateDirs(base_fd->get(), base, relative);
  return made.ok() ? Status::Ok() : made.status();
}


class Launcher {
 public:
  Launcher(int fd, std::string shim) : fd_(fd), shim_(std::move(shim)) {}

  int Run() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
    child_fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (child_fd_ < 0) return 1;
    while (true) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {child_fd_, POLLIN, 0}};
      if (poll(fds, 2, -1) < 0 && errno != EINTR) return 1;
      if (fds[1].revents != 0) ReapShims();
      if (fds[0].revents == 0) continue;
      uint32_t length = 0;
      uint8_t type = 0;
      if (!ReadExact(fd_, &length, sizeof(length))) return 0;  // the daemon closed its end
      if (length == 0 || length > kMaxFrame || !ReadExact(fd_, &type, 1)) return 1;
      std::string payload(length - 1, '\0');
      if (!ReadExact(fd_, payload.data(), payload.size())) return 1;
      bool sent = type == kPing ? Reply(getpid(), 0, "", -1) : HandleLaunch(payload);
      if (!sent) return 1;
    }
  }

 private:
  // Shims are children of the launcher until it exits; reaping them here
  // keeps zombies away (their pidfds already told the daemon).
  void ReapShims() {
    signalfd_siginfo info;
    while (read(child_fd_, &info, sizeof(info)) == sizeof(info)) {
    }
    while (waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }

  bool Reply(int pid, uint64_t start_time, const std::string& error, int pidfd) {
    ReplyHeader header{pid, static_cast<uint32_t>(error.size()), start_time};
    return SendWithFd(fd_, &header, sizeof(header), pidfd) && SendAll(fd_, error.data(), error.size());
  }

  bool HandleLaunch(const std::string& payload) {
    json request = json::parse(payload, nullptr, /*allow_exceptions=*/false);
    auto parsed = LaunchSpecFromJson(request);
    if (request.is_discarded() || !parsed.ok()) {
      return Reply(0, 0, "malformed launch request: " + (parsed.ok() ? "not JSON" : parsed.status().message()), -1);
    }
    const LaunchSpec& spec = *parsed;
    // The record folder is the daemon's private tree (job_trees.h): its base
    // is checked for other users' write access at every level, and each
    // folder below it is made from the descriptor held, never followed.
    if (Status made = MakeRecordDir(spec.record_dir); !made.ok()) return Reply(0, 0, made.message(), -1);
    std::string input = EncodeShimInput(spec, ResolveUser(spec));
    // The shim waits for the go byte until its `shim` file exists, so a daemon
    // that recorded the launch always finds the shim at re-adoption, and a
    // failed launch (or a launcher killed half-way) is cancelled before any
    // job code runs: only an explicit go byte starts the job.
    int control[2];
    if (pipe2(control, O_CLOEXEC) != 0) return Reply(0, 0, "cannot create a pipe: " + Errno(errno), -1);
    auto shim = StartShim(control[0]);
    close(control[0]);
    if (!shim.ok()) {
      close(control[1]);
      return Reply(0, 0, "cannot start the job's supervisor " + shim_ + ": " + shim.status().message(), -1);
    }
    std::string error;
    auto length = static_cast<uint32_t>(input.size());
    if (!WriteAll(control[1], &length, sizeof(length)) ||
        !WriteAll(control[1], input.data(), input.size())) {
      error = "cannot hand the launch to the supervisor: " + Errno(errno);
    } else if (Status written = WriteShimFile(spec.record_dir, {shim->pid, shim->start_time}); !written.ok()) {
      error = written.message();
    }
    if (!error.empty()) {
      close(control[1]);  // end-of-file: the shim exits without running anything
      close(shim->pidfd);
      return Reply(0, 0, error, -1);
    }
    // A pipe with room for the byte cannot refuse it; if it did, the shim
    // cancels itself and its missing exit record is reported as a lost shim.
    WriteAll(control[1], &kShimGoByte, 1);
    close(control[1]);
    bool sent = Reply(shim->pid, shim->start_time, "", shim->pidfd);
    close(shim->pidfd);
    return sent;
  }

  // A shim waiting on `control` for its input: forked by the fork server
  // (started at the first launch, and once more if it died), else exec'd.
  Result<ForkedShim> StartShim(int control) {
    for (int attempt = 0; use_fork_server_ && attempt < 2; ++attempt) {
      if (forks_ == nullptr) {
        auto started = ShimForkServer::Start(shim_);
        if (!started.ok()) {
          use_fork_server_ = false;  // e.g. an older shim binary: exec each shim
          break;
        }
        forks_ = std::move(*started);
      }
      auto forked = forks_->Fork(control);
      if (forked.ok() || forked.status().code() != Code::kUnavailable) return forked;
      forks_.reset();
    }
    const pid_t pid = SpawnShim(control);
    if (pid < 0) return Internal(Errno(errno));
    // The shim is this launcher's unreaped child, waiting for its input.
    ForkedShim shim;
    if (int error = HoldUnreapedChild(pid, &shim); error != 0) {
      return Internal("cannot take its pidfd and start time: " + Errno(error));
    }
    return shim;
  }

  // Starts gpuherd-shim with `control` as its descriptor 3 and an empty
  // environment (the job's comes in the spec). Returns -1 with errno set.
  pid_t SpawnShim(int control) {
    std::string fd = std::to_string(kShimControlFd);
    char* argv[] = {const_cast<char*>(kShimBinary), fd.data(), nullptr};
    char* envp[] = {nullptr};
    return SpawnWithFd(shim_, argv, envp, control, kShimControlFd);
  }

  int fd_;
  std::string shim_;
  int child_fd_ = -1;
  // GPUHERD_SHIM_FORK_SERVER=0 execs every shim (a diagnostic and a benchmark baseline).
  bool use_fork_server_ = [] {
    const char* env = std::getenv("GPUHERD_SHIM_FORK_SERVER");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  std::unique_ptr<ShimForkServer> forks_;
};

}  // namespace

UserSwitch ResolveUser(const LaunchSpec& spec) { return UserFor(spec.uid, spec.gid); }

int MaybeRunLauncher(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], kLauncherArgument) != 0) return -1;
  if (argc != 4) {
    std::fprintf(stderr, "gpuherd: %s is internal: it takes the descriptor of the daemon's socket and the path "
                         "of gpuherd-shim\n", kLauncherArgument);
    return 2;
  }
  char* end = nullptr;
  long fd = std::strtol(argv[2], &end, 10);
  if (end == argv[2] || *end != '\0' || fd < 0 || fcntl(static_cast<int>(fd), F_GETFD) < 0) {
    std::fprintf(stderr, "gpuherd: %s is internal: it takes the descriptor of the daemon's socket\n",
                 kLauncherArgument);
    return 2;
  }
  // Descriptors the daemon leaked without close-on-exec must not reach jobs.
  if (fd > 3) close_range(3, static_cast<unsigned>(fd) - 1, 0);
  close_range(static_cast<unsigned>(fd) + 1, ~0U, 0);
  fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  return Launcher(static_cast<int>(fd), argv[3]).Run();
}

// ---- The daemon's end ----

std::string DefaultShimProgram(const std::string& program) {
  if (const char* env = std::getenv("GPUHERD_SHIM"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  std::filesystem::path resolved = std::filesystem::canonical(program, ec);
  return ((ec ? std::filesystem::path(program) : resolved).parent_path() / kShimBinary).string();
}

Result<std::unique_ptr<LauncherClient>> LauncherClient::Spawn(const std::string& program,
                                                             const std::string& shim) {
  if (access(shim.c_str(), X_OK) != 0) {
    return FailedPrecondition("cannot run the job supervisor " + shim + ": " + Errno(errno) + "; " + kShimBinary +
                              " is built and installed beside gpuherd-daemon, or named by $GPUHERD_SHIM");
  }
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Internal("cannot create the launcher's socket: " + Errno(errno));
  }
  std::string fd_arg = std::to_string(kLauncherFd);
  std::string program_copy = program;
  std::string hidden = kLauncherArgument;
  std::string shim_copy = shim;
  char* argv[] = {program_copy.data(), hidden.data(), fd_arg.data(), shim_copy.data(), nullptr};
  // In a process group of its own, so a Ctrl-C meant for the daemon does not reach it.
  const pid_t pid = SpawnWithFd(program, argv, nullptr, fds[1], kLauncherFd, /*own_group=*/true);
  const int err = pid < 0 ? errno : 0;
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    return Unavailable("cannot start the job launcher " + program + ": " + Errno(err));
  }
  std::unique_ptr<LauncherClient> client(new LauncherClient(fds[0], pid));
  // A program that does not call MaybeRunLauncher exits (end-of-file) or
  // ignores us (the timeout); either way it is not a launcher.
  timeval timeout{kPingTimeoutMs / 1000, 0};
  setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  int answered_pid = 0;
  uint64_t start_time = 0;
  int no_fd = -1;
  Status ping;
  {
    std::lock_guard lock(client->mu_);
    ping = client->Call(kPing, "", &answered_pid, &start_time, &no_fd);
  }
  if (!ping.ok() || answered_pid != pid) {
    kill(pid, SIGKILL);
    return Unavailable("the job launcher " + program + " does not answer: its main() must call "
                       "exec::MaybeRunLauncher(argc, argv) first");
  }
  timeval forever{0, 0};
  setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
  return client;
}

LauncherClient::~LauncherClient() { Close(); }

bool LauncherClient::alive() const {
  std::lock_guard lock(mu_);
  if (fd_ < 0 || broken_) return false;
  // A launcher that died closed its end: seen here, before a launch is lost to it.
  pollfd pfd{fd_, POLLRDHUP, 0};
  return poll(&pfd, 1, 0) == 0;
}

void LauncherClient::Close() {
  std::lock_guard lock(mu_);
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ > 0) {
    while (waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
  }
}

Status LauncherClient::Call(uint8_t type, const std::string& payload, int* pid, uint64_t* start_time,
                            int* pidfd) {
  if (payload.size() + 1 > kMaxFrame) {
    return InvalidArgument("launch request of " + std::to_string(payload.size()) +
                           " bytes is too large: shorten the arguments or the environment");
  }
  if (fd_ < 0 || broken_) return Unavailable("the job launcher is not running");
  std::string frame(sizeof(uint32_t) + 1, '\0');
  uint32_t length = static_cast<uint32_t>(payload.size() + 1);
  std::memcpy(frame.data(), &length, sizeof(length));
  frame[sizeof(length)] = static_cast<char>(type);
  frame += payload;
  if (!SendAll(fd_, frame.data(), frame.size())) {
    broken_ = true;
    return Unavailable("the job launcher exited: " + Errno(errno));
  }
  ReplyHeader header{};
  if (!ReceiveWithFd(fd_, &header, sizeof(header), pidfd)) {
    broken_ = true;
    return Unavailable("the job launcher exited without answering");
  }
  std::string error(header.error_len, '\0');
  if (!ReadExact(fd_, error.data(), error.size())) {
    broken_ = true;
    if (*pidfd >= 0) close(*pidfd);
    return Unavailable("the job launcher exited without answering");
  }
  if (!error.empty()) return Internal(error);
  *pid = header.pid;
  *start_time = header.start_time;
  return Status::Ok();
}

Result<LaunchedShim> LauncherClient::Launch(const LaunchSpec& spec) {
  std::string payload = LaunchSpecToJson(spec).dump();
  std::lock_guard lock(mu_);
  LaunchedShim launched;
  int pid = 0;
  GPUHERD_RETURN_IF_ERROR(Call(kLaunch, payload, &pid, &launched.shim.start_time, &launched.pidfd));
  if (launched.pidfd < 0) return Internal("the job launcher sent no pidfd for supervisor " + std::to_string(pid));
  launched.shim.pid = pid;
  return launched;
}

}  // namespace gpuherd::exec
