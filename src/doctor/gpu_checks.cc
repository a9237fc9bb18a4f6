// GPU checks: driver present and one version, persistence, PCIe link against
// the card's maximum, ECC on cards that have it, GPUs and NICs on one NUMA node.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "doctor/check_families.h"
#include "doctor/host_gpus.h"
#include "doctor/sysfs.h"

namespace gpuherd::doctor::internal {
namespace {

struct GpuFacts {
  std::string label;   // "GPU 0"
  std::string index;   // for nvidia-smi -i
  std::string uuid;
  std::optional<int> numa_node;
  std::optional<int> max_gen, max_width;
  std::optional<PcieLink> now, under_load;
  std::optional<bool> ecc_enabled;
};

std::vector<GpuFacts> CollectGpus(const DoctorInput& input, const std::vector<HostGpu>& host_gpus) {
  std::map<std::string, const HostGpu*> by_bus;
  for (const HostGpu& g : host_gpus) by_bus[g.pci_bus_id] = &g;
  std::vector<GpuFacts> gpus;
  if (!input.gpus.empty()) {
    for (const gpu::GpuInfo& info : input.gpus) {
      GpuFacts facts;
      facts.label = "GPU " + std::to_string(info.index);
      facts.index = std::to_string(info.index);
      facts.uuid = info.uuid;
      facts.numa_node = info.numa_node;
      facts.max_gen = info.max_pcie_gen;
      facts.max_width = info.max_pcie_width;
      facts.ecc_enabled = info.ecc_enabled;
      auto host_gpu = by_bus.find(NormalizeBusId(info.pci_bus_id));
      if (auto it = input.pcie_now.find(info.uuid); it != input.pcie_now.end()) {
        facts.now = it->second;
      } else if (host_gpu != by_bus.end() && host_gpu->second->link_gen && host_gpu->second->link_width) {
        facts.now = PcieLink{*host_gpu->second->link_gen, *host_gpu->second->link_width};
      }
      if (auto it = input.pcie_under_load.find(info.uuid); it != input.pcie_under_load.end()) {
        facts.under_load = it->second;
      }
      if (!facts.numa_node && host_gpu != by_bus.end()) facts.numa_node = host_gpu->second->numa_node;
      gpus.push_back(std::move(facts));
    }
    return gpus;
  }
  for (size_t i = 0; i < host_gpus.size(); ++i) {
    const HostGpu& g = host_gpus[i];
    GpuFacts facts;
    const std::string n = g.minor ? std::to_string(*g.minor) : std::to_string(i);
    facts.label = "GPU " + n + " (" + g.pci_bus_id + ")";
    facts.index = g.pci_bus_id;  // nvidia-smi -i accepts a bus id
    facts.uuid = g.uuid;
    facts.numa_node = g.numa_node;
    facts.max_gen = g.max_link_gen;
    facts.max_width = g.max_link_width;
    if (g.link_gen && g.link_width) facts.now = PcieLink{*g.link_gen, *g.link_width};
    if (auto it = input.pcie_under_load.find(g.uuid); !g.uuid.empty() && it != input.pcie_under_load.end()) {
      facts.under_load = it->second;
    }
    gpus.push_back(std::move(facts));
  }
  return gpus;
}

Check Make(const std::string& id, const std::string& title) {
  Check check;
  check.id = id;
  check.category = "gpu";
  check.title = title;
  return check;
}

std::string LinkText(const PcieLink& link) {
  return "gen" + std::to_string(link.gen) + " x" + std::to_string(link.width);
}

bool PersistencedRunning(const host::Host& host) {
  for (const std::string& pid : List(host, "/proc")) {
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return std::isdigit(c); })) {
      continue;
    }
    if (ReadLine(host, "/proc/" + pid + "/comm") == "nvidia-persistenced") return true;
  }
  return false;
}

Check Persistence(const host::Host& host) {
  Check check = Make("gpu.persistence", "persistence (nvidia-persistenced)");
  check.recommended = "nvidia-persistenced running";
  check.why =
      "Without persistence the driver tears a GPU's state down when its last program exits and "
      "sets it up again for the next, which adds a second or more to every job start and every "
      "nvidia-smi call, and can reset clock and ECC state between jobs.";
  if (PersistencedRunning(host)) {
    check.current = "running";
    return check;
  }
  check.current = "not running";
  check.severity = Severity::kWarning;
  check.fix = {"systemctl enable --now nvidia-persistenced"};
  return check;
}

