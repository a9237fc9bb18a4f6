// The shim fork server: one gpuherd-shim process per launcher that forks a
// shim per job, so a job costs a fork of a small idle process instead of an
// exec of the shim binary. An exec pays the kernel's loading of the binary
// and glibc's start-up, whose CPU probing (CPUID) traps to the hypervisor on
// a virtual machine: 0.62 ms of CPU per bare exec on the 2-core test VM
// against 0.09 ms for a bare fork; a whole shim costs 0.3-0.4 ms less, the
// child paying copy-on-write faults instead (see docs/queue.md). The server never runs
// job code, keeps no heap to speak of, and is idle between forks, so a child
// copies only the few pages it writes. A forked child is exactly the shim of
// ShimMain: the same binary, an empty environment, default signals, and its
// control pipe on descriptor 3.
//
// The launcher talks to the server over a socketpair: a one-byte request with
// the job's control pipe attached (SCM_RIGHTS), answered by the child's pid,
// start time and an errno, with a pidfd of the child attached. The server
// opens that pidfd and reads the start time before it can reap the child, so
// neither can name a recycled pid. When the launcher's end closes, the server
// exits; running shims are not touched.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"

namespace gpuherd::exec {

// "gpuherd-shim --fork-server 3": the server, with its socket on descriptor 3.
inline constexpr char kForkServerArgument[] = "--fork-server";

// The server's loop on socket `fd`. In the server it returns 0 once the
// launcher closes its end (1 on an error of its own). In each forked child it
// returns what `child` returns, after the child's control pipe is on
// descriptor 3, every other descriptor above 2 is closed, signals are back to
// their defaults and argv reads "gpuherd-shim 3" in ps: the caller returns it
// from main() either way.
int ServeShimForks(int fd, char** argv, const std::function<int()>& child);

struct ForkedShim {
  pid_t pid = -1;
  uint64_t start_time = 0;
  int pidfd = -1;  // owned by the caller
};

// Takes the pidfd and start time of `pid`, an unreaped child of the caller, so
// that neither can name a recycled pid; fills `shim` and returns 0. Without
// both nobody could watch it: the child (which waits for its go byte and has
// run nothing) is killed, no descriptor is left open, and an errno returns.
int HoldUnreapedChild(pid_t pid, ForkedShim* shim);

// The launcher's end of one fork server. Not thread-safe: the launcher is
// single-threaded. The launcher reaps the server (it is its child).
class ShimForkServer {
 public:
  // Starts `shim` as a fork server and checks that it answers (a binary
  // without the server exits on the unknown argument).
  static Result<std::unique_ptr<ShimForkServer>> Start(const std::string& shim);
  ~ShimForkServer();
  ShimForkServer(const ShimForkServer&) = delete;
  ShimForkServer& operator=(const ShimForkServer&) = delete;

  // Forks a shim whose control pipe is `control` (the caller keeps its copy).
  // Unavailable when the server is gone; Internal when the fork failed.
  Result<ForkedShim> Fork(int control);
  pid_t pid() const { return pid_; }

 private:
  ShimForkServer(int fd, pid_t pid) : fd_(fd), pid_(pid) {}

  int fd_;
  pid_t pid_;
};

}  // namespace gpuherd::exec
