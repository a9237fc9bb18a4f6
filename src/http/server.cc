#include "http/server.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <future>
#include <mutex>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "http/connection_limiter.h"
#include "http/request_parser.h"

namespace gpuherd::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using Tcp = net::ip::tcp;
using UnixStream = net::local::stream_protocol;
using ErrorCode = boost::system::error_code;

constexpr char kServerName[] = "gpuherd";
// How long a connection that got an error response keeps reading (and
// discarding) what the client still sends, so that the client sees the
// response instead of a connection reset.
constexpr DurationMs kLingerMs = 1000;
// How long Stop() waits for running handlers before it abandons them.
constexpr std::chrono::seconds kStopGrace(10);
constexpr std::chrono::milliseconds kAcceptRetryDelay(100);
// Accept failures and refused connections come in floods: one log line per
// interval, with the count, instead of one per connection.
constexpr std::chrono::seconds kFloodLogInterval(10);
// What a refused connection had already sent is read (and dropped) up to
// this much before the close, so that TCP sends FIN rather than RST and the
// client gets to read the 503.
constexpr size_t kRefusalDrainBytes = 64 * 1024;
constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

bool HasLineBreak(std::string_view text) {
  return text.find_first_of("\r\n") != std::string_view::npos;
}

// Handler statuses outside 200..599 are programming errors; they become 500
// rather than a response that breaks the protocol.
unsigned ValidStatus(int status) {
  return status >= 200 && status <= 599 ? static_cast<unsigned>(status) : 500;
}

template <class Fields>
void SetCommonFields(const Response& response, Fields* fields) {
  fields->set(bhttp::field::server, kServerName);
  if (!response.content_type.empty() && !HasLineBreak(response.content_type)) {
    fields->set(bhttp::field::content_type, response.content_type);
  }
  for (const auto& [name, value] : response.headers) {
    if (name.empty() || HasLineBreak(name) || HasLineBreak(value)) {
      spdlog::warn("HTTP handler returned an invalid header '{}'; not sent", name);
      continue;
    }
    fields->insert(name, value);
  }
}

// Lets a repeated warning through at most once per interval and says how
// many were held back since the last one. Thread-safe.
class FloodLog {
 public:
  // True when the caller may log now; *count is then the occurrences since
  // the last line, this one included.
  bool Allow(uint64_t* count) {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
    auto now = std::chrono::steady_clock::now();
    if (logged_ && now - last_ < kFloodLogInterval) return false;
    logged_ = true;
    last_ = now;
    *count = count_;
    count_ = 0;
    return true;
  }

 private:
  std::mutex mu_;
  bool logged_ = false;
  std::chrono::steady_clock::time_point last_;
  uint64_t count_ = 0;
};

// Answers a connection over a limit and closes it, without waiting for the
// peer: a reply that does not fit the socket's buffer is cut short.
void Refuse(int fd, const std::string& message) {
  char sink[4096];
  for (size_t drained = 0; drained < kRefusalDrainBytes;) {
    ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n <= 0) break;
    drained += static_cast<size_t>(n);
  }
  std::string body = ErrorResponse(503, message).body;
  std::string reply = "HTTP/1.1 503 Service Unavailable\r\nServer: " + std::string(kServerName) +
                      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\nConnection: close\r\n\r\n" + body;
  [[maybe_unused]] ssize_t sent = ::send(fd, reply.data(), reply.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  ::shutdown(fd, SHUT_WR);
}

class Session {
 public:
  virtual ~Session() = default;
  // Asks the connection to end: at once when idle, after the response when a
  // handler is running. Thread-safe.
  virtual void Shutdown() = 0;
};

// What the connections share: the options, the handler and the registry that
// lets Stop() reach every open connection.
class ServerCore {
 public:
  ServerCore(ServerOptions options, Handler handler)
      : options_(std::move(options)), handler_(std::move(handler)), limiter_(options_.limits) {}

  const ServerOptions& options() const { return options_; }
  ConnectionLimiter& limiter() { return limiter_; }
  FloodLog& refusal_log() { return refusal_log_; }
  FloodLog& accept_error_log() { return accept_error_log_; }

