// Private to the doctor: small readers of /proc and /sys files through the
// host interface, and the machine's network adapters as sysfs shows them.
// A file that cannot be read is std::nullopt or an empty list: the checks
// decide what a missing file means.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/host.h"

namespace gpuherd::doctor::internal {

std::string Trim(std::string_view text);
std::vector<std::string> SplitWords(std::string_view text);
// The first line of a file, trimmed.
std::optional<std::string> ReadLine(const host::Host& host, const std::string& path);
std::optional<int64_t> ReadInt(const host::Host& host, const std::string& path);
// Directory entries, sorted; empty when the directory is missing.
std::vector<std::string> List(const host::Host& host, const std::string& path);
// The selected word of a sysfs choice file: "always [madvise] never" -> "madvise".
std::string SelectedChoice(std::string_view text);
// Single-quotes a word for a POSIX shell.
std::string ShellQuote(std::string_view word);
// Commands that set a sysctl now and keep it in /etc/sysctl.d/90-gpuherd.conf.
std::vector<std::string> SysctlFix(const std::string& key, const std::string& value);

// One port of an InfiniBand or RoCE adapter (/sys/class/infiniband/*/ports/*).
struct RdmaPort {
  std::string device;               // "mlx5_0"
  int port = 1;
  std::string state;                // "ACTIVE", "DOWN", "INIT", ...
  std::string rate;                 // "200 Gb/sec (4X HDR)"
  std::optional<double> rate_gbps;  // 200
  std::string link_layer;           // "InfiniBand" or "Ethernet" (RoCE)
  std::vector<std::string> netdevs; // the adapter's network interfaces ("ib0")
  std::optional<int> numa_node;     // the adapter's; nullopt when unknown (-1)
};
std::vector<RdmaPort> ListRdmaPorts(const host::Host& host);

// A network interface of /sys/class/net.
struct NetDevice {
  std::string name;
  bool physical = false;            // backed by a device (not lo, bridges, veths)
  std::optional<int> numa_node;
  std::optional<int64_t> mtu;
};
std::vector<NetDevice> ListNetDevices(const host::Host& host);

}  // namespace gpuherd::doctor::internal
