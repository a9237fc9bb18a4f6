// How the server turns bytes into a Request: Beast's parser with the
// server's limits, then the target's percent-decoding and the headers'
// folding. Shared by the server's connections and by ParseRequest, which
// parses one buffer the same way (the fuzz target and tests use it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <boost/beast/http.hpp>

#include "http/server.h"

namespace gpuherd::http {

constexpr size_t kMaxHeaderBytes = 64 * 1024;

struct RequestLimits {
  size_t max_body_bytes = 1 << 20;  // ServerOptions::max_body_bytes
  size_t max_header_bytes = kMaxHeaderBytes;
};

using RequestMessage = boost::beast::http::request<boost::beast::http::string_body>;
using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

void SetLimits(const RequestLimits& limits, RequestParser* parser);

// What the server answers to a request it could not read: an HTTP status and
// message, or status 0 when there is nobody to answer (the peer closed,
// reset or timed out).
struct RequestFailure {
  int status = 0;
  std::string message;
};
RequestFailure FailureOf(const boost::system::error_code& ec, const RequestLimits& limits);

// Fills method, target, path, query, headers (names lower-cased, repeats
// joined by ", ") and body from a parsed message. Returns what is wrong with
// the target (the server answers 400), or an empty string.
std::string FillRequest(RequestMessage&& message, Request* request);

// One complete request in `bytes`, read exactly as the server reads it from a
// connection. On failure, `failure` holds the server's answer (status 0 for a
// request that is incomplete: the server would wait for more). Bytes after
// the first request are ignored (the server reads them as the next request).
struct ParsedRequest {
  bool ok = false;
  Request request;
  RequestFailure failure;
};
ParsedRequest ParseRequest(std::string_view bytes, const RequestLimits& limits = {});

}  // namespace gpuherd::http
