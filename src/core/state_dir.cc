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
  for (const std::string& path : {dir.root, dir.log_dir(), dir.checkpoint_dir(), dir.jobs_dir()}) {
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
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& content, int mode, bool sync) {
  // The pid keeps two writers of one path (an old and a new process) apart.
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return IoError("cannot write " + tmp + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // umask must not widen or narrow what the caller asked for
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("cannot write " + tmp + ": " + std::strerror(err));
    }
    off += static_cast<size_t>(n);
  }
  if ((sync && ::fsync(fd) != 0) || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return IoError("cannot sync " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return IoError("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace gpuherd
