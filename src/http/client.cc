#include "http/client.h"

#include <cctype>
#include <chrono>
#include <exception>
#include <limits>
#include <type_traits>
#include <utility>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "http/exchange.h"
#include "http/json_body.h"

namespace gpuherd::http {

using namespace internal;  // NOLINT: this file's half of exchange.h

namespace {

constexpr uint64_t kMaxResponseBytes = uint64_t{256} << 20;
constexpr uint64_t kMaxErrorBodyBytes = uint64_t{1} << 20;
constexpr char kDaemonHint[] = " (is `gpuherd daemon` running?)";

}  // namespace

Status StatusFromResponse(const ClientResponse& response) {
  if (response.status >= 200 && response.status < 300) return Status::Ok();
  std::string message;
  Result<nlohmann::json> body = ParseJson(response.body);
  if (body.ok() && body->is_object() && body->contains("error") && (*body)["error"].is_string()) {
    message = (*body)["error"].get<std::string>();
  }
  if (message.empty()) {
    // Not JSON: the raw body, shortened, is the best explanation there is.
    std::string_view text(response.body);
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
    message = Excerpt(text, 500);
  }
  if (message.empty()) message = "the daemon answered HTTP " + std::to_string(response.status);
  switch (response.status) {
    case 400:
    case 413:
    case 422: return InvalidArgument(message);
    case 401: return Unauthenticated(message);
    case 403: return PermissionDenied(message);
    case 404: return NotFound(message);
    case 409: return Status(Code::kAlreadyExists, message);
    case 412: return FailedPrecondition(message);
    case 503: return Unavailable(message);
    default: return response.status < 500 ? InvalidArgument(message) : Internal(message);
  }
}

Client::Client(Endpoint endpoint, DurationMs timeout)
    : endpoint_(std::move(endpoint)), timeout_(timeout) {}

std::string Client::Describe() const {
  if (!endpoint_.unix_path.empty()) return "unix socket " + endpoint_.unix_path;
  return endpoint_.host + ":" + std::to_string(endpoint_.port);
}

namespace {

// Runs `body` with a connected Exchange for the endpoint's protocol.
template <class Fn>
auto WithExchange(const Endpoint& endpoint, const std::string& where, DurationMs timeout,
                  Fn&& body) -> decltype(body(std::declval<Exchange<Tcp::socket>&>())) {
  std::string what = "the gpuherd daemon at " + where;
  if (!endpoint.unix_path.empty()) {
    Exchange<UnixStream::socket> exchange(what, kDaemonHint, timeout);
    GPUHERD_RETURN_IF_ERROR(exchange.Connect(std::vector{UnixStream::endpoint(endpoint.unix_path)}));
    return body(exchange);
  }
  auto endpoints = ResolveTcp(endpoint.host, endpoint.port);
  if (!endpoints.ok()) return endpoints.status();
  Exchange<Tcp::socket> exchange(what, kDaemonHint, timeout);
  GPUHERD_RETURN_IF_ERROR(exchange.Connect(*endpoints));
  return body(exchange);
}

}  // namespace

Result<ClientResponse> Client::Request(const std::string& method, const std::string& target,
                                           const std::string& body,
                                           const std::map<std::string, std::string>& headers) {
  std::string host = endpoint_.unix_path.empty() ? endpoint_.host : "localhost";
  auto request = BuildRequest(method, target, body, headers, host, "gpuherd-cli");
  if (!request.ok()) return request.status();
  return WithExchange(endpoint_, Describe(), timeout_,
                      [&](auto& exchange) -> Result<ClientResponse> {
                        GPUHERD_RETURN_IF_ERROR(exchange.Write(*request));
                        bhttp::response_parser<bhttp::string_body> parser;
                        parser.body_limit(kMaxResponseBytes);
                        GPUHERD_RETURN_IF_ERROR(exchange.ReadHeader(parser));
                        if (!parser.is_done()) {
                          GPUHERD_RETURN_IF_ERROR(exchange.ReadBody(parser));
                        }
                        ClientResponse response;
                        response.status = static_cast<int>(parser.get().result_int());
                        response.headers = CollectHeaders(parser.get());
                        response.body = std::move(parser.get().body());
                        return response;
                      });
}

Status Client::Stream(const std::string& target,
                          const std::map<std::string, std::string>& headers,
                          const std::function<bool(std::string_view)>& on_chunk) {
  std::string host = endpoint_.unix_path.empty() ? endpoint_.host : "localhost";
  auto request = BuildRequest("GET", target, "", headers, host, "gpuherd-cli");
  if (!request.ok()) return request.status();
  return WithExchange(endpoint_, Describe(), timeout_, [&](auto& exchange) -> Status {
    GPUHERD_RETURN_IF_ERROR(exchange.Write(*request));
    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.body_limit(std::numeric_limits<uint64_t>::max());  // boost::none trips a 1.74 bug
    GPUHERD_RETURN_IF_ERROR(exchange.ReadHeader(parser));
    int status = static_cast<int>(parser.get().result_int());
    bool success = status >= 200 && status < 300;
    std::string error_body;
    char buffer[16 * 1024];
    while (!parser.is_done()) {
      parser.get().body().data = buffer;
      parser.get().body().size = sizeof(buffer);
      // An error body is small and bounded by the deadline; a stream is not.
      GPUHERD_RETURN_IF_ERROR(exchange.ReadSome(parser, /*with_deadline=*/!success));
      size_t n = sizeof(buffer) - parser.get().body().size;
      if (n == 0) continue;
      if (success) {
        if (!on_chunk(std::string_view(buffer, n))) return Status::Ok();
      } else if (error_body.size() < kMaxErrorBodyBytes) {
        error_body.append(buffer, n);
      }
    }
    if (success) return Status::Ok();
    ClientResponse response;
    response.status = status;
    response.body = std::move(error_body);
    return StatusFromResponse(response);
  });
}

}  // namespace gpuherd::http
