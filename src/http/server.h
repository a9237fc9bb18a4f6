// gpuherd's HTTP/1.1 server (Boost.Beast): one handler served on TCP
// (loopback by default) and on a unix socket in the state directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::http {

struct Request {
  std::string method;                         // "GET", "POST", ...
  std::string target;                         // raw, as sent: "/jobs/a%20b?all=1"
  std::string path;                           // decoded, without the query: "/jobs/a b"
  std::map<std::string, std::string> query;   // decoded; a repeated key keeps its last value
  std::map<std::string, std::string> headers; // names lower-cased; repeats joined by ", "
  std::string body;
  bool via_unix_socket = false;
  // The peer's credentials (SO_PEERCRED); set only for the unix socket.
  std::optional<uint32_t> peer_uid;
  std::optional<uint32_t> peer_gid;
  std::optional<int32_t> peer_pid;
};

// Produces a streamed (chunked) response body piece by piece. The server calls
// it repeatedly, never concurrently for one response, from its own threads. It
// sets *chunk to the next piece (empty when nothing is ready yet) and returns
// false after the last piece. It must not block for long: when nothing is
// ready it returns true with an empty chunk and is called again after
// ServerOptions::stream_poll_interval. It is destroyed when the stream
// ends, when the client disconnects or when the server stops.
using StreamProducer = std::function<bool(std::string* chunk)>;

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  // With `stream` set, a non-empty body is sent as the first chunk.
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the response is sent with Transfer-Encoding: chunked and the
  // connection closes after the last chunk.
  StreamProducer stream;
};

// The handler may be called from several server threads at once. An exception
// it throws becomes a 500 response; it never reaches the server's threads.
using Handler = std::function<Response(const Request&)>;

// {"error": message} with the given status.
Response ErrorResponse(int status, const std::string& message);

// How many connections the server holds open at once, so that one user's
// idle sockets cannot take every file descriptor of a daemon that serves all
// users. A connection over a limit is answered 503 (when the reply fits the
// socket's buffer without waiting) and closed at once. 0 disables a limit.
struct ConnectionLimits {
  int per_user = 64;     // per peer uid on the unix socket (SO_PEERCRED)
  int per_address = 64;  // per peer IP address over TCP
  int total = 1024;      // over both listeners
  // Of `total`, the slots that only the uids in `reserved_for` may take, so
  // that an admin still gets in when other users have filled the rest.
  int reserved = 8;
  std::vector<uint32_t> reserved_for = {0};
};

// Counters since the server started; read with Server::connection_stats().
struct ConnectionStats {
  int open = 0;                      // connections open now
  int limit = 0;                     // ConnectionLimits::total
  uint64_t refused_per_user = 0;     // over ConnectionLimits::per_user
  uint64_t refused_per_address = 0;  // over ConnectionLimits::per_address
  uint64_t refused_total = 0;        // over ConnectionLimits::total (or its reserve)
  uint64_t accept_errors = 0;        // accept() failures, mostly EMFILE/ENFILE
};

struct ServerOptions {
  std::string tcp_host = "127.0.0.1";
  int tcp_port = 0;               // 0 = ephemeral, -1 = no TCP listener
  std::string unix_path;          // empty = no unix socket
  int threads = 2;                // also the number of handlers that can run at once
  size_t max_body_bytes = 1 << 20;
  // A request head (line and headers) must arrive within this, counted from
  // the accept or from the end of the previous response: a connection that
  // sends nothing (idle keep-alive, slowloris) is closed after it.
  DurationMs head_timeout = 5000;
  DurationMs read_timeout = 30000;  // per request body read and per response write
  DurationMs stream_poll_interval = 100;
  ConnectionLimits limits;
};

class Server {
 public:
  // Binds the listeners and starts the threads. Fails with a Status naming the
  // port or socket path when a listener cannot be set up.
  static Result<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                   Handler handler);

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server();  // Stop()

  // The bound TCP port (useful with tcp_port = 0); -1 without a TCP listener.
  int tcp_port() const;
  const std::string& unix_path() const;
  // Thread-safe.
  ConnectionStats connection_stats() const;

  // Closes the listeners and idle connections, lets requests whose handler is
  // running finish, ends streams, joins the threads and removes the socket
  // file. Safe to call twice. Must not be called from inside a handler.
  void Stop();

 private:
  class Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuherd::http
