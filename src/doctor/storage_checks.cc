// Storage: the I/O scheduler of NVMe drives and noatime on data mounts.
#include <set>

#include "doctor/check_families.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

const char kUdevRule[] = "/etc/udev/rules.d/60-gpuherd-nvme-scheduler.rules";

Check NvmeScheduler(const host::Host& host, const std::string& disk) {
  Check check;
  check.id = "storage.scheduler." + disk;
  check.category = "storage";
  check.title = "I/O scheduler " + disk;
  check.recommended = "none";
  check.why =
      "NVMe drives queue and order requests themselves across many hardware queues; a software "
      "scheduler such as mq-deadline or bfq adds CPU work and latency to every read of training data "
      "without reordering anything useful.";
  const std::string path = "/sys/block/" + disk + "/queue/scheduler";
  auto line = ReadLine(host, path);
  if (!line) {
    check.current = "not readable (" + path + ")";
    check.severity = Severity::kInfo;
    return check;
  }
  check.current = SelectedChoice(*line);
  if (check.current == "none") return check;
  check.severity = Severity::kWarning;
  check.fix = {"echo none > " + path,
               "echo 'ACTION==\"add|change\", KERNEL==\"nvme[0-9]*n[0-9]*\", ATTR{queue/scheduler}=\"none\"' > " +
                   std::string(kUdevRule)};
  return check;
}

// Mounts that hold data: block-device file systems other than the system's own.
bool IsDataMount(const std::string& device, const std::string& point, const std::string& type) {
  static const std::set<std::string> kTypes = {"ext4", "xfs", "btrfs", "ext3", "f2fs"};
  static const std::set<std::string> kSystem = {"/", "/boot", "/boot/efi", "/usr", "/var", "/tmp"};
  return device.rfind("/dev/", 0) == 0 && kTypes.count(type) && !kSystem.count(point);
}

std::vector<Check> Noatime(const host::Host& host) {
  std::vector<Check> checks;
  auto text = host.ReadFile("/proc/mounts");
  if (!text.ok()) return checks;
  size_t start = 0;
  while (start < text->size()) {
    size_t end = text->find('\n', start);
    if (end == std::string::npos) end = text->size();
    const std::vector<std::string> fields = SplitWords(text->substr(start, end - start));
    start = end + 1;
    if (fields.size() < 4 || !IsDataMount(fields[0], fields[1], fields[2])) continue;
    const std::string& point = fields[1];
    const std::string options = "," + fields[3] + ",";
    Check check;
    check.id = "storage.noatime." + point;
    check.category = "storage";
    check.title = "noatime " + point;
    check.recommended = "noatime";
    check.why =
        "Without noatime reading a file also writes its access time: an epoch over millions of "
        "small samples turns into millions of metadata writes that compete with the reads.";
    check.current = options.find(",noatime,") != std::string::npos   ? "noatime"
                    : options.find(",relatime,") != std::string::npos ? "relatime"
                                                                       : "atime";
    if (check.current != "noatime") {
      check.severity = Severity::kWarning;
      const std::string quoted = ShellQuote(point);
      check.fix = {"mount -o remount,noatime " + quoted,
                   "# and add noatime to the options of " + point + " in /etc/fstab"};
    }
    checks.push_back(std::move(check));
  }
  return checks;
}

}  // namespace

std::vector<Check> StorageChecks(const host::Host& host) {
  std::vector<Check> checks;
  for (const std::string& disk : List(host, "/sys/block")) {
    if (disk.rfind("nvme", 0) == 0) checks.push_back(NvmeScheduler(host, disk));
  }
  std::vector<Check> mounts = Noatime(host);
  checks.insert(checks.end(), mounts.begin(), mounts.end());
  if (checks.empty()) {
    Check check;
    check.id = "storage";
    check.category = "storage";
    check.title = "NVMe drives and data mounts";
    check.current = "none found";
    check.severity = Severity::kOk;
    checks.push_back(check);
  }
  return checks;
}

}  // namespace gpuherd::doctor::internal
