// What the local executor is asked to run (LaunchSpec) and what it reports
// when a run ends (ExitRecord). Plain values; no I/O here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "host/cgroups.h"

namespace gpuherd::exec {

struct LaunchSpec {
  int64_t job_id = 0;
  int attempt = 0;
  // argv[0] is looked up in the PATH of `env` (or a default PATH when `env`
  // has none) unless it contains a '/'.
  std::vector<std::string> argv;
  std::string cwd;  // empty: output_dir
  // The job's whole environment: nothing of the daemon's own environment leaks
  // into a job. The caller adds the job protocol's variables.
  std::map<std::string, std::string> env;
  // The two folders of an attempt (exec/job_trees.h says who owns which):
  // record_dir, in the daemon's private tree (<base>/<job id>/<attempt>),
  // made by the launcher, holds what the daemon trusts: `shim`, `exit`,
  // `exit.reserved` (job_files.h). output_dir, in the job's user's tree,
  // is made by the job's own process after it became the job's user, and
  // holds `stdout`, `stderr` and the fence's files; its parent must exist.
  std::string record_dir;
  std::string output_dir;
  // Run as this user and group; only possible when the launcher runs as root.
  std::optional<uint32_t> uid, gid;
  std::vector<int> cpus;      // CPU affinity; empty: inherit the launcher's
  DurationMs time_limit = 0;  // 0: none
  DurationMs grace = 30 * kSecondMs;  // SIGTERM → SIGKILL
  // Containment (docs/queue.md "Containment"): the attempt's control group, which
  // the shim creates with these limits and the job joins before exec. Empty:
  // none can be written here; the shim, a child subreaper, still ends every
  // descendant. The executor fills it in.
  host::Cgroup cgroup;
  host::CgroupLimits limits;  // --mem and --cpus
  // The job's soft open-files limit (RLIMIT_NOFILE); 0: what the shim has.
  // The daemon raises its own for connections; jobs get the machine's usual
  // one back, since some programs loop over every possible descriptor.
  uint64_t open_files = 0;
};

struct ExitRecord {
  enum class How {
    kExited,        // the job exited by itself: `code`
    kSignaled,      // a signal nobody here sent ended it: `signal`
    kTimeLimit,     // the time limit ended it (SIGTERM, then SIGKILL after the grace)
    kStopped,       // a stop request (Executor::Signal with SIGTERM) ended it
    kLaunchFailed,  // the command never ran: `message` says why
    kShimLost,      // the supervisor died without recording an exit status
  };
  int64_t job_id = 0;
  int attempt = 0;
  How how = How::kExited;
  int code = 0;    // exit code when the job exited (also for kTimeLimit/kStopped)
  int signal = 0;  // the signal that ended the job, 0 if none
  TimeMs started = 0, ended = 0;
  std::string message;  // for people: "exited with code 3", "cannot run 'x': ..."
  // The kernel's OOM killer ended a process of the job at its memory limit
  // (`message` says so).
  bool out_of_memory = false;
};

// "exited", "signaled", "time_limit", "stopped", "launch_failed", "shim_lost".
inline const char* HowName(ExitRecord::How how) {
  switch (how) {
    case ExitRecord::How::kExited: return "exited";
    case ExitRecord::How::kSignaled: return "signaled";
    case ExitRecord::How::kTimeLimit: return "time_limit";
    case ExitRecord::How::kStopped: return "stopped";
    case ExitRecord::How::kLaunchFailed: return "launch_failed";
    case ExitRecord::How::kShimLost: return "shim_lost";
  }
  return "unknown";
}

}  // namespace gpuherd::exec