  Response Handle(const Request& request) const {
    try {
      return handler_(request);
    } catch (const std::exception& e) {
      spdlog::error("HTTP handler failed on {} {}: {}", request.method, request.path, e.what());
      return ErrorResponse(500, "internal error while handling " + request.method + " " +
                                        request.path + ": " + e.what());
    } catch (...) {
      spdlog::error("HTTP handler failed on {} {}", request.method, request.path);
      return ErrorResponse(500, "internal error while handling " + request.method + " " +
                                        request.path);
    }
  }

  // Returns false once the server is stopping; the caller then closes.
  bool Register(Session* session, const std::shared_ptr<Session>& owner) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    sessions_[session] = owner;
    return true;
  }

  void Unregister(Session* session) {
    std::lock_guard<std::mutex> lock(mu_);
    if (sessions_.erase(session) > 0 && sessions_.empty()) cv_.notify_all();
  }

  void ShutdownSessions() {
    std::vector<std::shared_ptr<Session>> live;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      for (auto& [raw, weak] : sessions_) {
        if (auto session = weak.lock()) live.push_back(std::move(session));
      }
    }
    // Outside the lock: dropping the last reference runs Unregister.
    for (auto& session : live) session->Shutdown();
  }

  // True when every connection ended within `timeout`.
  bool WaitForSessions(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return sessions_.empty(); });
  }

 private:
  const ServerOptions options_;
  const Handler handler_;
  ConnectionLimiter limiter_;
  FloodLog refusal_log_;
  FloodLog accept_error_log_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions_;
};

// One accepted connection. Every completion handler runs on the socket's
// strand, so the members need no lock; the HTTP handler runs on that strand
// too and may block it.
template <class Protocol>
class Connection : public Session, public std::enable_shared_from_this<Connection<Protocol>> {
 public:
  static constexpr bool kIsUnix = std::is_same_v<Protocol, UnixStream>;

  // `peer` holds a slot of the core's limiter, given back when the
  // connection is destroyed; `cred` is the unix socket's peer.
  Connection(ServerCore& core, typename Protocol::socket socket, Peer peer, std::optional<ucred> cred)
      : core_(core),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        poll_timer_(socket_.get_executor()),
        peer_(std::move(peer)) {
    if (cred) {
      peer_uid_ = cred->uid;
      peer_gid_ = cred->gid;
      peer_pid_ = cred->pid;
    }
  }

  ~Connection() override {
    core_.Unregister(this);
    // The descriptor goes before the slot, so that the count never falls
    // below the descriptors held.
    ErrorCode ignored;
    socket_.close(ignored);
    core_.limiter().Release(peer_);
  }

  void Start() {
    net::dispatch(socket_.get_executor(), [self = this->shared_from_this()] { self->Begin(); });
  }

  void Shutdown() override {
    net::post(socket_.get_executor(), [self = this->shared_from_this()] { self->OnShutdown(); });
  }

 private:
  enum class Phase { kReading, kHandling, kWriting, kStreaming, kClosing };

  void Begin() {
    if (!core_.Register(this, this->shared_from_this())) {
      CloseSocket();
      return;
    }
    ReadRequest();
  }

  void OnShutdown() {
    stopping_ = true;
    switch (phase_) {
      case Phase::kReading:  // idle keep-alive or a request not yet complete
      case Phase::kClosing:  // lingering after an error response
        linger_ = false;
        Close();
        CloseSocket();  // Close() alone leaves a lingering connection open
        break;
      case Phase::kStreaming:
        poll_timer_.cancel();  // the next step sees stopping_ and ends the stream
        break;
      case Phase::kHandling:
      case Phase::kWriting:
        break;  // OnWritten sees stopping_ and closes
    }
  }

  void ArmDeadline(DurationMs timeout) {
    deadline_.expires_after(std::chrono::milliseconds(timeout));
    deadline_.async_wait([self = this->shared_from_this()](ErrorCode ec) {
      // A wait that completed just before the deadline was moved is stale.
      if (ec || self->deadline_.expiry() > net::steady_timer::clock_type::now()) return;
      self->CloseSocket();
    });
  }

