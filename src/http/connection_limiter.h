// The server's count of open connections per peer and in total, which decides
// whether a newly accepted connection is kept (ConnectionLimits). Sockets stay
// with the server; this only counts. Thread-safe: both listeners admit here.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "http/server.h"

namespace gpuherd::http {

// Who is at the other end of a connection.
struct Peer {
  std::optional<uint32_t> uid;  // unix socket: SO_PEERCRED's uid
  std::string address;          // TCP: the peer's IP address ("127.0.0.1")
};

// Which limit refused a connection; kNone: it was admitted.
enum class Refusal { kNone, kPerUser, kPerAddress, kTotal };

class ConnectionLimiter {
 public:
  explicit ConnectionLimiter(ConnectionLimits limits) : limits_(std::move(limits)) {}

  // Takes a slot for `peer` and returns kNone, or counts the refusal and
  // returns the limit it is over. Every admitted peer is Release()d once.
  Refusal Admit(const Peer& peer);
  void Release(const Peer& peer);

  void CountAcceptError();
  ConnectionStats Stats() const;

  // What the refused peer is told: the limit, and what to do about it.
  std::string Explain(Refusal refusal, const Peer& peer) const;

 private:
  bool Reserved(const Peer& peer) const;

  const ConnectionLimits limits_;
  mutable std::mutex mu_;
  int open_ = 0;
  std::unordered_map<uint32_t, int> by_uid_;
  std::unordered_map<std::string, int> by_address_;
  ConnectionStats stats_;
};

}  // namespace gpuherd::http
