// Kernel settings: sysctls of the memory and network stacks, transparent huge
// pages, the CPU frequency governor and automatic NUMA balancing.
#include <cctype>
#include <functional>
#include <map>

#include "doctor/check_families.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

constexpr int64_t k16MiB = 16 * 1024 * 1024;

struct SysctlSpec {
  std::string key;
  std::string recommended;   // for people
  std::string fix_value;     // what the fix sets
  // True when the values read (one or more numbers) are good enough.
  std::function<bool(const std::vector<int64_t>&)> good;
  std::string why;
};

std::optional<std::vector<int64_t>> ParseNumbers(const std::string& text) {
  std::vector<int64_t> values;
  for (const std::string& word : SplitWords(text)) {
    try {
      size_t used = 0;
      values.push_back(std::stoll(word, &used));
      if (used != word.size()) return std::nullopt;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }
  if (values.empty()) return std::nullopt;
  return values;
}

Check SysctlCheck(const host::Host& host, const SysctlSpec& spec) {
  Check check;
  check.id = spec.key.rfind("kernel.", 0) == 0 ? spec.key : "kernel." + spec.key;
  check.category = "kernel";
  check.title = spec.key;
  check.recommended = spec.recommended;
  check.why = spec.why;
  std::string path = "/proc/sys/" + spec.key;
  for (char& c : path) c = c == '.' ? '/' : c;
  auto line = ReadLine(host, path);
  if (!line) {
    check.current = "not readable (" + path + ")";
    check.severity = Severity::kInfo;
    return check;
  }
  check.current = *line;
  for (char& c : check.current) c = c == '\t' ? ' ' : c;
  auto values = ParseNumbers(*line);
  if (values && spec.good(*values)) return check;
  check.severity = Severity::kWarning;
  check.fix = SysctlFix(spec.key, spec.fix_value);
  return check;
}

std::vector<SysctlSpec> SysctlSpecs() {
  auto at_most = [](int64_t limit) {
    return [limit](const std::vector<int64_t>& v) { return v.size() == 1 && v[0] <= limit; };
  };
  auto at_least = [](int64_t limit) {
    return [limit](const std::vector<int64_t>& v) { return v.size() == 1 && v[0] >= limit; };
  };
  auto triple_max_at_least = [](int64_t limit) {
    return [limit](const std::vector<int64_t>& v) { return v.size() == 3 && v[2] >= limit; };
  };
  const std::string socket_why =
      "The kernel caps every socket's buffer at this size, and a TCP stream cannot carry more than one "
      "buffer per round trip: below 16 MiB, NCCL's socket transport and reads from network storage "
      "cannot fill a 25-100 Gb/s link and the GPUs wait for data.";
  const std::string tcp_why =
      "Minimum, default and maximum of the kernel's automatic TCP buffer sizing; a maximum below 16 MiB "
      "throttles multi-gigabit streams (NCCL over sockets, dataset and checkpoint transfers) regardless "
      "of rmem_max/wmem_max.";
  return {
      {"vm.swappiness", "1 (at most 10)", "1", at_most(10),
       "With the default of 60 the kernel swaps out parts of training processes to keep page cache; one "
       "cluster saw GPU utilization swing by 40% until swappiness was set to 1. A tuned set of system "
       "settings made ResNet-50 training 37% faster and used 23% less energy."},
      // 0 means the byte-valued twin (vm.dirty_bytes) is in use instead.
      {"vm.dirty_ratio", "10 (at most)", "10", at_most(10),
       "The share of memory that may hold unwritten data before writers block. A high ratio lets "
       "multi-gigabyte checkpoints pile up in the page cache and then flush in one long burst that "
       "stalls the training process and the data loader; 10 flushes early and steadily."},
      {"vm.dirty_background_ratio", "5 (at most)", "5", at_most(5),
       "When background write-back starts. At 5% the kernel writes checkpoints out while training "
       "continues, instead of waiting until writers hit vm.dirty_ratio and block."},
      {"net.core.rmem_max", ">= 16777216 (16 MiB)", std::to_string(k16MiB), at_least(k16MiB), socket_why},
      {"net.core.wmem_max", ">= 16777216 (16 MiB)", std::to_string(k16MiB), at_least(k16MiB), socket_why},
      {"net.ipv4.tcp_rmem", "4096 87380 16777216", "4096 87380 16777216", triple_max_at_least(k16MiB), tcp_why},
      {"net.ipv4.tcp_wmem", "4096 65536 16777216", "4096 65536 16777216", triple_max_at_least(k16MiB), tcp_why},
      {"kernel.numa_balancing", "0", "0", at_most(0),
       "Automatic NUMA balancing unmaps pages periodically to learn where they are used and migrates "
       "them; the faults and migrations add jitter to data loading and pinned-memory copies. Binding "
       "jobs to their GPUs' NUMA node is the better tool (gpuherd pins its jobs to their GPUs' CPUs): "
       "a wrong NUMA binding cost 60% of GPU-to-GPU bandwidth on a V100 cluster."},
  };
}

Check TransparentHugePages(const host::Host& host) {
  Check check;
  check.id = "kernel.transparent_hugepage";
  check.category = "kernel";
  check.title = "transparent huge pages";
  check.recommended = "madvise (or never)";
  check.why =
      "In 'always' mode khugepaged compacts memory in the background and page faults may stall "
      "while the kernel assembles huge pages, which shows as latency spikes in data loaders and "
      "pinned-memory allocation; 'madvise' gives huge pages only to programs that ask for them.";
  const std::string path = "/sys/kernel/mm/transparent_hugepage/enabled";
  auto line = ReadLine(host, path);
  if (!line) {
    check.current = "not readable (" + path + ")";
    check.severity = Severity::kInfo;
    return check;
  }
  check.current = SelectedChoice(*line);
  if (check.current == "madvise" || check.current == "never") return check;
  check.severity = Severity::kWarning;
  check.fix = {"echo madvise > " + path,
               "# to keep it after a reboot, add transparent_hugepage=madvise to GRUB_CMDLINE_LINUX "
               "in /etc/default/grub and run update-grub"};
  return check;
}

Check CpuGovernor(const host::Host& host) {
  Check check;
  check.id = "kernel.cpu_governor";
  check.category = "kernel";
  check.title = "CPU frequency governor";
  check.recommended = "performance on every CPU";
  check.why =
      "Power-saving governors lower CPU clocks between bursts of work; data loading, augmentation "
      "and kernel launches run on the CPU, so a slow CPU leaves the GPU waiting.";
  std::map<std::string, int> counts;  // governor -> CPUs
  for (const std::string& cpu : List(host, "/sys/devices/system/cpu")) {
    if (cpu.rfind("cpu", 0) != 0 || cpu.size() == 3 || !std::isdigit(static_cast<unsigned char>(cpu[3]))) continue;
    auto governor = ReadLine(host, "/sys/devices/system/cpu/" + cpu + "/cpufreq/scaling_governor");
    if (governor) ++counts[*governor];
  }
  if (counts.empty()) {
    check.current = "no cpufreq governor (a virtual machine, or the firmware manages clocks)";
    check.recommended = "performance where cpufreq is available";
    check.severity = Severity::kInfo;
    return check;
  }
  for (const auto& [governor, n] : counts) {
    check.current += (check.current.empty() ? "" : ", ") + governor + " (" + std::to_string(n) + " CPUs)";
  }
  if (counts.size() == 1 && counts.count("performance")) return check;
  check.severity = Severity::kWarning;
  check.fix = {
      "for g in /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor; do echo performance > \"$g\"; done",
      "# to keep it after a reboot: cpupower frequency-set -g performance from a systemd unit, or a "
      "tuned profile such as throughput-performance"};
  return check;
}

}  // namespace

std::vector<Check> KernelChecks(const host::Host& host) {
  std::vector<Check> checks;
  for (const SysctlSpec& spec : SysctlSpecs()) checks.push_back(SysctlCheck(host, spec));
  checks.push_back(TransparentHugePages(host));
  checks.push_back(CpuGovernor(host));
  return checks;
}

}  // namespace gpuherd::doctor::internal
