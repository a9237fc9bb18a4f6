#include "daemon/fd_budget.h"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpuherd::daemon {

Result<FdLimit> RaiseFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return IoError(std::string("cannot read the open-files limit (RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  FdLimit result;
  result.before = limit.rlim_cur;
  result.hard = limit.rlim_max;
  uint64_t wanted = std::min<uint64_t>(limit.rlim_max, kFdLimitCap);
  if (wanted > limit.rlim_cur) {
    limit.rlim_cur = wanted;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      return IoError("cannot raise the open-files limit (RLIMIT_NOFILE) from " + std::to_string(result.before) +
                     " to " + std::to_string(wanted) + ": " + std::strerror(errno));
    }
  }
  result.soft = limit.rlim_cur;
  return result;
}

uint64_t CurrentFdLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;  // the usual default; errors do not happen here
  return limit.rlim_cur;
}

ConnectionPlan PlanConnections(int max_connections, int per_user, bool metrics_listener, uint64_t fd_limit,
                               uint32_t daemon_uid) {
  // Head-room for everything else the daemon opens: a quarter, and at least
  // 512 (half of a small limit).
  uint64_t headroom = std::max<uint64_t>(std::min<uint64_t>(512, fd_limit / 2), fd_limit / 4);
  uint64_t budget = fd_limit - headroom;

  ConnectionPlan plan;
  uint64_t wanted = static_cast<uint64_t>(std::max(max_connections, 0));
  uint64_t total = std::min(wanted, budget);
  if (total < wanted) {
    plan.lowered = "--max-connections " + std::to_string(wanted) + " lowered to " + std::to_string(total) +
                   ": the daemon may open " + std::to_string(fd_limit) + " files and keeps " +
                   std::to_string(headroom) + " of them for jobs, its database and logs";
  }
  if (metrics_listener) {
    plan.metrics.total = static_cast<int>(std::min<uint64_t>(kMetricsConnections, total / 4));
    plan.metrics.per_address = std::min(kMetricsConnectionsPerAddress, plan.metrics.total);
    plan.metrics.per_user = 0;
    plan.metrics.reserved = 0;
    plan.metrics.reserved_for.clear();
    total -= static_cast<uint64_t>(plan.metrics.total);
  }
  plan.api.total = static_cast<int>(total);
  plan.api.per_user = per_user;
  plan.api.per_address = per_user;
  // Fewer than the total, so that some connections remain for users.
  plan.api.reserved = std::min(kAdminConnections, plan.api.total / 2);
  plan.api.reserved_for = {0};
  if (daemon_uid != 0) plan.api.reserved_for.push_back(daemon_uid);
  return plan;
}

}  // namespace gpuherd::daemon
