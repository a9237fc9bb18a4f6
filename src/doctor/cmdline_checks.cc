// The kernel command line: PCIe power management and the IOMMU mode.
#include <algorithm>

#include "doctor/check_families.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

const char kGrubNote[] =
    "# then run update-grub (or grub2-mkconfig -o /boot/grub2/grub.cfg) and reboot";

std::string GrubAppend(const std::string& parameter) {
  // Adds the parameter inside GRUB_CMDLINE_LINUX="..." unless it is there already.
  return "grep -q '" + parameter + "' /etc/default/grub || sed -i 's/^GRUB_CMDLINE_LINUX=\"/&" +
         parameter + " /' /etc/default/grub";
}

// The value of `key=` on the command line, or nullopt when absent; a bare
// word (e.g. "quiet") has the value "".
std::optional<std::string> Param(const std::vector<std::string>& words, const std::string& key) {
  std::optional<std::string> value;
  for (const std::string& word : words) {
    if (word == key) value = "";
    if (word.rfind(key + "=", 0) == 0) value = word.substr(key.size() + 1);  // the last one wins
  }
  return value;
}

Check PcieAspm(const std::vector<std::string>& words, const std::string& policy) {
  Check check;
  check.id = "cmdline.pcie_aspm";
  check.category = "cmdline";
  check.title = "PCIe ASPM";
  check.recommended = "pcie_aspm=off";
  check.why =
      "Active State Power Management puts idle PCIe links into low-power states; waking them adds "
      "latency to every transfer after a pause and some boards then train the link below its "
      "generation. A Gen3 x16 link carries 15.75 GB/s at best, so every lost lane or generation "
      "shows directly in host-to-GPU copies.";
  auto value = Param(words, "pcie_aspm");
  check.current = value ? "pcie_aspm=" + *value : "not set";
  if (!policy.empty()) check.current += " (policy " + policy + ")";
  if (value == "off" || policy == "performance") return check;
  check.severity = Severity::kWarning;
  check.fix = {GrubAppend("pcie_aspm=off"), kGrubNote};
  return check;
}

Check Iommu(const host::Host& host, const std::vector<std::string>& words) {
  Check check;
  check.id = "cmdline.iommu";
  check.category = "cmdline";
  check.title = "IOMMU mode";
  check.recommended = "iommu=pt (passthrough) or the IOMMU off";
  check.why =
      "With the IOMMU translating DMA, GPU peer-to-peer and GPUDirect RDMA traffic goes through "
      "address translation (and, with ACS, up to the root complex), which cuts bandwidth or makes "
      "NCCL hang; passthrough keeps isolation for VMs and gives the host direct DMA.";
  auto iommu = Param(words, "iommu");
  auto intel = Param(words, "intel_iommu");
  auto amd = Param(words, "amd_iommu");
  std::vector<std::string> shown;
  const std::pair<const char*, const std::optional<std::string>*> params[] = {
      {"iommu", &iommu}, {"intel_iommu", &intel}, {"amd_iommu", &amd}};
  for (const auto& [key, value] : params) {
    if (*value) shown.push_back(std::string(key) + "=" + **value);
  }
  const bool groups = !List(host, "/sys/kernel/iommu_groups").empty();
  std::string text;
  for (const std::string& s : shown) text += (text.empty() ? "" : " ") + s;
  check.current = text.empty() ? (groups ? "IOMMU on, default mode" : "IOMMU off") : text;
  if (iommu == "pt" || iommu == "off" || intel == "off" || amd == "off") return check;
  if (!groups && intel != "on" && amd != "on") return check;
  check.severity = Severity::kWarning;
  check.fix = {GrubAppend("iommu=pt"), kGrubNote};
  return check;
}

}  // namespace

std::vector<Check> CmdlineChecks(const host::Host& host) {
  auto line = ReadLine(host, "/proc/cmdline");
  if (!line) {
    Check check;
    check.id = "cmdline";
    check.category = "cmdline";
    check.title = "kernel command line";
    check.current = "not readable (/proc/cmdline)";
    check.severity = Severity::kInfo;
    return {check};
  }
  const std::vector<std::string> words = SplitWords(*line);
  const std::string policy = SelectedChoice(ReadLine(host, "/sys/module/pcie_aspm/parameters/policy").value_or(""));
  return {PcieAspm(words, policy), Iommu(host, words)};
}

}  // namespace gpuherd::doctor::internal
