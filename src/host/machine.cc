#include "host/machine.h"

#include <charconv>
#include <string_view>

#include "host/cpulist.h"

namespace gpuherd::host {

Result<MachineSize> ReadMachineSize(const Host& host) {
  MachineSize size;
  auto online = ReadTrimmed(host, "/sys/devices/system/cpu/online");
  if (!online.ok()) return online.status();
  auto cpus = ParseCpuList(*online);
  if (!cpus.ok()) return cpus.status().Annotate("/sys/devices/system/cpu/online");
  size.cpus = static_cast<int>(cpus->size());

  auto meminfo = host.ReadFile("/proc/meminfo");
  if (!meminfo.ok()) return meminfo.status();
  std::string_view text = *meminfo;
  constexpr std::string_view kKey = "MemTotal:";
  size_t at = text.find(kKey);
  if (at != 0 && at != std::string_view::npos && text[at - 1] != '\n') at = std::string_view::npos;
  if (at == std::string_view::npos) return InvalidArgument("/proc/meminfo has no MemTotal line");
  std::string_view rest = text.substr(at + kKey.size());
  rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
  uint64_t kib = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  if (ec != std::errc() || std::string_view(end, 3) != " kB" || kib > (uint64_t{1} << 44)) {
    return InvalidArgument("/proc/meminfo: cannot read MemTotal");
  }
  size.mem_bytes = kib * 1024;
  return size;
}

}  // namespace gpuherd::host
