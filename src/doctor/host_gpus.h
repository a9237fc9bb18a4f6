// NVIDIA GPUs as the kernel shows them, without NVML: the driver's
// /proc/driver/nvidia/gpus/<bus id>/information and the PCI device in /sys.
// Works on fixture trees and on machines whose NVML is broken.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "host/host.h"

namespace gpuherd::doctor {

struct HostGpu {
  std::string pci_bus_id;       // normalized: "0000:17:00.0"
  std::string model;            // "NVIDIA H100 80GB HBM3"; empty without the driver
  std::string uuid;             // "GPU-..."; empty without the driver
  std::optional<int> minor;     // N of /dev/nvidiaN
  std::optional<int> numa_node;
  std::string cpu_list;         // local_cpulist, "0-31,64-95"
  std::optional<int> link_gen, link_width, max_link_gen, max_link_width;
  bool driver_bound = false;    // listed by the NVIDIA driver
};

// Every NVIDIA display or 3D controller on the PCI bus (vendor 0x10de), by bus id.
std::vector<HostGpu> ReadHostGpus(const host::Host& host);

// "00000000:17:00.0" (NVML) and "0000:17:00.0" (sysfs) -> "0000:17:00.0".
std::string NormalizeBusId(std::string_view bus_id);

// The kernel module's version from /proc/driver/nvidia/version ("550.54.15");
// nullopt when the module is not loaded.
std::optional<std::string> KernelModuleVersion(const host::Host& host);

}  // namespace gpuherd::doctor
