// The launcher: one small single-threaded process, spawned by the daemon from
// its own binary, that starts a shim (gpuherd-shim, see shim.h) per job.
// Starting shims from it rather than from the daemon keeps job code out of the
// daemon's process tree and the daemon's threads out of every spawn. It never
// runs job code itself; it resolves each job's user (NSS) for the shim.
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
#include "exec/shim_input.h"

namespace gpuherd::exec {

// The hidden first argument that turns the binary into the launcher.
inline constexpr char kLauncherArgument[] = "__gpuherd_launcher";

// main() calls this before anything else: when argv is
// "<program> __gpuherd_launcher <fd> <shim>" it runs the launcher and returns
// its exit status; otherwise it returns -1 at once.
int MaybeRunLauncher(int argc, char** argv);

// Where gpuherd-shim is for a launcher started from `program`: $GPUHERD_SHIM
// when set (tests, unusual installs), else beside the binary `program` names
// (symbolic links such as /proc/self/exe resolved).
std::string DefaultShimProgram(const std::string& program);

// The launcher's lookup of the user a job runs as (getpwuid, getgrouplist),
// done there because the shim is static and has no NSS. Never fails: a user
// that cannot be switched to comes back as UserSwitch::error.
UserSwitch ResolveUser(const LaunchSpec& spec);

struct LaunchedShim {
  ShimIdentity shim;
  int pidfd = -1;  // owned by the caller
};

// The daemon's end of the launcher. Thread-safe: a mutex pairs each request
// with its reply.
class LauncherClient {
 public:
  // Spawns `program` as the launcher (in a process group of its own, so a
  // Ctrl-C meant for the daemon does not reach it) and checks that it
  // answers. `shim` is the gpuherd-shim binary it starts jobs under;
  // FailedPrecondition when it is not executable.
  static Result<std::unique_ptr<LauncherClient>> Spawn(const std::string& program, const std::string& shim);
  ~LauncherClient();
  LauncherClient(const LauncherClient&) = delete;
  LauncherClient& operator=(const LauncherClient&) = delete;

  // Creates spec.record_dir, forks the shim, records it in the `shim` file, and
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
