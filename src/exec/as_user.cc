#include "exec/as_user.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "core/safe_file.h"

namespace gpuherd::exec {
namespace {

// Everything the child needs, made before it is cloned: it shares the
// caller's memory and may only make system calls.
struct Work {
  const UserSwitch* user = nullptr;
  const char* base = nullptr;
  std::vector<std::vector<std::string>> paths;  // the names of each path
  mode_t mode = 0755;
  // Set by the child when it fails: which step, which path, the errno.
  enum Stage { kNone, kUser, kBase, kMake, kOpen } failed = kNone;
  size_t failed_path = 0;
  size_t failed_depth = 0;
  int error = 0;
};

constexpr size_t kStackSize = 64 * 1024;

int Child(void* arg) {
  auto* w = static_cast<Work*>(arg);
  auto fail = [w](Work::Stage stage, int error) {
    w->failed = stage;
    w->error = error;
    _exit(1);
  };
  if (SwitchToUser(*w->user) != SwitchStep::kNone) fail(Work::kUser, errno);
  const int base = open(w->base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (base < 0) fail(Work::kBase, errno);
  for (size_t p = 0; p < w->paths.size(); ++p) {
    int at = base;
    w->failed_path = p;
    for (size_t d = 0; d < w->paths[p].size(); ++d) {
      w->failed_depth = d;
      const char* name = w->paths[p][d].c_str();
      if (mkdirat(at, name, w->mode) != 0 && errno != EEXIST) fail(Work::kMake, errno);
      const int next = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0) fail(Work::kOpen, errno);
      if (at != base) close(at);
      at = next;
    }
    if (at != base) close(at);
  }
  _exit(0);
}


}  // namespace

UserSwitch UserFor(std::optional<uint32_t> uid, std::optional<uint32_t> gid) {
  UserSwitch user;
  if (!uid && !gid) return user;
  std::string who = "uid " + (uid ? std::to_string(*uid) : std::string("-")) + " gid " +
                    (gid ? std::to_string(*gid) : std::string("-"));
  if (geteuid() != 0) {
    if ((uid && *uid != geteuid()) || (gid && *gid != getegid())) {
      user.error = "cannot run as " + who + ": only a launcher running as root can switch users";
    }
    return user;
  }
  // getpwuid_r: the daemon calls this from its threads.
  struct passwd entry {};
  struct passwd* pw = nullptr;
  std::vector<char> buffer(16384);
  if (uid) getpwuid_r(*uid, &entry, buffer.data(), buffer.size(), &pw);
  if (gid) {
    user.gid = *gid;
  } else if (pw != nullptr) {
    user.gid = pw->pw_gid;
  } else {
    user.error = "cannot run as " + who + ": no group given and the uid has no passwd entry";
    return user;
  }
  user.groups = {user.gid};
  if (pw != nullptr) {
    int count = 0;
    getgrouplist(pw->pw_name, user.gid, nullptr, &count);
    user.groups.resize(static_cast<size_t>(std::max(count, 1)));
    if (getgrouplist(pw->pw_name, user.gid, user.groups.data(), &count) < 0) {
      user.error = "cannot list the groups of " + std::string(pw->pw_name);
      return user;
    }
    user.groups.resize(static_cast<size_t>(count));
  }
  user.needed = true;
  user.uid = uid;
  return user;
}

Status MakeDirsAsUser(const std::string& base, const std::vector<std::string>& relative, const UserSwitch& user,
                      mode_t mode) {
  if (!user.error.empty()) return PermissionDenied(user.error);
  Work work;
  work.user = &user;
  work.base = base.c_str();
  work.mode = mode;
  for (const std::string& path : relative) {
    std::vector<std::string> names;
    if (!SplitRelativePath(path, &names)) return InvalidArgument("'" + path + "' is not a plain relative path below " + base);
    work.paths.push_back(std::move(names));
  }
  if (work.paths.empty()) return Status::Ok();
  // Left uninitialized: zeroing it would fault in every page for nothing.
  std::unique_ptr<char[]> stack(new char[kStackSize]);
  // No handler of the caller's may run in the child (posix_spawn does the same).
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  const pid_t pid = clone(Child, stack.get() + kStackSize, CLONE_VM | CLONE_VFORK | SIGCHLD, &work);
  const int clone_error = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = clone_error;
  if (pid < 0) return Internal(std::string("cannot start a process as the job's user: ") + std::strerror(errno));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (work.failed == Work::kNone && WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  const std::string who = user.uid ? " as uid " + std::to_string(*user.uid) : std::string();
  const std::string error = std::strerror(work.error);
  std::string where = base;
  if (work.failed == Work::kMake || work.failed == Work::kOpen) {
    const auto& names = work.paths[work.failed_path];
    for (size_t d = 0; d <= work.failed_depth && d < names.size(); ++d) where += "/" + names[d];
  }
  switch (work.failed) {
    case Work::kUser: return PermissionDenied("cannot become the job's user" + who + ": " + error);
    case Work::kBase: return PermissionDenied("cannot open " + where + who + ": " + error);
    case Work::kMake: return IoError("cannot create " + where + who + ": " + error);
    case Work::kOpen:
      if (work.error == ELOOP || work.error == ENOTDIR) {
        return PermissionDenied(where + " is a symbolic link or not a folder; it is not followed");
      }
      return IoError("cannot open " + where + who + ": " + error);
    case Work::kNone: break;
  }
  return Internal("the process making folders" + who + " in " + base + " ended abnormally");
}

}  // namespace gpuherd::exec
