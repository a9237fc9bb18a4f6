#include "exec/shim_fork_server.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "exec/fd_io.h"
#include "exec/job_files.h"
#include "exec/pidfd.h"
#include "exec/shim.h"
#include "exec/shim_input.h"
#include "exec/spawn.h"

namespace gpuherd::exec {
namespace {

enum Request : uint8_t { kPing = 'p', kFork = 'f' };

// The server's answer; `error` is an errno (0: forked).
struct ForkReply {
  int32_t pid = -1;
  int32_t error = 0;
  uint64_t start_time = 0;
};

// The server's own socket; a child's control pipe replaces it there.
constexpr int kServerFd = kShimControlFd;
constexpr int kPingTimeoutSeconds = 10;

// Makes the child read "gpuherd-shim 3" in ps, as an exec'd shim does: argv's
// strings are contiguous, so the server's "--fork-server 3" is overwritten.
void RetitleAsShim(char** argv) {
  if (argv == nullptr || argv[0] == nullptr || argv[1] == nullptr) return;
  char* end = argv[1];
  for (int i = 1; argv[i] != nullptr; ++i) end = argv[i] + std::strlen(argv[i]);
  const std::string fd = std::to_string(kShimControlFd);
  if (static_cast<size_t>(end - argv[1]) < fd.size()) return;
  std::memset(argv[1], 0, static_cast<size_t>(end - argv[1]));
  std::memcpy(argv[1], fd.data(), fd.size());
}

// In the forked child: what posix_spawn gave an exec'd shim.
void BecomeShim(int control, char** argv) {
  if (dup2(control, kShimControlFd) < 0) _exit(1);  // replaces the server's socket
  if (control < kShimControlFd) close(control);       // below 3 only when stdio was closed
  close_range(kShimControlFd + 1, ~0U, 0);
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &defaults, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  RetitleAsShim(argv);
}

}  // namespace

int ServeShimForks(int fd, char** argv, const std::function<int()>& child) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, nullptr);
  const int reap_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
  if (reap_fd < 0) return 1;
  while (true) {
    pollfd fds[2] = {{fd, POLLIN, 0}, {reap_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return 1;
    if (fds[1].revents != 0) {
      signalfd_siginfo info;
      while (read(reap_fd, &info, sizeof(info)) == sizeof(info)) {
      }
      // Only here, never between a fork and its reply: the pidfd and the
      // start time are taken while the child cannot have been reaped.
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
    }
    if (fds[0].revents == 0) continue;
    uint8_t request = 0;
    int control = -1;
    if (!ReceiveWithFd(fd, &request, 1, &control)) return 0;  // the launcher closed its end
    ForkReply reply;
    int pidfd = -1;
    if (request == kFork && control >= 0) {
      const pid_t pid = fork();
      if (pid == 0) {
        close(reap_fd);
        BecomeShim(control, argv);
        return child();
      }
      if (pid < 0) {
        reply.error = errno;
      } else {
        ForkedShim held;
        reply.pid = pid;
        reply.error = HoldUnreapedChild(pid, &held);
        reply.start_time = held.start_time;
        pidfd = held.pidfd;
      }
    } else if (request != kPing) {
      reply.error = EINVAL;
    }
    if (control >= 0) close(control);
    const bool sent = SendWithFd(fd, &reply, sizeof(reply), reply.error == 0 ? pidfd : -1);
    if (pidfd >= 0) close(pidfd);
    if (!sent) return 0;
  }
}

int HoldUnreapedChild(pid_t pid, ForkedShim* shim) {
  shim->pid = pid;
  shim->pidfd = PidfdOpen(pid);
  int error = shim->pidfd < 0 ? errno : 0;
  auto start_time = ProcessStartTime(pid);
  if (error == 0 && !start_time.ok()) error = ESRCH;
  if (error != 0) {
    if (shim->pidfd >= 0) close(shim->pidfd);
    shim->pidfd = -1;
    kill(pid, SIGKILL);
    return error;
  }
  shim->start_time = *start_time;
  return 0;
}

Result<std::unique_ptr<ShimForkServer>> ShimForkServer::Start(const std::string& shim) {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return Internal("cannot create the shim fork server's socket: " + std::string(std::strerror(errno)));
  }
  std::string name = kShimBinary, argument = kForkServerArgument, fd = std::to_string(kServerFd);
  char* argv[] = {name.data(), argument.data(), fd.data(), nullptr};
  char* envp[] = {nullptr};  // a shim's environment is empty: the job's comes in its spec
  const pid_t pid = SpawnWithFd(shim, argv, envp, fds[1], kServerFd);
  const int err = pid < 0 ? errno : 0;
  close(fds[1]);
  if (err != 0) {
    close(fds[0]);
    return Unavailable("cannot start the shim fork server " + shim + ": " + std::strerror(err));
  }
  std::unique_ptr<ShimForkServer> server(new ShimForkServer(fds[0], pid));
  timeval timeout{kPingTimeoutSeconds, 0};
  setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const uint8_t ping = kPing;
  ForkReply reply;
  int no_fd = -1;
  if (!SendWithFd(fds[0], &ping, 1, -1) || !ReceiveWithFd(fds[0], &reply, sizeof(reply), &no_fd)) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return Unavailable("the shim fork server " + shim + " does not answer");
  }
  timeval forever{0, 0};
  setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
  return server;
}

ShimForkServer::~ShimForkServer() {
  if (fd_ >= 0) close(fd_);  // the server exits; the launcher reaps it
}

Result<ForkedShim> ShimForkServer::Fork(int control) {
  const uint8_t request = kFork;
  ForkReply reply;
  ForkedShim forked;
  if (!SendWithFd(fd_, &request, 1, control) || !ReceiveWithFd(fd_, &reply, sizeof(reply), &forked.pidfd)) {
    return Unavailable("the shim fork server exited");
  }
  if (reply.error != 0 || forked.pidfd < 0) {
    if (forked.pidfd >= 0) close(forked.pidfd);
    return Internal("the shim fork server could not fork a shim: " +
                    std::string(std::strerror(reply.error != 0 ? reply.error : EPROTO)));
  }
  forked.pid = reply.pid;
  forked.start_time = reply.start_time;
  return forked;
}

}  // namespace gpuherd::exec
