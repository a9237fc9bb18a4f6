// Whole reads and writes on a descriptor, retried on EINTR and short counts:
// what the launcher's socket and the shims' control pipes need.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace gpuherd::exec {

// Calls `io(p, left)` until `size` bytes have moved; false on an error or
// end-of-file (a call that moves nothing).
template <typename Io>
bool MoveAll(char* p, size_t size, Io io) {
  while (size > 0) {
    ssize_t n = io(p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

inline bool ReadExact(int fd, void* data, size_t size) {
  return MoveAll(static_cast<char*>(data), size, [fd](char* p, size_t n) { return read(fd, p, n); });
}

// For pipes (send refuses them); the caller ignores SIGPIPE.
inline bool WriteAll(int fd, const void* data, size_t size) {
  return MoveAll(const_cast<char*>(static_cast<const char*>(data)), size,
                 [fd](char* p, size_t n) { return write(fd, p, n); });
}

// For sockets: a peer that is gone is an error, not a SIGPIPE.
inline bool SendAll(int fd, const void* data, size_t size) {
  return MoveAll(const_cast<char*>(static_cast<const char*>(data)), size,
                 [fd](char* p, size_t n) { return send(fd, p, n, MSG_NOSIGNAL); });
}

}  // namespace gpuherd::exec
