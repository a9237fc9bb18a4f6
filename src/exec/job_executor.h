// What the job queue needs from whatever runs its jobs: start an attempt,
// signal it, re-attach to one after a daemon restart. Every end of an attempt
// comes back exactly once through the ExitCallback the implementation was
// given when it was made (the local Executor: Executor::Start; FakeExecutor:
// its constructor). The queue depends on this interface only, so it is
// unit-tested with FakeExecutor and a virtual clock, without processes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "exec/launch_spec.h"

namespace gpuherd::exec {

class JobExecutor {
 public:
  // May be called on any thread, possibly before the Launch that started the
  // attempt has returned; must not block long.
  using ExitCallback = std::function<void(ExitRecord)>;

  virtual ~JobExecutor() = default;
  // Starts the attempt; the supervisor's pid once the start is recorded so
  // that Adopt can find it again. A command that cannot run is reported
  // through the callback (kLaunchFailed), not here.
  virtual Result<int> Launch(const LaunchSpec& spec) = 0;
  // SIGTERM: a graceful stop (SIGKILL after the grace); other signals are
  // forwarded to the job. NotFound when the attempt does not run here.
  virtual Status Signal(int64_t job_id, int attempt, int signal) = 0;
  // For an attempt the store says is running: watched again when it runs,
  // its end delivered through the callback when it ended meanwhile.
  // `record_dir` is the attempt's folder in the private tree (job_trees.h):
  // nothing in a folder a user can write is trusted.
  virtual Status Adopt(int64_t job_id, int attempt, const std::string& record_dir) = 0;
  // How jobs are contained (control groups, or the supervisor alone), for
  // `show`; empty where the executor has nothing to say.
  virtual std::string containment() const { return ""; }
  // The processes now in the attempt's control group, sorted: every one the
  // job started, also those that left its session (setsid). nullopt where
  // jobs run in no group; the caller then knows them by the shim's session.
  virtual std::optional<std::vector<int>> GroupProcesses(int64_t job_id, int attempt) const {
    return std::nullopt;
  }
};

}  // namespace gpuherd::exec
