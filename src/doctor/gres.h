// Slurm configuration from the detected GPUs: gres.conf lines with each GPU's
// closest CPU cores (so that --gpu-bind=closest works), optional shards, and
// the slurm.conf fragment that declares them.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gpu/types.h"

namespace gpuherd::doctor {

struct GresOptions {
  std::string node_name;       // NodeName= of the slurm.conf fragment
  int shards_per_gpu = 0;      // 0: no Name=shard lines
  // /dev/nvidiaN's N by normalized PCI bus id (HostGpu::minor); a GPU not
  // listed uses its index, which is the minor number on most machines.
  std::map<std::string, int> minor_by_bus_id;
  // CPU -> first thread of its core (ReadFirstThreads). Slurm numbers cores
  // by their first thread, so when given, Cores= lists first threads only;
  // when empty the GPU's CPU list is written as it is.
  std::map<int, int> first_thread_of_cpu;
};

struct GresConfig {
  std::string gres_conf;   // the whole gres.conf
  std::string slurm_conf;  // GresTypes= and NodeName= lines for slurm.conf
};

// Fails when there are no GPUs, shards are negative, or a GPU's CPU affinity
// is not a CPU list.
Result<GresConfig> GenerateGres(const std::vector<gpu::GpuInfo>& gpus, const GresOptions& options);

// Slurm's GPU type for a model, as its NVML autodetection names them:
// "NVIDIA H100 80GB HBM3" -> "h100_80gb_hbm3".
std::string GresTypeName(std::string_view model);

}  // namespace gpuherd::doctor
