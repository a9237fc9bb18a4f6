// The launcher: one small single-threaded process, spawned by the daemon from
// its own binary, that forks a shim per job. Forking it rather than the daemon
// keeps each launch cheap (a small address space, no threads) and keeps job
// code out of the daemon's process tree. It never runs job code itself.
//
// The daemon and the launcher talk over a socketpair: length-prefixed frames,
// a JSON launch request one way, the shim's pid and start time the other, with
// a pidfd of the shim attached (SCM_RIGHTS). The launcher opens that pidfd
// while the shim is its unreaped child, so the daemon can never watch or
// signal a recycled pid. When the daemon's end closes (shutdown, or the daemon
// was killed) the launcher exits; running shims are not touched.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>

#include "core/status.h"
#include "exec/job_files.h"
#include "exec/launch_spec.h"

namespace gpuherd::exec {

// The hidden first argument that turns the binary into the launcher.
inline constexpr char kLauncherArgument[] = "__gpuherd_launcher";

// main() calls this before anything else: when argv is
// "<program> __gpuherd_launcher <fd>" it runs the launcher and returns its
// exit status; otherwise it returns -1 at once.
int MaybeRunLauncher(int argc, char** argv);

struct LaunchedShim {
  ShimIdentity shim;
  int pidfd = -1;  // owned by the caller
};

// The daemon's end of the launcher. Thread-safe: a mutex pairs each request
// with its reply.
class LauncherClient {
 public:
  // Spawns `program` as the launcher (in a process group of its own, so a
  // Ctrl-C meant for the daemon does not reach it) and checks that it answers.
  static Result<std::unique_ptr<LauncherClient>> Spawn(const std::string& program);
  ~LauncherClient();
  LauncherClient(const LauncherClient&) = delete;
  LauncherClient& operator=(const LauncherClient&) = delete;

  // Creates spec.dir, forks the shim, records it in the `shim` file, and
  // returns once the shim may start the job. Unavailable when the launcher
  // is gone; the caller may Spawn a new one.
  Result<LaunchedShim> Launch(const LaunchSpec& spec);
  // False once the launcher is known to be gone (its end of the socket closed).
  bool alive() const;
  pid_t pid() const { return pid_; }
  // Closes the socket (the launcher exits) and reaps the launcher.
  void Close();

 private:
  LauncherClient(int fd, pid_t pid) : fd_(fd), pid_(pid) {}
  // Sends one frame and reads the reply; `pidfd` receives an attached descriptor.
  Status Call(uint8_t type, const std::string& payload, int* pid, uint64_t* start_time, int* pidfd);

  mutable std::mutex mu_;
  int fd_;
  pid_t pid_;
  bool broken_ = false;
};

}  // namespace gpuherd::exec
