#include "doctor/sysfs.h"

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace gpuherd::doctor::internal {

std::string Trim(std::string_view text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> SplitWords(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    size_t start = i;
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

std::optional<std::string> ReadLine(const host::Host& host, const std::string& path) {
  auto line = host::ReadTrimmed(host, path);
  if (!line.ok()) return std::nullopt;
  return Trim(*line);
}

std::optional<int64_t> ReadInt(const host::Host& host, const std::string& path) {
  auto line = ReadLine(host, path);
  if (!line) return std::nullopt;
  int64_t value = 0;
  auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), value);
  if (ec != std::errc() || end != line->data() + line->size()) return std::nullopt;
  return value;
}

std::vector<std::string> List(const host::Host& host, const std::string& path) {
  auto names = host.ListDir(path);
  return names.ok() ? *names : std::vector<std::string>{};
}

std::string SelectedChoice(std::string_view text) {
  size_t open = text.find('[');
  size_t close = text.find(']', open == std::string_view::npos ? 0 : open);
  if (open == std::string_view::npos || close == std::string_view::npos) return Trim(text);
  return std::string(text.substr(open + 1, close - open - 1));
}

std::string ShellQuote(std::string_view word) {
  bool plain = !word.empty();
  for (char c : word) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view("._-/=:,+@").find(c) == std::string_view::npos) {
      plain = false;
    }
  }
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::vector<std::string> SysctlFix(const std::string& key, const std::string& value) {
  const std::string file = "/etc/sysctl.d/90-gpuherd.conf";
  std::string pattern = key;
  for (size_t i = 0; (i = pattern.find('.', i)) != std::string::npos; i += 2) pattern.replace(i, 1, "\\.");
  return {
      "sysctl -w " + ShellQuote(key + "=" + value),
      // Replaces an earlier line for the same key so the file stays one line per key.
      "touch " + file + " && sed -i '/^" + pattern + " *=/d' " + file + " && echo " +
          ShellQuote(key + " = " + value) + " >> " + file,
  };
}

namespace {

std::optional<int> NumaNode(const host::Host& host, const std::string& device_dir) {
  auto node = ReadInt(host, device_dir + "/numa_node");
  if (!node || *node < 0) return std::nullopt;
  return static_cast<int>(*node);
}

}  // namespace

std::vector<RdmaPort> ListRdmaPorts(const host::Host& host) {
  std::vector<RdmaPort> ports;
  const std::string base = "/sys/class/infiniband/";
  for (const std::string& device : List(host, base)) {
    const std::string dir = base + device;
    const std::optional<int> numa = NumaNode(host, dir + "/device");
    const std::vector<std::string> netdevs = List(host, dir + "/device/net");
    for (const std::string& port_name : List(host, dir + "/ports")) {
      RdmaPort port;
      port.device = device;
      port.port = std::atoi(port_name.c_str());
      const std::string port_dir = dir + "/ports/" + port_name;
      // "4: ACTIVE": the number is the IB spec's state code, the word is for people.
      std::string state = ReadLine(host, port_dir + "/state").value_or("unknown");
      size_t colon = state.find(':');
      port.state = Trim(colon == std::string::npos ? state : state.substr(colon + 1));
      port.rate = ReadLine(host, port_dir + "/rate").value_or("");
      double gbps = 0;
      const char* begin = port.rate.data();
      auto [end, ec] = std::from_chars(begin, begin + port.rate.size(), gbps);
      if (ec == std::errc() && end != begin) port.rate_gbps = gbps;
      port.link_layer = ReadLine(host, port_dir + "/link_layer").value_or("InfiniBand");
      port.netdevs = netdevs;
      port.numa_node = numa;
      ports.push_back(std::move(port));
    }
  }
  return ports;
}

std::vector<NetDevice> ListNetDevices(const host::Host& host) {
  std::vector<NetDevice> devices;
  for (const std::string& name : List(host, "/sys/class/net")) {
    NetDevice dev;
    dev.name = name;
    const std::string dir = "/sys/class/net/" + name;
    dev.physical = host.Exists(dir + "/device");
    if (dev.physical) dev.numa_node = NumaNode(host, dir + "/device");
    dev.mtu = ReadInt(host, dir + "/mtu");
    devices.push_back(std::move(dev));
  }
  return devices;
}

}  // namespace gpuherd::doctor::internal
