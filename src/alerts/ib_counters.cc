#include "alerts/ib_counters.h"

#include <charconv>
#include <string>
#include <vector>

namespace gpuherd::alerts {
namespace {

constexpr char kIbClass[] = "/sys/class/infiniband";

}  // namespace

Result<std::vector<IbPortCounters>> ReadIbCounters(const host::Host& host) {
  std::vector<IbPortCounters> ports;
  if (!host.Exists(kIbClass)) return ports;
  Result<std::vector<std::string>> devices = host.ListDir(kIbClass);
  if (!devices.ok()) return devices.status().Annotate("list InfiniBand devices");
  for (const std::string& device : *devices) {
    std::string ports_dir = std::string(kIbClass) + "/" + device + "/ports";
    Result<std::vector<std::string>> port_names = host.ListDir(ports_dir);
    if (!port_names.ok()) continue;  // a device without ports (or gone meanwhile)
    for (const std::string& port : *port_names) {
      std::string counters_dir = ports_dir + "/" + port + "/counters";
      if (!host.Exists(counters_dir)) continue;
      IbPortCounters counters{device, port, {}};
      for (const char* name : kIbErrorCounters) {
        Result<std::string> text = host::ReadTrimmed(host, counters_dir + "/" + name);
        if (!text.ok()) continue;
        uint64_t value = 0;
        const char* end = text->data() + text->size();
        auto [ptr, ec] = std::from_chars(text->data(), end, value);
        if (ec == std::errc() && ptr == end) counters.counters[name] = value;
      }
      ports.push_back(std::move(counters));
    }
  }
  return ports;
}

}  // namespace gpuherd::alerts
