#include "cli/http_client.h"

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

namespace gpuherd::cli {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Tcp = net::ip::tcp;
using UnixStream = net::local::stream_protocol;
using ErrorCode = boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kMaxResponseBytes = uint64_t{256} << 20;
constexpr uint64_t kMaxErrorBodyBytes = uint64_t{1} << 20;

std::string Lower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

bool HasLineBreak(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos;
}

template <class Fields>
std::map<std::string, std::string> CollectHeaders(const Fields& fields) {
  std::map<std::string, std::string> headers;
  for (const auto& field : fields) {
    auto [it, inserted] =
        headers.emplace(Lower(std::string(field.name_string())), std::string(field.value()));
    if (!inserted) it->second.append(", ").append(field.value().data(), field.value().size());
  }
  return headers;
}

// One connection on a private io_context. Every step runs the io_context
// until its operations finish or the shared deadline passes; on the deadline
// the socket is closed, which aborts what is pending.
template <class Protocol>
class Exchange {
 public:
  Exchange(std::string where, DurationMs timeout)
      : where_(std::move(where)),
        timeout_(timeout),
        deadline_(SteadyClock::now() + std::chrono::milliseconds(timeout)),
        socket_(io_) {}

  Status Connect(const std::vector<typename Protocol::endpoint>& endpoints) {
    ErrorCode ec = net::error::host_not_found;
    for (const auto& endpoint : endpoints) {
      ErrorCode ignored;
      socket_.close(ignored);
      socket_.async_connect(endpoint, [&ec](ErrorCode result) { ec = result; });
      if (!Run(/*with_deadline=*/true)) return TimedOut();
      if (!ec) return Status::Ok();
    }
    std::string reason = Lower(ec.message());
    if (ec == net::error::connection_refused) reason = "connection refused";
    if (ec == boost::system::errc::no_such_file_or_directory) {
      reason = "no socket there";
    }
    return Unavailable("cannot reach the gpuherd daemon at " + where_ + ": " + reason +
                       " (is `gpuherd daemon` running?)");
  }

