// The host's files behind one interface with a root path, as leveldb's Env:
// /proc, /sys and /etc are read through it so that tests and the doctor run
// on fixture trees. Paths given to it are absolute host paths ("/proc/meminfo")
// and are resolved under the root. Thread-safe (no mutable state).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuherd::host {

class Host {
 public:
  virtual ~Host() = default;
  virtual Result<std::string> ReadFile(const std::string& path) const = 0;
  // Names of the entries of a directory, sorted.
  virtual Result<std::vector<std::string>> ListDir(const std::string& path) const = 0;
  virtual bool Exists(const std::string& path) const = 0;
  // Reads a symlink's target (e.g. /sys/bus/pci/devices/X/driver).
  virtual Result<std::string> ReadLink(const std::string& path) const = 0;
  virtual std::string Hostname() const = 0;
  virtual const std::string& root() const = 0;
};

// root "/" is the real machine; any other directory is a fixture tree. The
// hostname is read from <root>/etc/hostname when root is not "/".
std::unique_ptr<Host> NewHost(const std::string& root = "/");

// The session id of a process (field 6 of /proc/<pid>/stat); nullopt when the
// process is gone or its stat cannot be parsed.
std::optional<int> ProcessSession(const Host& host, int pid);

// First line of a file without its trailing newline and spaces.
Result<std::string> ReadTrimmed(const Host& host, const std::string& path);

}  // namespace gpuherd::host
