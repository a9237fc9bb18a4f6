#include "core/owned_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "core/safe_file.h"

namespace gpuherd {
namespace {

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

Status MakeDirsBeneath(const std::string& base, const std::string& path, const std::optional<DirOwner>& owner,
                       mode_t mode) {
  std::string_view rest(path);
  if (base.empty() || rest.size() <= base.size() + 1 || rest.substr(0, base.size()) != base ||
      rest[base.size()] != '/') {
    return InvalidArgument("cannot create " + path + ": it is not inside " + base);
  }
  rest.remove_prefix(base.size() + 1);
  UniqueFd dir(::open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return IoError("cannot open " + base + ": " + Errno(errno));
  std::string done = base;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string name(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (name.empty() || name == ".") continue;  // "a//b", "a/./b", "a/"
    if (name == "..") return InvalidArgument("cannot create " + path + ": it has a '..' component");
    done += "/" + name;
    if (::mkdirat(dir.get(), name.c_str(), mode) != 0 && errno != EEXIST) {
      return IoError("cannot create directory " + done + ": " + Errno(errno));
    }
    int next = ::openat(dir.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0) {
      if (errno == ELOOP || errno == ENOTDIR) {
        return FailedPrecondition(done + " is a symbolic link or not a directory; the daemon does not follow it");
      }
      return IoError("cannot open directory " + done + ": " + Errno(errno));
    }
    dir = UniqueFd(next);
    // Only root can give a folder away; a daemon run by a user runs every job
    // as that user, who owns what it creates.
    if (!owner || ::geteuid() != 0) continue;
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return IoError("cannot inspect " + done + ": " + Errno(errno));
    if (st.st_uid == owner->uid && st.st_gid == owner->gid) continue;
    if (st.st_uid != ::geteuid() && st.st_uid != owner->uid) {
      return PermissionDenied(done + " belongs to uid " + std::to_string(st.st_uid) + ", not to uid " +
                              std::to_string(owner->uid) + "; not taken over");
    }
    if (::fchown(dir.get(), owner->uid, owner->gid) != 0) {
      return IoError("cannot give " + done + " to uid " + std::to_string(owner->uid) + ": " + Errno(errno));
    }
  }
  return Status::Ok();
}

Status MakeHomeDirs(const StateDir& home, const std::string& path, const std::optional<DirOwner>& owner) {
  for (const std::string& base : {home.jobs_dir(), home.checkpoint_dir(), home.root + "/pipelines"}) {
    if (path.size() > base.size() + 1 && path.compare(0, base.size(), base) == 0 && path[base.size()] == '/') {
      return MakeDirsBeneath(base, path, owner);
    }
  }
  return InvalidArgument("cannot create " + path + ": not inside the jobs, checkpoints or pipelines folder of " +
                         home.root);
}

}  // namespace gpuherd