  // A failed write is not final: a server that rejects a request early (413)
  // answers and closes while the body is still being sent.
  Status Write(http::request<http::string_body>& request) {
    ErrorCode ec;
    http::async_write(socket_, request, [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(true)) return TimedOut();
    write_error_ = ec;
    return Status::Ok();
  }

  template <class Parser>
  Status ReadHeader(Parser& parser) {
    ErrorCode ec;
    http::async_read_header(socket_, buffer_, parser,
                            [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(true)) return TimedOut();
    if (ec) return Broken(ec);
    return Status::Ok();
  }

  // Reads the rest of the message within the deadline.
  template <class Parser>
  Status ReadBody(Parser& parser) {
    ErrorCode ec;
    http::async_read(socket_, buffer_, parser, [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(true)) return TimedOut();
    if (ec) return Broken(ec);
    return Status::Ok();
  }

  // Reads what has arrived of the body into the parser's buffer_body, within
  // the deadline when `with_deadline`.
  template <class Parser>
  Status ReadSome(Parser& parser, bool with_deadline) {
    ErrorCode ec;
    http::async_read_some(socket_, buffer_, parser,
                          [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(with_deadline)) return TimedOut();
    if (ec && ec != http::error::need_buffer) return Broken(ec);
    return Status::Ok();
  }

 private:
  // False when the deadline passed before the pending operations finished.
  bool Run(bool with_deadline) {
    io_.restart();
    if (!with_deadline) {
      io_.run();
      return true;
    }
    auto remaining = deadline_ - SteadyClock::now();
    if (remaining > SteadyClock::duration::zero()) io_.run_for(remaining);
    if (io_.stopped()) return true;
    ErrorCode ignored;
    socket_.close(ignored);
    io_.restart();
    io_.run();  // lets the aborted operations complete
    return false;
  }

  Status TimedOut() const {
    return Unavailable("the gpuherd daemon at " + where_ + " did not answer within " +
                       FormatDuration(timeout_) + " (is it overloaded or stuck?)");
  }

  Status Broken(ErrorCode ec) const {
    std::string what = Lower(ec.message());
    if (write_error_) what += " (sending the request failed: " + Lower(write_error_.message()) + ")";
    return Unavailable("the gpuherd daemon at " + where_ +
                       " closed the connection without a complete response: " + what);
  }

  std::string where_;
  DurationMs timeout_;
  SteadyClock::time_point deadline_;
  net::io_context io_;
  typename Protocol::socket socket_;
  beast::flat_buffer buffer_;
  ErrorCode write_error_;
};

Result<http::request<http::string_body>> BuildRequest(
    const std::string& method, const std::string& target, const std::string& body,
    const std::map<std::string, std::string>& headers, const std::string& host) {
  if (method.empty() || HasLineBreak(method) || method.find(' ') != std::string::npos) {
    return InvalidArgument("invalid HTTP method '" + method + "'");
  }
  if (target.empty() || target[0] != '/' || HasLineBreak(target) ||
      target.find(' ') != std::string::npos) {
    return InvalidArgument("invalid request target '" + target +
                           "'; it must start with '/' and be percent-encoded");
  }
  http::request<http::string_body> request;
  try {
    request.version(11);
    http::verb verb = http::string_to_verb(method);
    if (verb == http::verb::unknown) {
      request.method_string(method);
    } else {
      request.method(verb);
    }
    request.target(target);
    request.set(http::field::host, host);
    request.set(http::field::user_agent, "gpuherd-cli");
    bool has_content_type = false;
    for (const auto& [name, value] : headers) {
      if (name.empty() || HasLineBreak(name) || HasLineBreak(value)) {
        return InvalidArgument("invalid HTTP header '" + name + "'");
      }
      if (Lower(name) == "content-type") has_content_type = true;
      request.set(name, value);
    }
    if (!body.empty() && !has_content_type) {
      request.set(http::field::content_type, "application/json");
    }
    request.keep_alive(false);
    request.body() = body;
    request.prepare_payload();
  } catch (const std::exception& e) {  // Beast rejects malformed fields by throwing
    return InvalidArgument(std::string("cannot build the HTTP request: ") + e.what());
  }
  return request;
}

}  // namespace

Status StatusFromResponse(const ClientResponse& response) {
  if (response.status >= 200 && response.status < 300) return Status::Ok();
  std::string message;
  try {
    nlohmann::json body = nlohmann::json::parse(response.body);
    if (body.is_object() && body.contains("error") && body["error"].is_string()) {
      message = body["error"].get<std::string>();
    }
  } catch (const nlohmann::json::exception&) {
    // Not JSON: the raw body, shortened, is the best explanation there is.
  }
  if (message.empty()) {
    message = response.body.substr(0, 500);
    while (!message.empty() && std::isspace(static_cast<unsigned char>(message.back()))) {
      message.pop_back();
    }
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

HttpClient::HttpClient(HttpEndpoint endpoint, DurationMs timeout)
    : endpoint_(std::move(endpoint)), timeout_(timeout) {}

std::string HttpClient::Describe() const {
  if (!endpoint_.unix_path.empty()) return "unix socket " + endpoint_.unix_path;
  return endpoint_.host + ":" + std::to_string(endpoint_.port);
}

namespace {

// Runs `body` with a connected Exchange for the endpoint's protocol.
template <class Fn>
auto WithExchange(const HttpEndpoint& endpoint, const std::string& where, DurationMs timeout,
                  Fn&& body) -> decltype(body(std::declval<Exchange<Tcp>&>())) {
  if (!endpoint.unix_path.empty()) {
    Exchange<UnixStream> exchange(where, timeout);
    GPUHERD_RETURN_IF_ERROR(exchange.Connect({UnixStream::endpoint(endpoint.unix_path)}));
    return body(exchange);
  }
  if (endpoint.port <= 0 || endpoint.port > 65535) {
    return InvalidArgument("the daemon's port must be 1..65535, got " +
                           std::to_string(endpoint.port));
  }
  std::vector<Tcp::endpoint> endpoints;
  ErrorCode ec;
  net::ip::address address = net::ip::make_address(endpoint.host, ec);
  if (!ec) {
    endpoints.emplace_back(address, static_cast<uint16_t>(endpoint.port));
  } else {
    net::io_context io;
    Tcp::resolver resolver(io);
    auto results = resolver.resolve(endpoint.host, std::to_string(endpoint.port), ec);
    if (ec) {
      return Unavailable("cannot resolve the daemon's host '" + endpoint.host +
                         "': " + Lower(ec.message()));
    }
    for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  }
  Exchange<Tcp> exchange(where, timeout);
  GPUHERD_RETURN_IF_ERROR(exchange.Connect(endpoints));
  return body(exchange);
}

}  // namespace

Result<ClientResponse> HttpClient::Request(const std::string& method, const std::string& target,
                                           const std::string& body,
                                           const std::map<std::string, std::string>& headers) {
  std::string host = endpoint_.unix_path.empty() ? endpoint_.host : "localhost";
  auto request = BuildRequest(method, target, body, headers, host);
  if (!request.ok()) return request.status();
  return WithExchange(endpoint_, Describe(), timeout_,
                      [&](auto& exchange) -> Result<ClientResponse> {
                        GPUHERD_RETURN_IF_ERROR(exchange.Write(*request));
                        http::response_parser<http::string_body> parser;
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

Status HttpClient::Stream(const std::string& target,
                          const std::map<std::string, std::string>& headers,
                          const std::function<bool(std::string_view)>& on_chunk) {
  std::string host = endpoint_.unix_path.empty() ? endpoint_.host : "localhost";
  auto request = BuildRequest("GET", target, "", headers, host);
  if (!request.ok()) return request.status();
  return WithExchange(endpoint_, Describe(), timeout_, [&](auto& exchange) -> Status {
    GPUHERD_RETURN_IF_ERROR(exchange.Write(*request));
    http::response_parser<http::buffer_body> parser;
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

}  // namespace gpuherd::cli