  void ReadRequest() {
    if (stopping_) return Close();
    phase_ = Phase::kReading;
    parser_.emplace();
    SetLimits(Limits(), &*parser_);
    ArmDeadline(core_.options().head_timeout);
    bhttp::async_read_header(socket_, buffer_, *parser_,
                            [self = this->shared_from_this()](ErrorCode ec, size_t) {
                              self->OnHeader(ec);
                            });
  }

  void OnHeader(ErrorCode ec) {
    if (closed_) return;
    if (ec) return OnReadError(ec);
    ArmDeadline(core_.options().read_timeout);  // for the body, which may be large
    const auto& header = parser_->get();
    if (!parser_->is_done() && beast::iequals(header[bhttp::field::expect], "100-continue")) {
      net::async_write(socket_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = this->shared_from_this()](ErrorCode ec, size_t) {
                         if (ec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    if (closed_) return;
    if (parser_->is_done()) return Dispatch();
    bhttp::async_read(socket_, buffer_, *parser_,
                     [self = this->shared_from_this()](ErrorCode ec, size_t) {
                       if (self->closed_) return;
                       if (ec) return self->OnReadError(ec);
                       self->Dispatch();
                     });
  }

  void OnReadError(ErrorCode ec) {
    RequestFailure failure = FailureOf(ec, Limits());
    // 0: the peer closed, reset or timed out: nobody to answer.
    if (failure.status == 0) return Close();
    SendErrorAndClose(failure.status, failure.message);
  }

  RequestLimits Limits() const {
    RequestLimits limits;
    limits.max_body_bytes = core_.options().max_body_bytes;
    return limits;
  }

  void Dispatch() {
    phase_ = Phase::kHandling;
    deadline_.cancel();
    bhttp::request<bhttp::string_body> message = parser_->release();
    keep_alive_ = message.keep_alive() && !stopping_;
    head_only_ = message.method() == bhttp::verb::head;

    Request request;
    std::string problem = FillRequest(std::move(message), &request);
    if (!problem.empty()) return SendErrorAndClose(400, problem);
    request.via_unix_socket = kIsUnix;
    request.peer_uid = peer_uid_;
    request.peer_gid = peer_gid_;
    request.peer_pid = peer_pid_;

    Response response = core_.Handle(request);
    if (response.stream) return StartStream(std::move(response));
    WriteResponse(std::move(response));
  }

  void SendErrorAndClose(int status, const std::string& message) {
    keep_alive_ = false;
    linger_ = true;
    head_only_ = false;
    WriteResponse(ErrorResponse(status, message));
  }

  void WriteResponse(Response response) {
    phase_ = Phase::kWriting;
    response_ = {};
    try {
      response_.version(11);
      response_.result(ValidStatus(response.status));
      SetCommonFields(response, &response_);
      response_.body() = std::move(response.body);
      unsigned code = response_.result_int();
      if (code == 204 || code == 304) response_.body().clear();
      response_.keep_alive(keep_alive_);
      response_.prepare_payload();
      if (head_only_) response_.body().clear();  // Content-Length stays, as HEAD requires
    } catch (const std::exception& e) {
      spdlog::error("cannot build the HTTP response: {}", e.what());
      response_ = {};
      response_.version(11);
      response_.result(bhttp::status::internal_server_error);
      response_.set(bhttp::field::content_type, "application/json");
      response_.body() = ErrorResponse(500, "the server built an invalid response").body;
      response_.keep_alive(false);
      keep_alive_ = false;
      response_.prepare_payload();
    }
    ArmDeadline(core_.options().read_timeout);
    bhttp::async_write(socket_, response_, [self = this->shared_from_this()](ErrorCode ec, size_t) {
      self->OnWritten(ec);
    });
  }

  void OnWritten(ErrorCode ec) {
    if (ec || !keep_alive_ || stopping_) return Close();
    ReadRequest();
  }

  void StartStream(Response response) {
    phase_ = Phase::kStreaming;
    producer_ = std::move(response.stream);
    stream_head_.emplace();
    try {
      stream_head_->version(11);
      stream_head_->result(ValidStatus(response.status));
      SetCommonFields(response, &*stream_head_);
      stream_head_->keep_alive(false);
      stream_head_->chunked(true);
    } catch (const std::exception& e) {
      spdlog::error("cannot build the HTTP stream header: {}", e.what());
      producer_ = nullptr;
      return SendErrorAndClose(500, "the server built an invalid response");
    }
    chunk_ = std::move(response.body);
    stream_serializer_.emplace(*stream_head_);
    ArmDeadline(core_.options().read_timeout);
    bhttp::async_write_header(socket_, *stream_serializer_,
                             [self = this->shared_from_this()](ErrorCode ec, size_t) {
                               if (ec) return self->Close();
                               self->WatchPeer();
                               if (!self->chunk_.empty()) return self->WriteChunk(true);
                               self->NextChunk();
                             });
  }

  // Keeps one read pending while streaming: its failure is how a client that
  // went away is noticed between chunks.
  void WatchPeer() {
    socket_.async_read_some(net::buffer(scratch_),
                            [self = this->shared_from_this()](ErrorCode ec, size_t) {
                              if (ec) {
                                self->peer_gone_ = true;
                                self->poll_timer_.cancel();
                                return;
                              }
                              if (!self->closed_) self->WatchPeer();
                            });
  }

  void NextChunk() {
    if (closed_) return;
    if (stopping_ || peer_gone_) return EndStream();
    chunk_.clear();
    bool more = false;
    try {
      more = producer_(&chunk_);
    } catch (const std::exception& e) {
      spdlog::error("HTTP stream producer failed: {}", e.what());
      more = false;
    } catch (...) {
      spdlog::error("HTTP stream producer failed");
      more = false;
    }
    if (!chunk_.empty()) return WriteChunk(more);
    if (!more) return EndStream();
    deadline_.cancel();
    poll_timer_.expires_after(std::chrono::milliseconds(core_.options().stream_poll_interval));
    poll_timer_.async_wait([self = this->shared_from_this()](ErrorCode) { self->NextChunk(); });
  }

  void WriteChunk(bool more) {
    ArmDeadline(core_.options().read_timeout);
    net::async_write(socket_, bhttp::make_chunk(net::buffer(chunk_)),
                     [self = this->shared_from_this(), more](ErrorCode ec, size_t) {
                       if (ec) return self->Close();
                       if (!more) return self->EndStream();
                       self->NextChunk();
                     });
  }

  void EndStream() {
    producer_ = nullptr;  // releases what the producer holds (files, subscriptions) now
    if (peer_gone_) return Close();
    ArmDeadline(core_.options().read_timeout);
    net::async_write(socket_, bhttp::make_chunk_last(),
                     [self = this->shared_from_this()](ErrorCode, size_t) { self->Close(); });
  }

  // Ends the connection. After an error response it first half-closes and
  // drains for a moment so that the client can read the response.
  void Close() {
    if (closed_) return;
    closed_ = true;
    phase_ = Phase::kClosing;
    poll_timer_.cancel();
    producer_ = nullptr;
    if (linger_ && !stopping_) {
      ErrorCode ignored;
      socket_.shutdown(net::socket_base::shutdown_send, ignored);
      ArmDeadline(kLingerMs);
      Drain();
      return;
    }
    CloseSocket();
  }

  void Drain() {
    socket_.async_read_some(net::buffer(scratch_),
                            [self = this->shared_from_this()](ErrorCode ec, size_t) {
                              if (ec) return self->CloseSocket();
                              self->Drain();
                            });
  }

  void CloseSocket() {
    closed_ = true;
    deadline_.cancel();
    poll_timer_.cancel();
    ErrorCode ignored;
    socket_.shutdown(net::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
  }

  ServerCore& core_;
  typename Protocol::socket socket_;
  net::steady_timer deadline_;    // read, write and linger deadline; closes the socket
  net::steady_timer poll_timer_;  // the wait between empty stream chunks
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> response_;
  std::optional<bhttp::response<bhttp::empty_body>> stream_head_;
  std::optional<bhttp::response_serializer<bhttp::empty_body>> stream_serializer_;
  StreamProducer producer_;
  std::string chunk_;
  char scratch_[4096];
  const Peer peer_;
  std::optional<uint32_t> peer_uid_;
  std::optional<uint32_t> peer_gid_;
  std::optional<int32_t> peer_pid_;
  Phase phase_ = Phase::kReading;
  bool keep_alive_ = false;
  bool head_only_ = false;
  bool linger_ = false;
  bool stopping_ = false;
  bool closed_ = false;
  bool peer_gone_ = false;
};

template <class Acceptor>
void CloseOnItsStrand(Acceptor* acceptor) {
  if (acceptor == nullptr) return;
  std::promise<void> done;
  net::post(acceptor->get_executor(), [acceptor, &done] {
    ErrorCode ignored;
    acceptor->close(ignored);
    done.set_value();
  });
  done.get_future().wait();
}

}  // namespace

Response ErrorResponse(int status, const std::string& message) {
  Response response;
  response.status = status;
  nlohmann::json body = {{"error", message}};
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

class Server::Impl {
 public:
  Impl(ServerOptions options, Handler handler)
      : core_(std::move(options), std::move(handler)) {}
  ~Impl() { Stop(); }

  Status Listen() {
    const ServerOptions& options = core_.options();
    if (!options.unix_path.empty()) GPUHERD_RETURN_IF_ERROR(ListenUnix());
    if (options.tcp_port >= 0) GPUHERD_RETURN_IF_ERROR(ListenTcp());
    return Status::Ok();
  }

  void Run() {
    if (tcp_acceptor_) Accept(tcp_acceptor_.get());
    if (unix_acceptor_) Accept(unix_acceptor_.get());
    work_.emplace(io_.get_executor());
    for (int i = 0; i < core_.options().threads; ++i) {
      threads_.emplace_back([this] {
        for (;;) {
          try {
            io_.run();
            return;
          } catch (const std::exception& e) {
            spdlog::error("HTTP server thread: {}", e.what());
          }
        }
      });
    }
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    if (!threads_.empty()) {
      CloseOnItsStrand(tcp_acceptor_.get());
      CloseOnItsStrand(unix_acceptor_.get());
      core_.ShutdownSessions();
      if (!core_.WaitForSessions(kStopGrace)) {
        spdlog::warn("HTTP server stopping while handlers still run");
      }
      work_.reset();
      io_.stop();
      for (auto& thread : threads_) thread.join();
      threads_.clear();
    }
    RemoveSocketFile();
  }

  int tcp_port() const { return tcp_port_; }
  const std::string& unix_path() const { return core_.options().unix_path; }
  ConnectionStats connection_stats() { return core_.limiter().Stats(); }

 private:
  Status ListenTcp() {
    const ServerOptions& options = core_.options();
    ErrorCode ec;
    net::ip::address address = net::ip::make_address(options.tcp_host, ec);
    if (ec) {
      if (options.tcp_host != "localhost") {
        return InvalidArgument("the HTTP host '" + options.tcp_host +
                               "' is not an IP address; use e.g. 127.0.0.1");
      }
      address = net::ip::address_v4::loopback();
    }
    Tcp::endpoint endpoint(address, static_cast<uint16_t>(options.tcp_port));
    std::string where = "port " + std::to_string(options.tcp_port) + " on " + options.tcp_host;
    tcp_acceptor_ = std::make_unique<Tcp::acceptor>(net::make_strand(io_));
    if (tcp_acceptor_->open(endpoint.protocol(), ec)) {
      return IoError("cannot open a TCP socket: " + ec.message());
    }
    // Lets a restarted daemon bind while old connections sit in TIME_WAIT; it
    // does not allow two listeners on one port.
    tcp_acceptor_->set_option(net::socket_base::reuse_address(true), ec);
    if (tcp_acceptor_->bind(endpoint, ec)) {
      if (ec == net::error::address_in_use) {
        return FailedPrecondition(where + " is already in use (is another gpuherd daemon running?); "
                                          "choose another with --port");
      }
      if (ec == net::error::access_denied) {
        return PermissionDenied("binding " + where + " needs privileges; choose a port above 1023");
      }
      return IoError("cannot bind " + where + ": " + ec.message());
    }
    if (tcp_acceptor_->listen(net::socket_base::max_listen_connections, ec)) {
      return IoError("cannot listen on " + where + ": " + ec.message());
    }
    tcp_port_ = tcp_acceptor_->local_endpoint(ec).port();
    return Status::Ok();
  }

  Status ListenUnix() {
    const std::string& path = core_.options().unix_path;
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      return InvalidArgument("the unix socket path " + path + " is longer than " +
                             std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                             " bytes; use a shorter state directory (--home)");
    }
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
      if (!S_ISSOCK(st.st_mode)) {
        return FailedPrecondition(path + " exists and is not a socket; move it away");
      }
      UnixStream::socket probe(io_);
      ErrorCode ec;
      probe.connect(UnixStream::endpoint(path), ec);
      if (!ec) return FailedPrecondition("another gpuherd daemon is listening on " + path);
      if (ec != net::error::connection_refused) {
        return IoError("cannot check the existing socket " + path + ": " + ec.message());
      }
      // Nobody answers: a daemon that did not stop cleanly left it behind.
      spdlog::info("removing the stale socket {}", path);
      if (unlink(path.c_str()) != 0 && errno != ENOENT) {
        return IoError("cannot remove the stale socket " + path + ": " + std::strerror(errno));
      }
    } else if (errno != ENOENT) {
      return IoError("cannot inspect " + path + ": " + std::strerror(errno));
    }

    ErrorCode ec;
    unix_acceptor_ = std::make_unique<UnixStream::acceptor>(net::make_strand(io_));
    if (unix_acceptor_->open(UnixStream(), ec) || unix_acceptor_->bind(path, ec)) {
      return IoError("cannot create the unix socket " + path + ": " + ec.message());
    }
    // Local users may connect: reads are open to everyone on the machine, and
    // the daemon demands its API token (a 0600 file) for every mutation.
    // Without 0666 a researcher's CLI could not reach a daemon run as root.
    if (chmod(path.c_str(), 0666) != 0) {
      int error = errno;
      unlink(path.c_str());
      return IoError("cannot chmod the unix socket " + path + ": " + std::strerror(error));
    }
    if (unix_acceptor_->listen(net::socket_base::max_listen_connections, ec)) {
      unlink(path.c_str());
      return IoError("cannot listen on the unix socket " + path + ": " + ec.message());
    }
    if (lstat(path.c_str(), &st) == 0) {
      socket_dev_ = st.st_dev;
      socket_ino_ = st.st_ino;
      own_socket_file_ = true;
    }
    return Status::Ok();
  }

  template <class Acceptor>
  void Accept(Acceptor* acceptor) {
    using Protocol = typename Acceptor::protocol_type;
    acceptor->async_accept(net::make_strand(io_), [this, acceptor](ErrorCode ec, auto socket) {
      if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
      if (ec) {
        // Usually out of file descriptors (EMFILE, ENFILE): wait instead of
        // spinning, and say so once per interval, not once per try.
        core_.limiter().CountAcceptError();
        if (uint64_t count = 0; core_.accept_error_log().Allow(&count)) {
          spdlog::warn("HTTP accept failed: {} ({} time(s) since the last report; retrying every {} ms)",
                       ec.message(), count, kAcceptRetryDelay.count());
        }
        auto timer = std::make_shared<net::steady_timer>(acceptor->get_executor(),
                                                          kAcceptRetryDelay);
        timer->async_wait([this, acceptor, timer](ErrorCode) {
          if (acceptor->is_open()) Accept(acceptor);
        });
        return;
      }
      Admit<Protocol>(typename Protocol::socket(std::move(socket)));
      Accept(acceptor);
    });
  }

  // Keeps the connection when its peer is within the limits; answers 503
  // and closes it otherwise.
  template <class Protocol>
  void Admit(typename Protocol::socket socket) {
    Peer peer;
    std::optional<ucred> cred;
    if constexpr (std::is_same_v<Protocol, UnixStream>) {
      ucred c{};
      socklen_t len = sizeof(c);
      if (getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &c, &len) == 0) {
        cred = c;
        peer.uid = c.uid;
      } else {
        peer.address = "unix";  // no credentials: counted apart from every uid
      }
    } else {
      ErrorCode ec;
      auto remote = socket.remote_endpoint(ec);
      if (ec) return;  // already gone; the socket closes here
      peer.address = remote.address().to_string();
    }
    Refusal refusal = core_.limiter().Admit(peer);
    if (refusal != Refusal::kNone) {
      std::string message = core_.limiter().Explain(refusal, peer);
      Refuse(socket.native_handle(), message);
      if (uint64_t count = 0; core_.refusal_log().Allow(&count)) {
        spdlog::warn("HTTP connection refused: {} ({} refused since the last report)", message, count);
      }
      return;  // the socket closes here
    }
    std::make_shared<Connection<Protocol>>(core_, std::move(socket), std::move(peer), cred)->Start();
  }

  // Removes the socket file only while it is still the one this server
  // created, so that a newer daemon's socket survives.
  void RemoveSocketFile() {
    if (!own_socket_file_) return;
    own_socket_file_ = false;
    const std::string& path = core_.options().unix_path;
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0 && st.st_dev == socket_dev_ && st.st_ino == socket_ino_) {
      unlink(path.c_str());
    }
  }