Check DriverVersion(const DoctorInput& input, const std::optional<std::string>& module) {
  Check check = Make("gpu.driver_version", "one NVIDIA driver version");
  check.recommended = "the same version for the kernel module and every GPU";
  check.why =
      "A kernel module and user-space libraries of different versions (after an upgrade without a "
      "reboot) make NVML and CUDA fail with 'Driver/library version mismatch', so no job can start.";
  std::set<std::string> versions;
  for (const gpu::GpuInfo& g : input.gpus) {
    if (!g.driver_version.empty()) versions.insert(g.driver_version);
  }
  if (module) versions.insert(*module);
  if (versions.empty()) {
    check.current = "unknown";
    check.severity = Severity::kInfo;
    return check;
  }
  for (const std::string& v : versions) check.current += (check.current.empty() ? "" : ", ") + v;
  if (module) check.current += " (kernel module " + *module + ")";
  if (versions.size() == 1) return check;
  check.severity = Severity::kCritical;
  check.fix = {"# reboot to load the kernel module that matches the installed libraries, or "
               "reinstall one driver version"};
  return check;
}

Check PcieLinkCheck(const GpuFacts& g) {
  Check check = Make("gpu.pcie_link." + g.index, "PCIe link " + g.label);
  check.why =
      "Every host-to-GPU copy (data batches, checkpoints) goes over this link: a Gen3 x16 link "
      "carries at most 15.75 GB/s, and each lost lane or generation divides that. A link below the "
      "card's maximum under load means a loose card, a bad riser or a slot or BIOS limit.";
  if (!g.max_gen || !g.max_width) {
    check.current = "not readable";
    check.severity = Severity::kInfo;
    return check;
  }
  const PcieLink max{*g.max_gen, *g.max_width};
  check.recommended = LinkText(max) + " under load";
  const std::string reseat = "# power off, reseat " + g.label +
                             " or move it to a full-width slot; check the riser and the BIOS PCIe speed";
  if (g.under_load) {
    check.current = LinkText(*g.under_load) + " under load";
    if (g.under_load->width < max.width) {
      check.severity = Severity::kCritical;
    } else if (g.under_load->gen < max.gen) {
      check.severity = Severity::kWarning;
    }
    if (check.severity != Severity::kOk) check.fix = {reseat};
    return check;
  }
  if (!g.now) {
    check.current = "not readable";
    check.severity = Severity::kInfo;
    return check;
  }
  check.current = LinkText(*g.now) + " at idle";
  if (g.now->width < max.width) {
    check.severity = Severity::kCritical;
    check.fix = {reseat};
  } else if (g.now->gen < max.gen) {
    // Idle GPUs lower the link generation to save power; only a reading under load tells.
    check.current += " (checked at idle: links down-train when idle)";
    check.severity = Severity::kInfo;
    check.fix = {"# run gpuherd burnin --level 2 to check the link under load"};
  }
  return check;
}

Check EccCheck(const GpuFacts& g) {
  Check check = Make("gpu.ecc." + g.index, "ECC " + g.label);
  check.recommended = "enabled";
  check.why =
      "Without ECC a flipped bit in GPU memory silently corrupts weights or gradients and is never "
      "counted, so a failing card goes unnoticed; datacenter cards have ECC and it costs no memory "
      "on HBM cards and a few percent on GDDR ones.";
  check.current = *g.ecc_enabled ? "enabled" : "disabled";
  if (*g.ecc_enabled) return check;
  check.severity = Severity::kWarning;
  check.fix = {"nvidia-smi -i " + g.index + " -e 1", "# takes effect at the next reboot or GPU reset"};
  return check;
}

std::string NodeList(const std::set<int>& nodes) {
  std::string text;
  for (int n : nodes) text += (text.empty() ? "" : ",") + std::to_string(n);
  return text;
}

