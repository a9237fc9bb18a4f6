#include "core/state_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace gpuherd {

StateDir ResolveStateDir(const std::string& flag_value) {
  if (!flag_value.empty()) return {flag_value};
  if (const char* env = std::getenv("GPUHERD_HOME"); env && *env) return {env};
  if (geteuid() == 0) return {"/var/lib/gpuherd"};
  const char* home = std::getenv("HOME");
  return {std::string(home && *home ? home : "/tmp") + "/.local/share/gpuherd"};
}

Status EnsureStateDir(const StateDir& dir) {
  std::error_code ec;
  for (const std::string& path : {dir.root, dir.log_dir(), dir.checkpoint_dir(), dir.jobs_dir(), dir.records_dir()}) {
    std::filesystem::create_directories(path, ec);
    if (ec) {
      return IoError("cannot create state directory " + path + ": " + ec.message() +
                     "; choose another with --home or GPUHERD_HOME");
    }
  }
  // Other users may pass through (0711) to reach the socket and their own
  // jobs' checkpoint and log directories, but not list anything; the token,
  // the database and the logs are private to the daemon's user (0600/0700).
  ::chmod(dir.root.c_str(), 0711);
  ::chmod(dir.checkpoint_dir().c_str(), 0711);
  ::chmod(dir.jobs_dir().c_str(), 0711);
  ::chmod(dir.log_dir().c_str(), 0700);
  ::chmod(dir.private_dir().c_str(), 0700);
  ::chmod(dir.records_dir().c_str(), 0700);
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& content, int mode, bool sync) {
  // Every step is relative to the folder's descriptor, opened once: the
  // temporary file is new (O_EXCL) and no link is followed into it, and the
  // rename lands in that same folder even if its path changes meanwhile.
  const size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) return InvalidArgument("cannot write " + path + ": it names a folder, not a file");
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return IoError("cannot write " + path + ": cannot open " + folder + ": " + std::strerror(errno));
  // The pid keeps two writers of one path (an old and a new process) apart;
  // what is in the way under that name is a predecessor's leftover.
  const std::string tmp_name = name + ".tmp." + std::to_string(::getpid());
  const std::string tmp = folder + "/" + tmp_name;
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(dir, tmp_name.c_str(), kFlags, mode);
  if (fd < 0 && errno == EEXIST && ::unlinkat(dir, tmp_name.c_str(), 0) == 0) {
    fd = ::openat(dir, tmp_name.c_str(), kFlags, mode);
  }
  auto fail = [&](const std::string& what, int err) {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dir, tmp_name.c_str(), 0);
    ::close(dir);
    return IoError(what + ": " + std::strerror(err));
  };
  if (fd < 0) {
    const int err = errno;
    ::close(dir);
    return IoError("cannot write " + tmp + ": " + std::strerror(err));
  }
  ::fchmod(fd, mode);  // umask must not widen or narrow what the caller asked for
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("cannot write " + tmp, errno);
    }
    off += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) return fail("cannot sync " + tmp, errno);
  const int closed = ::close(fd);
  fd = -1;
  if (closed != 0) return fail("cannot write " + tmp, errno);
  if (::renameat(dir, tmp_name.c_str(), dir, name.c_str()) != 0) {
    return fail("cannot rename " + tmp + " to " + path, errno);
  }
  ::close(dir);
  return Status::Ok();
}

}  // namespace gpuherd
