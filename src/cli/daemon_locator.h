// Which daemon a command talks to. --home and $GPUHERD_HOME name one;
// otherwise a user's own daemon (~/.local/share/gpuherd, /var/lib/gpuherd
// for root) when it answers, else the machine's system daemon when it
// answers on one of its fixed sockets, so that the users of a lab reach the
// lab's daemon without setting anything.
#pragma once

#include <string>
#include <vector>

#include "core/state_dir.h"

namespace gpuherd::cli {

// Where the system daemon (the systemd unit, deploy/gpuherd.service) listens,
// in the order tried, and its state directory: /run/gpuherd/gpuherd.sock,
// then /var/lib/gpuherd/gpuherd.sock, home /var/lib/gpuherd. With
// $GPUHERD_SYSTEM_ROOT (a relocated install, tests) these lie below it.
struct SystemDaemonPaths {
  std::vector<std::string> sockets;
  std::string home;
};
SystemDaemonPaths SystemPaths();

struct DaemonLocation {
  StateDir dir;
  // "--home", "GPUHERD_HOME", "own" (this user's default home), "system".
  std::string found_by;
  std::string Describe() const;  // for `status`: "the system daemon (you run none of your own)"
};

// Whether a daemon accepts a connection on the unix socket `path`.
bool SocketAnswers(const std::string& path);

DaemonLocation LocateDaemon(const std::string& home_flag, const SystemDaemonPaths& system);

}  // namespace gpuherd::cli
