// Resource limits for users' jobs: locked memory (RDMA) and open files, as
// pam_limits sets them from /etc/security/limits.conf and limits.d, and as
// this process sees them in /proc/self/limits.
#include <map>

#include "doctor/check_families.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

constexpr int64_t kUnlimited = -1;
const char kLimitsFile[] = "/etc/security/limits.d/90-gpuherd.conf";

struct Limit {
  std::optional<int64_t> soft, hard;  // kUnlimited for unlimited
};

std::optional<int64_t> ParseValue(const std::string& value) {
  if (value == "unlimited" || value == "infinity" || value == "-1") return kUnlimited;
  try {
    size_t used = 0;
    int64_t v = std::stoll(value, &used);
    if (used == value.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// The limit of `item` for every user ("*"), as pam_limits reads the files:
// limits.conf, then limits.d/*.conf in order, a later line replacing an
// earlier one for the same type ("-" sets both).
Limit ConfiguredForAll(const host::Host& host, const std::string& item, std::string* sources) {
  std::vector<std::string> files = {"/etc/security/limits.conf"};
  for (const std::string& name : List(host, "/etc/security/limits.d")) {
    if (name.size() > 5 && name.substr(name.size() - 5) == ".conf") files.push_back("/etc/security/limits.d/" + name);
  }
  Limit limit;
  for (const std::string& file : files) {
    auto text = host.ReadFile(file);
    if (!text.ok()) continue;
    size_t start = 0;
    while (start < text->size()) {
      size_t end = text->find('\n', start);
      if (end == std::string::npos) end = text->size();
      std::string line = text->substr(start, end - start);
      start = end + 1;
      line = line.substr(0, line.find('#'));
      const std::vector<std::string> f = SplitWords(line);
      if (f.size() != 4 || f[0] != "*" || f[2] != item) continue;
      auto value = ParseValue(f[3]);
      if (!value) continue;
      if (f[1] == "soft" || f[1] == "-") limit.soft = value;
      if (f[1] == "hard" || f[1] == "-") limit.hard = value;
      if (sources->find(file) == std::string::npos) *sources += (sources->empty() ? "" : ", ") + file;
    }
  }
  return limit;
}

// Soft and hard values of one row of /proc/self/limits ("Max locked memory").
Limit ProcessLimit(const host::Host& host, const std::string& row) {
  Limit limit;
  auto text = host.ReadFile("/proc/self/limits");
  if (!text.ok()) return limit;
  size_t at = text->find(row);
  if (at == std::string::npos) return limit;
  size_t end = text->find('\n', at);
  const std::vector<std::string> f = SplitWords(text->substr(at + row.size(), end - at - row.size()));
  if (f.size() >= 2) {
    limit.soft = ParseValue(f[0]);
    limit.hard = ParseValue(f[1]);
  }
  return limit;
}

std::string Show(std::optional<int64_t> v, int64_t unit_bytes) {
  if (!v) return "not set";
  if (*v == kUnlimited) return "unlimited";
  if (unit_bytes == 0) return std::to_string(*v);
  const int64_t bytes = *v * unit_bytes;
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

std::vector<std::string> LimitsFix(const std::string& item, const std::string& value) {
  return {"touch " + std::string(kLimitsFile) + " && sed -i '/^\\* *[a-z-]* *" + item + " /d' " + kLimitsFile +
              " && printf '* soft " + item + " " + value + "\\n* hard " + item + " " + value + "\\n' >> " +
              kLimitsFile,
          "# applies at the next login; services started by systemd (slurmd, dockerd, gpuherd) need "
          "Limit" + std::string(item == "memlock" ? "MEMLOCK=infinity" : "NOFILE=" + value) + " in their unit"};
}

Check Memlock(const host::Host& host) {
  Check check;
  check.id = "limits.memlock";
  check.category = "limits";
  check.title = "locked memory (memlock)";
  check.recommended = "unlimited (soft and hard, for every user)";
  check.why =
      "RDMA over InfiniBand or RoCE, and GPUDirect, pin the memory they register, and pinned memory "
      "counts against memlock: with the usual 8 MiB NCCL cannot register its buffers and fails or "
      "falls back to slower transports. Containers need --ulimit memlock=-1 for the same reason.";
  std::string sources;
  const Limit configured = ConfiguredForAll(host, "memlock", &sources);
  const Limit process = ProcessLimit(host, "Max locked memory");
  check.current = "configured: soft " + Show(configured.soft, 1024) + ", hard " + Show(configured.hard, 1024) +
                  (sources.empty() ? "" : " (" + sources + ")") + "; this process: " + Show(process.soft, 1);
  if (configured.soft == kUnlimited && configured.hard == kUnlimited) return check;
  const bool rdma = !ListRdmaPorts(host).empty();
  check.severity = rdma ? Severity::kCritical : Severity::kWarning;
  if (rdma) check.why += " This machine has RDMA adapters.";
  check.fix = LimitsFix("memlock", "unlimited");
  return check;
}

Check OpenFiles(const host::Host& host) {
  constexpr int64_t kMinFiles = 65536;
  Check check;
  check.id = "limits.nofile";
  check.category = "limits";
  check.title = "open files (nofile)";
  check.recommended = ">= 65536 (soft)";
  check.why =
      "Data loaders with many worker processes keep dataset shards, sockets and shared-memory "
      "handles open; at the default soft limit of 1024 they fail with 'Too many open files' "
      "in the middle of an epoch.";
  std::string sources;
  const Limit configured = ConfiguredForAll(host, "nofile", &sources);
  const Limit process = ProcessLimit(host, "Max open files");
  check.current = "configured: soft " + Show(configured.soft, 0) + ", hard " + Show(configured.hard, 0) +
                  (sources.empty() ? "" : " (" + sources + ")") + "; this process: " + Show(process.soft, 0);
  auto enough = [&](std::optional<int64_t> v) { return v && (*v == kUnlimited || *v >= kMinFiles); };
  // Without a configured value every login gets the process default.
  const std::optional<int64_t> soft = configured.soft ? configured.soft : process.soft;
  if (enough(soft)) return check;
  check.severity = Severity::kWarning;
  check.fix = LimitsFix("nofile", "1048576");
  return check;
}

}  // namespace

std::vector<Check> LimitsChecks(const host::Host& host) { return {Memlock(host), OpenFiles(host)}; }

}  // namespace gpuherd::doctor::internal
