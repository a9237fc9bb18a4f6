#include "doctor/node_gpus.h"

#include <algorithm>

#include "doctor/host_gpus.h"

namespace gpuherd::doctor {

std::vector<gpu::GpuInfo> GpusFromHost(const host::Host& host) {
  std::vector<HostGpu> bound;
  for (HostGpu& g : ReadHostGpus(host)) {
    if (g.driver_bound) bound.push_back(std::move(g));
  }
  std::stable_sort(bound.begin(), bound.end(),
                   [](const HostGpu& a, const HostGpu& b) { return a.minor.value_or(1 << 20) < b.minor.value_or(1 << 20); });
  const std::string version = KernelModuleVersion(host).value_or("");
  std::vector<gpu::GpuInfo> gpus;
  for (size_t i = 0; i < bound.size(); ++i) {
    const HostGpu& g = bound[i];
    gpu::GpuInfo info;
    info.index = g.minor.value_or(static_cast<int>(i));
    info.uuid = g.uuid;
    info.name = g.model;
    info.pci_bus_id = g.pci_bus_id;
    info.driver_version = version;
    info.numa_node = g.numa_node;
    info.cpu_affinity = g.cpu_list;
    info.max_pcie_gen = g.max_link_gen;
    info.max_pcie_width = g.max_link_width;
    gpus.push_back(std::move(info));
  }
  return gpus;
}

Result<NodeGpus> DetectGpus(const gpu::DriverChoice& choice, const host::Host& host, TimeMs now) {
  gpu::DriverChoice strict = choice;
  strict.fallback_sim_count = 0;
  const bool asked_for_sim = choice.sim_count > 0 || !choice.scenario_path.empty();
  NodeGpus node;
  auto opened = gpu::OpenDriver(strict);
  Status failure;
  if (opened.ok()) {
    auto fleet = opened->driver->Discover();
    if (fleet.ok()) {
      node.gpus = fleet->gpus;
      node.simulated = fleet->simulated;
      node.source_note = opened->sim_reason;
      for (const gpu::GpuInfo& g : node.gpus) {
        auto sample = opened->driver->Sample(g.index, now);
        if (sample.ok() && sample->pcie_gen && sample->pcie_width) {
          node.pcie_now[g.uuid] = PcieLink{*sample->pcie_gen, *sample->pcie_width};
        }
      }
      return node;
    }
    failure = fleet.status();
  } else {
    failure = opened.status();
  }
  if (asked_for_sim) return failure;
  node.gpus = GpusFromHost(host);
  if (node.gpus.empty()) {
    return Unavailable("no NVIDIA GPUs found (" + failure.message() +
                       "; /proc/driver/nvidia lists none); use --sim N to see what a simulated node would get");
  }
  node.from_host = true;
  node.source_note = "NVML not available (" + failure.message() + "): GPUs read from /proc/driver/nvidia and /sys";
  return node;
}

}  // namespace gpuherd::doctor
