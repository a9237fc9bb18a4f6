// The daemon's file descriptors: the soft RLIMIT_NOFILE raised at start, and
// how many of them the HTTP listeners may hold as connections, so that users'
// connections can never take the descriptors that jobs' files, SQLite and the
// logs need (docs/security.md "Connection limits").
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "http/server.h"

namespace gpuherd::daemon {

// The soft limit is raised to the hard one, but not above this. Jobs get the
// limit the daemon started with back (LaunchSpec::open_files): some programs
// (MPI launchers among them) loop over every possible descriptor at start.
// The systemd unit's LimitNOFILE is the same.
constexpr uint64_t kFdLimitCap = 65536;
// Connections over the unix socket that only root and the daemon's own user
// may take, so that an admin gets in when users hold the rest.
constexpr int kAdminConnections = 8;
// The /metrics listener (--metrics-port): a scraper or two.
constexpr int kMetricsConnections = 64;
constexpr int kMetricsConnectionsPerAddress = 16;

struct FdLimit {
  uint64_t before = 0;  // the soft limit found
  uint64_t soft = 0;    // the soft limit now
  uint64_t hard = 0;
};

// Raises the soft RLIMIT_NOFILE to min(hard, kFdLimitCap); never lowers it.
Result<FdLimit> RaiseFdLimit();
// The soft RLIMIT_NOFILE in force.
uint64_t CurrentFdLimit();

struct ConnectionPlan {
  http::ConnectionLimits api;
  http::ConnectionLimits metrics;  // used only with --metrics-port
  // Set when max_connections did not fit the descriptors: says what it became.
  std::string lowered;
};

// The listeners' limits with `fd_limit` descriptors: max_connections in all
// (the metrics listener's share included), lowered when it would leave less
// than a quarter of the descriptors, and at least 512 of them, to the rest;
// per_user per uid on the socket and per address over TCP (0: none).
ConnectionPlan PlanConnections(int max_connections, int per_user, bool metrics_listener, uint64_t fd_limit,
                               uint32_t daemon_uid);

}  // namespace gpuherd::daemon
