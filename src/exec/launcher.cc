#include "exec/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "exec/shim.h"
#include "exec/pidfd.h"

extern char** environ;

namespace gpuherd::exec {
namespace {

using nlohmann::json;

enum FrameType : uint8_t { kPing = 1, kLaunch = 2 };

// A request larger than this is refused (argv and environment together; exec
// itself refuses far less).
constexpr uint32_t kMaxFrame = 16 << 20;
// The launcher's end of the socketpair in its own process (the first after stdio).
constexpr int kLauncherFd = 3;
constexpr int kPingTimeoutMs = 10000;
// The one byte that lets a forked shim start its job. Anything else, or
// end-of-file (the launcher died before recording the shim), cancels it.
constexpr char kGoByte = 'g';


// The fixed part of a reply; `error_len` bytes of error text follow it.
struct ReplyHeader {
  int32_t pid;
  uint32_t error_len;
  uint64_t start_time;
};

std::string Errno(int err) { return std::strerror(err); }

bool WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// False on end-of-file or error.
bool ReadExact(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

json SpecToJson(const LaunchSpec& s) {
  json j = {{"job_id", s.job_id}, {"attempt", s.attempt}, {"argv", s.argv}, {"cwd", s.cwd},
            {"env", s.env},       {"dir", s.dir},         {"cpus", s.cpus}, {"time_limit", s.time_limit},
            {"grace", s.grace}};
  if (s.uid) j["uid"] = *s.uid;
  if (s.gid) j["gid"] = *s.gid;
  return j;
}

LaunchSpec SpecFromJson(const json& j) {
  LaunchSpec s;
  s.job_id = j.at("job_id").get<int64_t>();
  s.attempt = j.at("attempt").get<int>();
  s.argv = j.at("argv").get<std::vector<std::string>>();
  s.cwd = j.at("cwd").get<std::string>();
  s.env = j.at("env").get<std::map<std::string, std::string>>();
  s.dir = j.at("dir").get<std::string>();
  s.cpus = j.at("cpus").get<std::vector<int>>();
  s.time_limit = j.at("time_limit").get<DurationMs>();
  s.grace = j.at("grace").get<DurationMs>();
  if (j.contains("uid")) s.uid = j.at("uid").get<uint32_t>();
  if (j.contains("gid")) s.gid = j.at("gid").get<uint32_t>();
  return s;
}

// ---- The launcher process ----

class Launcher {
 public:
  explicit Launcher(int fd) : fd_(fd) {}

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
    iovec iov{&header, sizeof(header)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (pidfd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cmsg), &pidfd, sizeof(int));
    }
    ssize_t n;
    do {
      n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return false;
    if (static_cast<size_t>(n) < sizeof(header) &&
        !WriteAll(fd_, reinterpret_cast<char*>(&header) + n, sizeof(header) - static_cast<size_t>(n))) {
      return false;
    }
    return WriteAll(fd_, error.data(), error.size());
  }

  bool HandleLaunch(const std::string& payload) {
    LaunchSpec spec;
    try {
      spec = SpecFromJson(json::parse(payload));
    } catch (const json::exception& e) {
      return Reply(0, 0, std::string("malformed launch request: ") + e.what(), -1);
    }
    Status made = MakeDirs(spec.dir);
    if (!made.ok()) return Reply(0, 0, made.message(), -1);
    // The shim waits on `go` until its `shim` file exists, so a daemon that
    // recorded the launch always finds the shim at re-adoption, and a failed
    // launch (or a launcher killed half-way) is cancelled before any job code
    // runs: only an explicit go byte starts the job.
    int go[2];
    if (pipe2(go, O_CLOEXEC) != 0) return Reply(0, 0, "cannot create a pipe: " + Errno(errno), -1);
    pid_t pid = fork();
    if (pid < 0) {
      int err = errno;
      close(go[0]);
      close(go[1]);
      return Reply(0, 0, "cannot fork a supervisor: " + Errno(err), -1);
    }
    if (pid == 0) {
      close(fd_);
      close(child_fd_);
      close(go[1]);
      char byte;
      ssize_t n;
      do {
        n = read(go[0], &byte, 1);
      } while (n < 0 && errno == EINTR);
      if (n != 1 || byte != kGoByte) _exit(1);
      close(go[0]);
      RunShim(spec);
    }
    close(go[0]);
    std::string error;
    auto start_time = ProcessStartTime(pid);
    int pidfd = -1;
    if (!start_time.ok()) {
      error = "cannot read the supervisor's start time: " + start_time.status().message();
    } else if (Status written = WriteShimFile(spec.dir, {pid, *start_time}); !written.ok()) {
      error = written.message();
    } else if ((pidfd = PidfdOpen(pid)) < 0) {
      error = "cannot open a pidfd for the supervisor: " + Errno(errno);
    }
    if (!error.empty()) {
      close(go[1]);  // end-of-file: the shim exits without running anything
      return Reply(0, 0, error, -1);
    }
    ssize_t written;
    do {
      written = write(go[1], &kGoByte, 1);
    } while (written < 0 && errno == EINTR);
    close(go[1]);
    // A pipe with room for the byte cannot refuse it; if it did, the shim
    // cancels itself and its missing exit record is reported as a lost shim.
    bool sent = Reply(pid, *start_time, "", pidfd);
    close(pidfd);
    return sent;
  }

  int fd_;
  int child_fd_ = -1;
};

}  // namespace

int MaybeRunLauncher(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], kLauncherArgument) != 0) return -1;
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
  return Launcher(static_cast<int>(fd)).Run();
}

