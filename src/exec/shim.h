// The shim: the supervisor of one job, `gpuherd-shim`, a small static binary
// the launcher starts per job (as containerd starts containerd-shim). It
// starts a session, runs the job in a process group of its own with the
// spec's environment, directory, CPU affinity, user and log files, enforces
// the time limit, forwards SIGUSR1 to the job's group, turns SIGTERM into a
// graceful stop (SIGTERM to the group, SIGKILL after the grace), and writes the
// exit record before it exits. Being a session leader reparented to init, it
// outlives the daemon and the launcher.
//
// A separate binary rather than a fork of the launcher: a forked copy of the
// launcher pays a copy-on-write fault (and, on a VM, a TLB shootdown) for
// every page of its heap it or the launcher touches, which cost more than the
// job `true` itself. Shims are forked by a fork server of this small binary
// instead (see shim_fork_server.h), or exec'd one by one where it cannot run.
#pragma once

namespace gpuherd::exec {

// The file name of the shim binary, installed beside gpuherd-daemon.
inline constexpr char kShimBinary[] = "gpuherd-shim";

// main() of gpuherd-shim: "gpuherd-shim 3", with its control pipe (see
// shim_input.h) on descriptor 3. Returns the process's exit status: 0 when
// the exit record was written, 1 when the launch was cancelled or the input
// was unreadable, 2 on bad usage. "gpuherd-shim --fork-server 3" runs the fork
// server, whose children continue as "gpuherd-shim 3" does.
int ShimMain(int argc, char** argv);

}  // namespace gpuherd::exec
