// Who may reach the API, and what of a job a caller may read.
//
// Host checking stops DNS rebinding: a web page whose name is re-pointed at
// 127.0.0.1 makes the browser send its requests to the daemon, but with the
// page's own name in Host. Over TCP only Host values that name this machine
// are served: localhost, an IP address written as such (a browser sends one
// only when the page itself was opened by that address, which no rebinding
// can do), the machine's hostname, and names the operator allows
// (--allow-host). The unix socket has no browser behind it and is not checked.
//
// A job's command, environment, logs and metric lines are its owner's: they
// are shown to the owner (peer credentials on the unix socket) and to admins
// (root, the daemon's user, the admin group, or the API token). Everything
// else about a job (state, GPUs, times, reason) stays readable by all.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/caller.h"
#include "http/server.h"

namespace gpuherd::daemon::routes {

// The names accepted in Host (lower-cased, without a port): "localhost",
// `hostname`, and `extra` (--allow-host).
std::vector<std::string> AllowedHosts(const std::string& hostname, const std::vector<std::string>& extra);

// A 421 response when a TCP request's Host does not name this machine (or 400
// when there is none); nullopt when it may be served.
std::optional<http::Response> CheckHost(const http::Request& request, const std::vector<std::string>& allowed);

// Whether `caller` may read the command, environment, logs and metrics of a
// job that `job_user` submitted.
bool MaySeeJobInternals(const Caller& caller, const std::string& job_user);

// Removes the command, environment and logs folder from one job's JSON.
void HideJobInternals(nlohmann::json& job);

// kUnauthenticated (over TCP, without the token) or kPermissionDenied that
// says how to read what `what` ("the logs of job 7") holds.
Status JobInternalsRefused(const Caller& caller, const std::string& what);

}  // namespace gpuherd::daemon::routes
