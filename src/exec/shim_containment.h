// How the shim contains its job (docs/queue.md "Containment"): the job runs in its
// own control group, created here with its --mem and --cpus limits and joined
// by the job's child before exec, and ended as a whole (freeze, kill, wait
// until empty) when the job's main process ends, is stopped or runs out of
// time. Without a control group, the shim is a child subreaper: a descendant
// that escapes with setsid or a double fork is reparented to the shim, not to
// init, so walking down from the shim still finds and ends it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "exec/launch_spec.h"

namespace gpuherd::exec {

class ShimContainment {
 public:
  explicit ShimContainment(const LaunchSpec& spec) : spec_(spec) {}
  ~ShimContainment() { CloseJoinFiles(); }
  ShimContainment(const ShimContainment&) = delete;
  ShimContainment& operator=(const ShimContainment&) = delete;

  // Before the job starts: makes the shim a child subreaper, creates the
  // job's control group with its limits and opens the files through which
  // the child joins it. Empty when ready, else why the job cannot run.
  std::string Prepare();
  // The descriptors the job's child writes "0" to before exec; closed by
  // CloseJoinFiles once the child has exec'd or failed.
  const std::vector<int>& join_fds() const { return join_fds_; }
  void CloseJoinFiles();

  // Sends `sig` to the processes of the job's control group that are not in
  // the process group `job_group` (which the shim signals itself): a stop
  // reaches escaped processes too. Nothing without a control group.
  void SignalEscaped(pid_t job_group, int sig) const;
  // Ends every process of the job and waits until they are gone: the whole
  // control group, or every live descendant of the shim without one. `main`,
  // the job's main process, is never reaped here. Empty, or what survived.
  std::string KillAll(pid_t main);
  // Reaps the shim's exited children other than `main` (orphans of the job
  // reparented to it) without waiting; main < 0 reaps every one.
  static void ReapOrphans(pid_t main);
  // Processes of the job the kernel's OOM killer ended at its memory limit.
  int64_t OomKills() const;
  // Removes the control group once it is empty. Empty, or why it could not.
  std::string Remove();

 private:
  const LaunchSpec& spec_;
  std::vector<int> join_fds_;
  bool created_ = false;
};

// In the job's child between clone and exec (system calls only): joins the
// control group through the prepared files. Returns 0 or an errno.
int JoinPreparedCgroup(const std::vector<int>& fds);

}  // namespace gpuherd::exec
