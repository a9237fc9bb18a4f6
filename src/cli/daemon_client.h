// The CLI's view of a running daemon: JSON over the unix socket in the state
// directory. Errors come back as Status with the daemon's own message.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "http/client.h"
#include "core/state_dir.h"
#include "core/status.h"

namespace gpuherd::cli {

// A value for a query string ("?model=..."): everything but unreserved
// characters (RFC 3986) percent-escaped.
std::string QueryEscape(const std::string& text);

class DaemonClient {
 public:
  // $GPUHERD_CLIENT_TIMEOUT (a duration such as 30s) replaces the default
  // timeout of 10 s.
  explicit DaemonClient(StateDir dir, DurationMs timeout = kDefaultTimeoutMs);
  static constexpr DurationMs kDefaultTimeoutMs = 10000;

  // True when a daemon answers /v1/health on this state directory.
  bool Reachable();
  Result<nlohmann::json> Get(const std::string& target);
  // Sends the API token from the state directory where this user can read it;
  // otherwise the daemon acts on the caller's own rights (peer credentials).
  // Every POST carries a fresh Idempotency-Key; when no answer comes (a
  // timeout, a dropped connection) it is sent once more with the same key,
  // so the daemon acts on it at most once.
  Result<nlohmann::json> Post(const std::string& target, const nlohmann::json& body);

 private:
  Result<nlohmann::json> Decode(const Result<http::ClientResponse>& response, const std::string& target);

  StateDir dir_;
  http::Client http_;
};

// A failure to connect because no daemon listens, said as such and as how to
// start one; any other status as it is.
Status SaidAsNoDaemon(const StateDir& dir, const Status& status);

}  // namespace gpuherd::cli
