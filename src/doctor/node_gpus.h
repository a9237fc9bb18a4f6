// The GPUs of this node for the doctor and the Slurm/Kubernetes generators:
// from the GPU driver (NVML, or the simulated fleet when asked for), and,
// where NVML is absent or broken, from what the kernel driver shows in
// /proc and /sys, so that a node whose NVML fails still gets its config.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "doctor/doctor.h"
#include "gpu/open.h"
#include "gpu/types.h"
#include "host/host.h"

namespace gpuherd::doctor {

struct NodeGpus {
  std::vector<gpu::GpuInfo> gpus;
  std::map<std::string, PcieLink> pcie_now;  // by UUID: one reading taken now
  // Why the GPUs are not NVML's: "asked for with --sim 8" or "NVML not
  // available (...): GPUs read from /proc/driver/nvidia"; empty for NVML.
  std::string source_note;
  bool simulated = false;
  bool from_host = false;  // read from /proc and /sys, NVML being unavailable
};

// Never falls back to a simulated fleet it was not asked for
// (choice.fallback_sim_count is ignored). Fails when no GPU can be found.
// `now` stamps the one reading taken of each GPU.
Result<NodeGpus> DetectGpus(const gpu::DriverChoice& choice, const host::Host& host, TimeMs now);

// GpuInfo for the GPUs the kernel driver lists (HostGpu), in minor-number order.
std::vector<gpu::GpuInfo> GpusFromHost(const host::Host& host);

}  // namespace gpuherd::doctor
