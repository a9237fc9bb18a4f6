// The shim: the supervisor of one job, a child forked by the launcher (no exec
// of its own). It starts a session, runs the job in a process group of its own
// with the spec's environment, directory, CPU affinity, user and log files,
// enforces the time limit, forwards SIGUSR1 to the job's group, turns SIGTERM
// into a graceful stop (SIGTERM to the group, SIGKILL after the grace), and
// writes the exit record before it exits. Being a session leader reparented to
// init, it outlives the daemon and the launcher.
#pragma once

#include "exec/launch_spec.h"

namespace gpuherd::exec {

// Runs the shim in the calling process and never returns. The caller must be
// a freshly forked, single-threaded child that has closed every descriptor it
// does not want the job to see.
[[noreturn]] void RunShim(const LaunchSpec& spec);

}  // namespace gpuherd::exec
