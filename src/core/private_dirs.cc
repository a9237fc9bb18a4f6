#include "core/private_dirs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gpuherd {
namespace {

std::string Errno(int err) { return std::strerror(err); }

std::string ModeText(mode_t mode) {
  char octal[8];
  std::snprintf(octal, sizeof(octal), "%04o", static_cast<unsigned>(mode & 07777));
  return octal;
}


// Why the folder `st` describes may not hold what the daemon trusts; empty
// when it may. `last` is the folder itself rather than one on the way.
std::string Untrusted(const struct stat& st, bool last) {
  const uid_t me = ::geteuid();
  if (!S_ISDIR(st.st_mode)) return "is not a folder";
  if (st.st_uid != 0 && st.st_uid != me) return "belongs to uid " + std::to_string(st.st_uid);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) == 0) return "";
  // /tmp: others may add entries but not rename or remove root's. The
  // private folder itself is never shared like that.
  if (!last && (st.st_mode & S_ISVTX) != 0 && st.st_uid == 0) return "";
  return "may be written by other users (mode " + ModeText(st.st_mode) + ")";
}

}  // namespace

Result<UniqueFd> OpenPrivateDir(const std::string& path) {
  if (path.empty() || path[0] != '/') return InvalidArgument("'" + path + "' is not an absolute folder path");
  std::vector<std::string> names;
  if (path.size() > 1 && !SplitRelativePath(path.substr(1), &names)) {
    return InvalidArgument("'" + path + "' is not a plain absolute folder path (no '.', '..' or '//')");
  }
  UniqueFd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return IoError("cannot open /: " + Errno(errno));
  std::string done;
  for (size_t i = 0; i <= names.size(); ++i) {
    if (i > 0) {
      done += "/" + names[i - 1];
      UniqueFd next(::openat(dir.get(), names[i - 1].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (next.get() < 0) {
        const int err = errno;
        if (err == ENOENT) return NotFound(done + " does not exist");
        if (err == ELOOP || err == ENOTDIR) return PermissionDenied(done + " is a symbolic link or not a folder");
        if (err == EMFILE || err == ENFILE) return Unavailable("cannot open " + done + ": " + Errno(err));
        return IoError("cannot open " + done + ": " + Errno(err));
      }
      dir = std::move(next);
    }
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return IoError("cannot inspect " + (done.empty() ? "/" : done) + ": " + Errno(errno));
    if (std::string why = Untrusted(st, i == names.size()); !why.empty()) {
      return PermissionDenied((done.empty() ? std::string("/") : done) + " " + why +
                              "; the daemon keeps its own records only in folders no other user can change");
    }
  }
  return dir;
}

Result<UniqueFd> MakePrivateDirs(int base, const std::string& base_name, const std::string& relative, mode_t mode) {
  std::vector<std::string> names;
  if (!SplitRelativePath(relative, &names)) {
    return InvalidArgument("'" + relative + "' is not a plain relative path below " + base_name);
  }
  int at = base;
  UniqueFd held;
  std::string done = base_name;
  for (const std::string& name : names) {
    done += "/" + name;
    if (::mkdirat(at, name.c_str(), mode) != 0 && errno != EEXIST) {
      const int err = errno;
      if (err == EMFILE || err == ENFILE) return Unavailable("cannot create " + done + ": " + Errno(err));
      return IoError("cannot create " + done + ": " + Errno(err));
    }
    UniqueFd next(::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0) {
      const int err = errno;
      if (err == ELOOP || err == ENOTDIR) return PermissionDenied(done + " is a symbolic link or not a folder");
      if (err == EMFILE || err == ENFILE) return Unavailable("cannot open " + done + ": " + Errno(err));
      return IoError("cannot open " + done + ": " + Errno(err));
    }
    struct stat st {};
    if (::fstat(next.get(), &st) != 0) return IoError("cannot inspect " + done + ": " + Errno(errno));
    if (st.st_uid != ::geteuid()) {
      return PermissionDenied(done + " belongs to uid " + std::to_string(st.st_uid) + ", not to the daemon's user");
    }
    if (std::string why = Untrusted(st, true); !why.empty()) return PermissionDenied(done + " " + why);
    held = std::move(next);
    at = held.get();
  }
  return held;
}

}  // namespace gpuherd