  // Declared before io_: connections destroyed with io_ still unregister here.
  ServerCore core_;
  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::unique_ptr<Tcp::acceptor> tcp_acceptor_;
  std::unique_ptr<UnixStream::acceptor> unix_acceptor_;
  int tcp_port_ = -1;
  bool own_socket_file_ = false;
  dev_t socket_dev_ = 0;
  ino_t socket_ino_ = 0;
  std::vector<std::thread> threads_;
  std::mutex stop_mu_;
  bool stopped_ = false;
};

Result<std::unique_ptr<Server>> Server::Start(const ServerOptions& options,
                                                      Handler handler) {
  if (!handler) return InvalidArgument("the HTTP server needs a handler");
  if (options.threads < 1) {
    return InvalidArgument("the HTTP server needs at least 1 thread, got " +
                           std::to_string(options.threads));
  }
  if (options.tcp_port < -1 || options.tcp_port > 65535) {
    return InvalidArgument("the HTTP port must be 0..65535 (or -1 for none), got " +
                           std::to_string(options.tcp_port));
  }
  if (options.tcp_port < 0 && options.unix_path.empty()) {
    return InvalidArgument("the HTTP server needs a TCP port or a unix socket path");
  }
  if (options.read_timeout <= 0 || options.head_timeout <= 0 || options.stream_poll_interval <= 0) {
    return InvalidArgument("the HTTP read and head timeouts and the stream poll interval must be positive");
  }
  const ConnectionLimits& limits = options.limits;
  if (limits.per_user < 0 || limits.per_address < 0 || limits.total < 0 || limits.reserved < 0 ||
      (limits.total > 0 && limits.reserved >= limits.total)) {
    return InvalidArgument("the HTTP connection limits must be 0 (none) or positive, with fewer reserved "
                           "connections than the total; got per user " + std::to_string(limits.per_user) +
                           ", per address " + std::to_string(limits.per_address) + ", total " +
                           std::to_string(limits.total) + ", reserved " + std::to_string(limits.reserved));
  }
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  try {
    GPUHERD_RETURN_IF_ERROR(impl->Listen());
    impl->Run();
  } catch (const std::exception& e) {  // Asio reports some failures (threads, memory) by throwing
    return Internal(std::string("cannot start the HTTP server: ") + e.what());
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { Stop(); }

int Server::tcp_port() const { return impl_->tcp_port(); }

const std::string& Server::unix_path() const { return impl_->unix_path(); }

void Server::Stop() { impl_->Stop(); }

ConnectionStats Server::connection_stats() const { return impl_->connection_stats(); }

}  // namespace gpuherd::http
