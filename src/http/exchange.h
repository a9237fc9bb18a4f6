// Internal to src/http: one client connection with a deadline, shared by the
// API client (TCP, unix socket) and the URL client (http, https). Not for
// use outside this folder.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::http::internal {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using Tcp = net::ip::tcp;
using UnixStream = net::local::stream_protocol;
using ErrorCode = boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

std::string Lower(std::string text);
bool HasLineBreak(std::string_view text);

// Header names lower-cased; repeated fields joined by ", ".
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

// A request with method, target, Host and headers checked for line breaks
// (a header injection), Content-Type application/json for a body unless set.
Result<bhttp::request<bhttp::string_body>> BuildRequest(
    const std::string& method, const std::string& target, const std::string& body,
    const std::map<std::string, std::string>& headers, const std::string& host,
    const std::string& user_agent);

// One connection on a private io_context. Every step runs the io_context
// until its operations finish or the shared deadline passes; on the deadline
// the connection is closed, which aborts what is pending. `Stream` is a
// socket, or an ssl::stream over one (see url_client.cc for the handshake).
template <class Stream>
class Exchange {
 public:
  // `what` names the peer in messages ("the gpuherd daemon at ...");
  // `unreachable_hint` ends the message when connecting fails.
  template <class... StreamArgs>
  Exchange(std::string what, std::string unreachable_hint, DurationMs timeout, StreamArgs&&... args)
      : what_(std::move(what)),
        hint_(std::move(unreachable_hint)),
        timeout_(timeout),
        deadline_(SteadyClock::now() + std::chrono::milliseconds(timeout)),
        stream_(io_, std::forward<StreamArgs>(args)...) {}

  Stream& stream() { return stream_; }

  template <class Endpoint>
  Status Connect(const std::vector<Endpoint>& endpoints) {
    ErrorCode ec = net::error::host_not_found;
    auto& socket = beast::get_lowest_layer(stream_);
    for (const auto& endpoint : endpoints) {
      ErrorCode ignored;
      socket.close(ignored);
      socket.async_connect(endpoint, [&ec](ErrorCode result) { ec = result; });
      if (!Run(/*with_deadline=*/true)) return TimedOut();
      if (!ec) return Status::Ok();
    }
    std::string reason = Lower(ec.message());
    if (ec == net::error::connection_refused) reason = "connection refused";
    if (ec == boost::system::errc::no_such_file_or_directory) reason = "no socket there";
    return Unavailable("cannot reach " + what_ + ": " + reason + hint_);
  }

  // Runs one asynchronous step started by `start(handler)` within the
  // deadline (a TLS handshake, say); kUnavailable naming `step` on failure.
  template <class Start>
  Status Step(const std::string& step, Start&& start) {
    ErrorCode ec;
    start([&ec](ErrorCode result, auto&&...) { ec = result; });
    if (!Run(true)) return TimedOut();
    if (ec) return Unavailable(step + " with " + what_ + " failed: " + Lower(ec.message()));
    return Status::Ok();
  }

  // A failed write is not final: a server that rejects a request early (413)
  // answers and closes while the body is still being sent.
  Status Write(bhttp::request<bhttp::string_body>& request) {
    ErrorCode ec;
    bhttp::async_write(stream_, request, [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(true)) return TimedOut();
    write_error_ = ec;
    return Status::Ok();
  }

  template <class Parser>
  Status ReadHeader(Parser& parser) {
    ErrorCode ec;
    bhttp::async_read_header(stream_, buffer_, parser,
                             [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(true)) return TimedOut();
    if (ec) return Broken(ec);
    return Status::Ok();
  }

  // Reads the rest of the message within the deadline.
  template <class Parser>
  Status ReadBody(Parser& parser) {
    ErrorCode ec;
    // Beast reads as much as the buffer holds (512 bytes when it is new): a
    // 7 MB listing would take 15,000 reads.
    buffer_.reserve(64 * 1024);
    bhttp::async_read(stream_, buffer_, parser, [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(true)) return TimedOut();
    if (ec) return Broken(ec);
    return Status::Ok();
  }

  // Reads what has arrived of the body into the parser's buffer_body, within
  // the deadline when `with_deadline`.
  template <class Parser>
  Status ReadSome(Parser& parser, bool with_deadline) {
    ErrorCode ec;
    bhttp::async_read_some(stream_, buffer_, parser,
                           [&ec](ErrorCode result, size_t) { ec = result; });
    if (!Run(with_deadline)) return TimedOut();
    if (ec && ec != bhttp::error::need_buffer) return Broken(ec);
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
    beast::get_lowest_layer(stream_).close(ignored);
    io_.restart();
    io_.run();  // lets the aborted operations complete
    return false;
  }

  Status TimedOut() const {
    return Unavailable(what_ + " did not answer within " + FormatDuration(timeout_) +
                       " (is it overloaded or stuck?)");
  }

  Status Broken(ErrorCode ec) const {
    std::string reason = Lower(ec.message());
    if (write_error_) reason += " (sending the request failed: " + Lower(write_error_.message()) + ")";
    return Unavailable(what_ + " closed the connection without a complete response: " + reason);
  }

  std::string what_;
  std::string hint_;
  DurationMs timeout_;
  SteadyClock::time_point deadline_;
  net::io_context io_;
  Stream stream_;
  beast::flat_buffer buffer_;
  ErrorCode write_error_;
};

// Resolves `host` (an IP address as is, a name through the resolver).
Result<std::vector<Tcp::endpoint>> ResolveTcp(const std::string& host, int port);

}  // namespace gpuherd::http::internal
