// Starting a helper program of gpuherd's own (the launcher, the shim, the
// shim fork server) with one descriptor handed over: the one place where
// posix_spawn's attributes are set.
#pragma once

#include <sys/types.h>

#include <string>

namespace gpuherd::exec {

// Starts `program` with `argv` and `envp` (nullptr: this process's
// environment). In the child `fd` is descriptor `as_fd` (without
// close-on-exec, even when fd == as_fd), no signal is blocked and every signal
// has its default action; with `own_group` it leads a process group of its
// own. Every other descriptor the caller opened close-on-exec stays behind.
// vfork semantics (posix_spawn): no page tables are copied and no
// copy-on-write fault follows in the caller. Returns the pid, or -1 with
// errno set.
pid_t SpawnWithFd(const std::string& program, char* const argv[], char* const envp[], int fd, int as_fd,
                  bool own_group = false);

}  // namespace gpuherd::exec
