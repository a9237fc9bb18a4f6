#include "exec/command_runner.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace gpuherd::exec {
namespace {

class ProcessRunner : public CommandRunner {
 public:
  Result<CommandResult> Run(const CommandRequest& request) override {
    if (request.argv.empty()) return InvalidArgument("no command to run");
    // Everything the child needs is built before fork: after it, only
    // async-signal-safe calls (the daemon has threads).
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
      const char* eq = std::strchr(*e, '=');
      if (eq) env[std::string(*e, static_cast<size_t>(eq - *e))] = eq + 1;
    }
    for (const auto& [k, v] : request.env) env[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = request.argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]), ::close(in[1]);
      return IoError(std::string("pipe: ") + std::strerror(errno));
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(in[0]), ::close(in[1]), ::close(out[0]), ::close(out[1]);
      return IoError(std::string("pipe: ") + std::strerror(errno));
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
      return IoError(std::string("fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::setpgid(0, 0);  // a timeout kills the command's whole group
      // The daemon blocks SIGINT/SIGTERM and ignores SIGPIPE; the command must not.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::signal(SIGPIPE, SIG_DFL);
      if (request.gid && (::setgroups(0, nullptr) != 0 || ::setgid(*request.gid) != 0)) ::_exit(126);
      if (request.uid && ::setuid(*request.uid) != 0) ::_exit(126);
      ::execvpe(argv[0], argv.data(), envp.data());
      ::_exit(errno == ENOENT ? 127 : 126);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);

    CommandResult result;
    size_t written = 0;
    int in_fd = in[1];
    if (request.stdin_text.empty()) {
      ::close(in_fd);
      in_fd = -1;
    } else {
      ::fcntl(in_fd, F_SETFL, O_NONBLOCK);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(request.timeout);
    bool timed_out = false;
    int open_fds = 2;
    char buf[16384];
    while (open_fds > 0 || in_fd >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      pollfd fds[3] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in_fd, POLLOUT, 0}};
      int n = ::poll(fds, 3, static_cast<int>(left.count()));
      if (n < 0 && errno != EINTR) break;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t got = ::read(fds[i].fd, buf, sizeof(buf));
        if (got > 0) {
          (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(got));
        } else if (got == 0 || errno != EINTR) {
          ::close(fds[i].fd);
          (i == 0 ? out[0] : err[0]) = -1;
          --open_fds;
        }
      }
      if (in_fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
        ssize_t put = ::write(in_fd, request.stdin_text.data() + written, request.stdin_text.size() - written);
        if (put > 0) written += static_cast<size_t>(put);
        if (put < 0 && errno != EAGAIN && errno != EINTR) written = request.stdin_text.size();
        if (written >= request.stdin_text.size()) {
          ::close(in_fd);
          in_fd = -1;
        }
      }
    }
    if (in_fd >= 0) ::close(in_fd);
    if (out[0] >= 0) ::close(out[0]);
    if (err[0] >= 0) ::close(err[0]);
    if (timed_out) ::kill(-pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
      return Unavailable("'" + request.argv[0] + "' did not finish within " + std::to_string(request.timeout / 1000) +
                         " s");
    }
    if (WIFEXITED(status)) {
      result.exit_code = WEXITSTATUS(status);
      if (result.exit_code == 127 && result.out.empty() && result.err.empty()) {
        return NotFound("'" + request.argv[0] + "' not found in PATH");
      }
    } else {
      result.exit_code = 128 + WTERMSIG(status);
    }
    return result;
  }
};

}  // namespace

std::unique_ptr<CommandRunner> NewProcessRunner() { return std::make_unique<ProcessRunner>(); }

}  // namespace gpuherd::exec
