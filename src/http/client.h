// The CLI's HTTP/1.1 client for the daemon's API, over its unix socket or TCP.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::http {

struct Endpoint {
  std::string unix_path;  // wins over host/port when set
  std::string host = "127.0.0.1";
  int port = 0;
};

struct ClientResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
};

// Ok for a 2xx response; otherwise a Status whose code follows the HTTP status
// (400 invalid argument, 401 unauthenticated, 403 permission denied, 404 not
// found, 409 already exists, 412/422 failed precondition, 503 unavailable,
// others internal) and whose message is the body's "error" field.
Status StatusFromResponse(const ClientResponse& response);

// Each call opens its own connection and closes it afterwards, so one client
// may be used from several threads at once.
class Client {
 public:
  explicit Client(Endpoint endpoint, DurationMs timeout = 10000);

  // Sends one request and reads the whole response, all within the timeout.
  // Any HTTP status is a successful Result; an unreachable daemon or a
  // timeout is kUnavailable with a message saying what to check.
  Result<ClientResponse> Request(const std::string& method, const std::string& target,
                                 const std::string& body = "",
                                 const std::map<std::string, std::string>& headers = {});

  // GETs `target` and passes the body to on_chunk piece by piece as it
  // arrives (pieces need not match the server's chunks) until the server ends
  // it or on_chunk returns false. The timeout covers connecting and the
  // response header only; a stream may stay quiet for as long as it likes.
  // A non-2xx response becomes StatusFromResponse's error.
  Status Stream(const std::string& target, const std::map<std::string, std::string>& headers,
                const std::function<bool(std::string_view)>& on_chunk);

  // "unix socket /path" or "127.0.0.1:7070", for messages.
  std::string Describe() const;

 private:
  Endpoint endpoint_;
  DurationMs timeout_;
};

}  // namespace gpuherd::http