// ---- The daemon's end ----

Result<std::unique_ptr<LauncherClient>> LauncherClient::Spawn(const std::string& program) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Internal("cannot create the launcher's socket: " + Errno(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto another number clears close-on-exec on the launcher's copy only.
  int launcher_fd = fds[1] == kLauncherFd ? kLauncherFd + 1 : kLauncherFd;
  posix_spawn_file_actions_adddup2(&actions, fds[1], launcher_fd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::string fd_arg = std::to_string(launcher_fd);
  std::string program_copy = program;
  std::string hidden = kLauncherArgument;
  char* argv[] = {program_copy.data(), hidden.data(), fd_arg.data(), nullptr};
  // LD_BIND_NOW: the launcher resolves its symbols once at start, not in
  // every shim it forks (lazy binding would redo the lookups per job). Jobs
  // never see it: a job's environment is exactly its spec's.
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "LD_BIND_NOW=", 12) != 0) env.push_back(*e);
  }
  std::string bind_now = "LD_BIND_NOW=1";
  env.push_back(bind_now.data());
  env.push_back(nullptr);
  pid_t pid = 0;
  int err = posix_spawn(&pid, program.c_str(), &actions, &attr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
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
  if (!WriteAll(fd_, frame.data(), frame.size())) {
    broken_ = true;
    return Unavailable("the job launcher exited: " + Errno(errno));
  }
  ReplyHeader header{};
  iovec iov{&header, sizeof(header)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *pidfd = -1;
  if (n > 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(pidfd, CMSG_DATA(c), sizeof(int));
    }
  }
  if (n <= 0 || (static_cast<size_t>(n) < sizeof(header) &&
                 !ReadExact(fd_, reinterpret_cast<char*>(&header) + n, sizeof(header) - static_cast<size_t>(n)))) {
    broken_ = true;
    if (*pidfd >= 0) close(*pidfd);
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
  std::string payload = SpecToJson(spec).dump();
  std::lock_guard lock(mu_);
  LaunchedShim launched;
  int pid = 0;
  GPUHERD_RETURN_IF_ERROR(Call(kLaunch, payload, &pid, &launched.shim.start_time, &launched.pidfd));
  if (launched.pidfd < 0) return Internal("the job launcher sent no pidfd for supervisor " + std::to_string(pid));
  launched.shim.pid = pid;
  return launched;
}

}  // namespace gpuherd::exec
