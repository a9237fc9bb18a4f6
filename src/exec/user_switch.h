// The credentials a process switches to before it acts for a job's user, and
// the switch itself, shared by the job's child in the shim (shim.cc) and the
// child that makes a pipeline's folders (as_user.cc). Header-only: the shim
// is a static binary built from its own list of sources.
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <vector>

namespace gpuherd::exec {

// The credentials a job switches to before exec.
struct UserSwitch {
  bool needed = false;  // only when the launcher runs as root and a user was asked for
  gid_t gid = 0;
  std::optional<uid_t> uid;
  std::vector<gid_t> groups;  // supplementary groups, the primary group included
  // Non-empty when the job cannot run as asked; the shim records a failed
  // launch with this message instead of starting it.
  std::string error;
};

// Which step of SwitchToUser failed.
enum class SwitchStep { kNone, kGroups, kGid, kUid };

// Becomes `user` (nothing when !user.needed): supplementary groups first,
// then the group, then the user, since each step needs the privileges the
// next one gives up. Raw system calls: glibc's wrappers coordinate with all
// of a process's threads, and the callers are children cloned with CLONE_VM
// that may make system calls only. kNone, or the failed step with errno set.
inline SwitchStep SwitchToUser(const UserSwitch& user) {
  if (!user.needed) return SwitchStep::kNone;
  if (syscall(SYS_setgroups, user.groups.size(), user.groups.data()) != 0) return SwitchStep::kGroups;
  if (syscall(SYS_setresgid, user.gid, user.gid, user.gid) != 0) return SwitchStep::kGid;
  if (user.uid && syscall(SYS_setresuid, *user.uid, *user.uid, *user.uid) != 0) return SwitchStep::kUid;
  return SwitchStep::kNone;
}

}  // namespace gpuherd::exec
