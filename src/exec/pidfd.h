// pidfd system calls. glibc 2.36 declares them in <sys/pidfd.h> without
// extern "C", so C++ cannot link against those declarations; these call the
// kernel directly (Linux 5.3+).
#pragma once

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <csignal>

namespace gpuherd::exec {

// A descriptor that refers to process `pid` for as long as it is open, even
// after the pid is reused; readable once the process has exited.
inline int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

inline int PidfdSendSignal(int pidfd, int signal) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

}  // namespace gpuherd::exec
