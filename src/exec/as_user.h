// Acting as a job's user (exec/job_trees.h, rule 3): the daemon makes folders
// inside a user's tree (a pipeline run's workspaces, artifacts and
// checkpoint folders) in a short-lived child that has become that user, so
// the kernel checks the user's permissions and whatever the user planted
// there leads nowhere the user could not go anyway.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "exec/shim_input.h"

namespace gpuherd::exec {

// The user a job runs as, resolved as the launcher resolves it (passwd and
// group lookups): for MakeDirsAsUser. `needed` is false for a process that
// is not root (it acts as itself) or when no uid is given.
UserSwitch UserFor(std::optional<uint32_t> uid, std::optional<uint32_t> gid);

// Makes each of `relative` ("a/b/c": plain names, no "." or "..") below the
// folder `base` with `mode`, parents first, as `user`, without following a
// symbolic link at any level below `base`. Folders that exist are taken.
// Safe from a multi-threaded process: the child shares the caller's memory
// (clone with CLONE_VM | CLONE_VFORK, as posix_spawn does) and makes only
// system calls. InvalidArgument for a bad path; the error of the first
// folder that could not be made otherwise, named.
Status MakeDirsAsUser(const std::string& base, const std::vector<std::string>& relative, const UserSwitch& user,
                      mode_t mode = 0755);

}  // namespace gpuherd::exec
