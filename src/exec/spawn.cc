#include "exec/spawn.h"

#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>

extern char** environ;

namespace gpuherd::exec {

pid_t SpawnWithFd(const std::string& program, char* const argv[], char* const envp[], int fd, int as_fd,
                  bool own_group) {
  // dup2 onto another number is what clears close-on-exec in the child
  // only: a descriptor already at `as_fd` is moved first.
  int moved = -1;
  if (fd == as_fd) {
    moved = fcntl(fd, F_DUPFD_CLOEXEC, as_fd + 1);
    if (moved < 0) return -1;
    fd = moved;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd, as_fd);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &all);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (own_group) {
    posix_spawnattr_setpgroup(&attributes, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attributes, flags);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, program.c_str(), &actions, &attributes, argv, envp != nullptr ? envp : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (moved >= 0) close(moved);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

}  // namespace gpuherd::exec
