#include "cli/daemon_locator.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace gpuherd::cli {

SystemDaemonPaths SystemPaths() {
  std::string root;
  if (const char* env = std::getenv("GPUHERD_SYSTEM_ROOT"); env != nullptr && *env != '\0') root = env;
  while (!root.empty() && root.back() == '/') root.pop_back();
  return {{root + "/run/gpuherd/gpuherd.sock", root + "/var/lib/gpuherd/gpuherd.sock"}, root + "/var/lib/gpuherd"};
}

bool SocketAnswers(const std::string& path) {
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof(address.sun_path)) return false;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  bool answers = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) == 0;
  ::close(fd);
  return answers;
}

std::string DaemonLocation::Describe() const {
  if (found_by == "--home") return "the daemon of --home";
  if (found_by == "GPUHERD_HOME") return "the daemon of $GPUHERD_HOME";
  if (found_by == "system") return "the system daemon (you run none of your own)";
  return "your own daemon";
}

DaemonLocation LocateDaemon(const std::string& home_flag, const SystemDaemonPaths& system) {
  if (!home_flag.empty()) return {ResolveStateDir(home_flag), "--home"};
  if (const char* env = std::getenv("GPUHERD_HOME"); env != nullptr && *env != '\0') {
    return {ResolveStateDir(""), "GPUHERD_HOME"};
  }
  DaemonLocation own{ResolveStateDir(""), "own"};
  if (SocketAnswers(own.dir.socket_path())) return own;
  for (const std::string& socket : system.sockets) {
    if (socket != own.dir.socket_path() && SocketAnswers(socket)) {
      return {StateDir{system.home, socket}, "system"};
    }
  }
  // Nobody answers: the user's own home, whose messages say how to start one.
  return own;
}

}  // namespace gpuherd::cli
