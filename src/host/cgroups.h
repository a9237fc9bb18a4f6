// Control groups: where each job runs, so that every process it starts
// (a `setsid` or double-forked one included) is ended with it, and where its
// host memory and CPU limits are enforced.
//
// Both layouts are supported, under a mount point that tests point at a
// fixture tree ("<root>/sys/fs/cgroup", see host.h):
//   v2  one hierarchy: memory.max, memory.swap.max, cpu.max, cgroup.kill (or
//       cgroup.freeze), cgroup.procs, cgroup.events ("populated 0" = empty)
//   v1  one hierarchy per controller: memory (memory.limit_in_bytes,
//       memory.memsw.limit_in_bytes), cpu (cpu.cfs_quota_us / cfs_period_us),
//       pids (membership only), freezer (freezer.state FROZEN / THAWED)
// A hybrid layout (v1 controllers and an empty cgroup2 at .../unified) is v1.
//
// Files here are written with one write() each, never created or truncated,
// as cgroupfs wants; a fixture tree provides the files a kernel would create
// and keeps what was written (O_APPEND) for a test to read back.
// Small on purpose: the static shim links it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuherd::host {

enum class CgroupVersion { kNone = 0, kV1 = 1, kV2 = 2 };

// One group (a job attempt's), named by its directories. Empty: no group.
struct Cgroup {
  CgroupVersion version = CgroupVersion::kNone;
  std::string unified;                    // v2: its directory
  std::map<std::string, std::string> v1;  // v1: controller → its directory in that hierarchy

  bool empty() const { return version == CgroupVersion::kNone; }
  // Every directory of the group (one for v2).
  std::vector<std::string> Dirs() const;
};

struct CgroupLimits {
  uint64_t memory_bytes = 0;  // RAM and swap together; 0: no limit
  int cpus = 0;               // CPU time of this many CPUs (CFS quota); 0: no limit
};

// CFS bandwidth period used for the CPU quota (the kernel's default, 100 ms).
inline constexpr int64_t kCpuPeriodUs = 100000;

// The groups of one daemon: detection at start-up, the parent group it owns,
// and the names of its job groups. Immutable after Open; thread-safe.
class Cgroups {
 public:
  // Detects the layout at `mount` (e.g. "/sys/fs/cgroup") and creates the
  // parent group `parent` (relative, e.g. "gpuherd/home-1a2b3c4d"), with the
  // controllers delegated to it on v2. Never fails: where no group can be
  // made, version() is kNone and Describe() says why. An empty `mount` means
  // containment was not asked for.
  static Cgroups Open(const std::string& mount, const std::string& parent);

  CgroupVersion version() const { return version_; }
  // The controllers in use: memory, cpu, pids (and freezer on v1).
  const std::vector<std::string>& controllers() const { return controllers_; }
  // For the log and `show`: "cgroup v1 (memory, cpu, pids, freezer) under
  // /sys/fs/cgroup/*/gpuherd/home-1a2b3c4d" or "none (cannot create
  // /sys/fs/cgroup/memory/gpuherd: Permission denied), subreaper only".
  std::string Describe() const;
  // The group called `name` under the parent (not created).
  Cgroup Child(const std::string& name) const;
  // Names of the groups now under the parent, sorted.
  std::vector<std::string> ListChildren() const;
  // Removes the parent group where no job group is left in it (the kernel
  // refuses otherwise), so that daemons of short-lived homes (tests) leave
  // nothing behind; the next Open makes it again. True when it is gone.
  bool RemoveParentIfEmpty() const;

 private:
  CgroupVersion version_ = CgroupVersion::kNone;
  std::vector<std::string> controllers_;
  std::string unified_parent_;                   // v2
  std::map<std::string, std::string> v1_parent_;  // v1: controller → parent directory
  std::string mount_, parent_;
  std::string reason_;                            // why there are none
  bool has_kill_ = false;                         // v2 cgroup.kill (Linux 5.14)
};

// Makes the group's directories (an existing one is fine) and writes its
// limits. A limit whose controller is missing is an error that names it.
Status CreateCgroup(const Cgroup& group, const CgroupLimits& limits);

// Opens, for writing, the cgroup.procs file of each of the group's
// directories (O_CLOEXEC). A process joins the group by writing "0" to each:
// the shim's child does so before exec, so the job never runs outside it.
Result<std::vector<int>> OpenJoinFiles(const Cgroup& group);
// Moves process `pid` (0: the caller) into the group.
Status JoinCgroup(const Cgroup& group, pid_t pid);

// The processes now in the group (the union over its hierarchies), sorted.
std::vector<pid_t> CgroupPids(const Cgroup& group);
// True when no live process is in the group (v2: cgroup.events
// "populated 0"; v1: every cgroup.procs empty). A missing group is empty.
bool CgroupIsEmpty(const Cgroup& group);

// Ends every process of the group and waits until it is empty, at most
// `timeout`: v2 writes cgroup.kill (or freezes, SIGKILLs each process and
// thaws where the kernel has none); v1 freezes the freezer group, SIGKILLs
// each process while none can fork, thaws it (a frozen task cannot die), and
// repeats while processes remain. DeadlineExceeded-like IoError naming the
// survivors when it is not empty in time.
Status KillCgroup(const Cgroup& group, std::chrono::milliseconds timeout);

// How many processes of the group the kernel's OOM killer ended (v2
// memory.events, v1 memory.oom_control "oom_kill"); 0 when unknown.
int64_t CgroupOomKills(const Cgroup& group);

// Removes the group's directories (the kernel refuses while processes
// remain: EBUSY). A missing directory is fine.
Status RemoveCgroup(const Cgroup& group);

// The name of an attempt's group: "job-<id>-<attempt>"; and back (false for
// any other name).
std::string JobCgroupName(int64_t job_id, int attempt);
bool ParseJobCgroupName(const std::string& name, int64_t* job_id, int* attempt);

}  // namespace gpuherd::host
