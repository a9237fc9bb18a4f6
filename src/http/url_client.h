// Requests to a URL outside gpuherd (a webhook receiver): http:// or https://
// with the server's certificate checked against the system's authorities.
// Kept apart from client.h so that the CLI does not load OpenSSL.
#pragma once

#include <map>
#include <string>

#include "core/status.h"
#include "core/time.h"
#include "http/client.h"

namespace gpuherd::http {

struct Url {
  bool tls = false;
  std::string host;    // as written; an IPv6 address keeps its brackets
  int port = 0;        // 80 or 443 unless given
  std::string target;  // path and query, "/" when absent
};

// http://host[:port][/path] or https://...; kInvalidArgument naming the URL
// when the scheme, host or port is wrong or it holds spaces or line breaks.
Result<Url> ParseUrl(const std::string& url);

// Sends one request and reads the response (at most 1 MiB of body), all
// within `timeout`. Any HTTP status is a successful Result.
Result<ClientResponse> RequestUrl(const Url& url, const std::string& method, const std::string& body,
                                  const std::map<std::string, std::string>& headers,
                                  DurationMs timeout);

}  // namespace gpuherd::http
