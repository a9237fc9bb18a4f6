// Making a job's or a pipeline's folders without following a path that a
// user controls. The daemon runs as root, and a job's user owns some of the
// folders on the way (a pipeline's run folder, a job's folder): a symbolic
// link planted there must not make root create or chown a directory
// elsewhere. So every folder is made and opened relative to the descriptor
// of its parent (mkdirat, then openat with O_NOFOLLOW | O_DIRECTORY), and
// given to its owner with fchown on the descriptor held, never by path.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/state_dir.h"
#include "core/status.h"

namespace gpuherd {

struct DirOwner {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

// Creates `path` and the folders between `base` and it. `base` must exist
// and is trusted (opened as given); `path` must be `base` + "/" + relative
// components, none of them ".." (empty and "." ones are skipped). A component that is a symbolic link
// or not a directory is refused (FailedPrecondition), not followed. With
// `owner`, every folder below `base` on the way is given to it; one that
// already belongs to a third user is refused (PermissionDenied).
Status MakeDirsBeneath(const std::string& base, const std::string& path, const std::optional<DirOwner>& owner,
                       mode_t mode = 0755);

// MakeDirsBeneath with the folder of `home` that holds `path` as the base:
// jobs/, checkpoints/ or pipelines/. A path outside them is refused.
Status MakeHomeDirs(const StateDir& home, const std::string& path, const std::optional<DirOwner>& owner);

}  // namespace gpuherd