Check NumaAffinity(const host::Host& host, const std::vector<GpuFacts>& gpus) {
  Check check = Make("gpu.numa_nic", "GPU and NIC NUMA nodes");
  check.recommended = "a network adapter on every NUMA node that has GPUs";
  check.why =
      "Traffic between a GPU and a NIC on another NUMA node crosses the CPU interconnect, and "
      "GPUDirect RDMA degrades or falls back to staging through host memory; a wrong NUMA binding "
      "cut GPU-to-GPU bandwidth by 60% on a V100 cluster.";
  std::set<int> gpu_nodes;
  for (const GpuFacts& g : gpus) {
    if (g.numa_node) gpu_nodes.insert(*g.numa_node);
  }
  std::map<int, std::string> nic_nodes;  // node -> NIC names
  std::string kind = "RDMA NICs";
  for (const RdmaPort& port : ListRdmaPorts(host)) {
    if (!port.numa_node) continue;
    std::string& names = nic_nodes[*port.numa_node];
    if (names.find(port.device) == std::string::npos) names += (names.empty() ? "" : " ") + port.device;
  }
  if (nic_nodes.empty()) {
    kind = "NICs";
    for (const NetDevice& dev : ListNetDevices(host)) {
      if (dev.physical && dev.numa_node) {
        nic_nodes[*dev.numa_node] += (nic_nodes[*dev.numa_node].empty() ? "" : " ") + dev.name;
      }
    }
  }
  if (gpu_nodes.empty() || nic_nodes.empty()) {
    check.current = "NUMA nodes unknown (a single-node machine, or sysfs does not say)";
    check.severity = Severity::kInfo;
    return check;
  }
  check.current = "GPUs on node " + NodeList(gpu_nodes) + "; " + kind + ":";
  for (const auto& [node, names] : nic_nodes) check.current += " " + names + " on node " + std::to_string(node) + ";";
  check.current.pop_back();
  std::set<int> lonely;
  for (int node : gpu_nodes) {
    if (!nic_nodes.count(node)) lonely.insert(node);
  }
  if (lonely.empty()) return check;
  check.severity = Severity::kWarning;
  check.fix = {"# no command moves a card: put a network adapter in a slot of NUMA node " + NodeList(lonely) +
                   ", or keep multi-node jobs on the GPUs of the NICs' node",
               "# bind each job to its GPUs' node: numactl --cpunodebind=N --membind=N (gpuherd pins "
               "its own jobs to their GPUs' CPUs)"};
  return check;
}

}  // namespace

std::vector<Check> GpuChecks(const DoctorInput& input) {
  const host::Host& host = *input.host;
  const std::vector<HostGpu> host_gpus = ReadHostGpus(host);
  const std::optional<std::string> module = KernelModuleVersion(host);
  const bool bound = std::any_of(host_gpus.begin(), host_gpus.end(), [](const HostGpu& g) { return g.driver_bound; });
  if (input.gpus.empty() && host_gpus.empty()) {
    Check check = Make("gpu.present", "NVIDIA GPUs");
    check.current = "none found on the PCI bus";
    check.severity = Severity::kInfo;
    return {check};
  }
  if (input.gpus.empty() && !bound && !module) {
    Check check = Make("gpu.driver", "NVIDIA driver");
    check.current = std::to_string(host_gpus.size()) + " NVIDIA GPUs on the PCI bus, kernel module not loaded";
    check.recommended = "the nvidia kernel module loaded";
    check.why = "Without the kernel module no program can use the GPUs.";
    check.severity = Severity::kCritical;
    check.fix = {"modprobe nvidia", "# if that fails, see dmesg | grep -i nvrm and reinstall the driver"};
    return {check};
  }
  std::vector<Check> checks;
  checks.push_back(DriverVersion(input, module));
  checks.push_back(Persistence(host));
  const std::vector<GpuFacts> gpus = CollectGpus(input, host_gpus);
  for (const GpuFacts& g : gpus) checks.push_back(PcieLinkCheck(g));
  for (const GpuFacts& g : gpus) {
    if (g.ecc_enabled) checks.push_back(EccCheck(g));
  }
  checks.push_back(NumaAffinity(host, gpus));
  return checks;
}

}  // namespace gpuherd::doctor::internal
