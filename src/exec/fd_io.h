// Whole reads and writes on a descriptor, retried on EINTR and short counts:
// what the launcher's socket and the shims' control pipes need.
#pragma once

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

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

// Sends `size` bytes with descriptor `pass` attached (SCM_RIGHTS; -1 sends
// none). A peer that is gone is an error, not a SIGPIPE.
inline bool SendWithFd(int fd, const void* data, size_t size, int pass) {
  iovec iov{const_cast<void*>(data), size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (pass >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), &pass, sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return false;
  return SendAll(fd, static_cast<const char*>(data) + n, size - static_cast<size_t>(n));
}

// Reads exactly `size` bytes; a descriptor that came with them lands in
// *received (close-on-exec; the caller owns it), else *received is -1. On
// failure no descriptor is left open.
inline bool ReceiveWithFd(int fd, void* data, size_t size, int* received) {
  iovec iov{data, size};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *received = -1;
  if (n > 0) {
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(received, CMSG_DATA(c), sizeof(int));
    }
  }
  if (n <= 0 || !ReadExact(fd, static_cast<char*>(data) + n, size - static_cast<size_t>(n))) {
    if (*received >= 0) close(*received);
    *received = -1;
    return false;
  }
  return true;
}

}  // namespace gpuherd::exec
