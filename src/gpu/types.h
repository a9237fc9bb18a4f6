// What gpuherd knows about a GPU: static facts (GpuInfo), one reading
// (GpuSample) and how pairs of GPUs are connected (Link). A reading the GPU
// does not support is std::nullopt, never 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace gpuherd::gpu {

// How two GPUs reach each other, best first (NVML's topology levels plus NVLink).
enum class Link {
  kSelf = 0,
  kNvLink,       // at least one active NVLink between them
  kPcieSwitch,   // behind the same PCIe switch (NVML SINGLE/MULTIPLE)
  kHostBridge,   // same PCIe host bridge
  kNumaNode,     // same NUMA node, different host bridges (NVML NODE)
  kCrossSocket,  // across the CPU interconnect (NVML SYSTEM)
  kUnknown,
};
const char* LinkName(Link link);  // "self", "nvlink", "pcie-switch", ...

// Throttle reason bits as NVML's nvmlClocksEventReasons (stable ABI values).
namespace throttle {
constexpr uint64_t kGpuIdle = 0x1;
constexpr uint64_t kApplicationsClocksSetting = 0x2;
constexpr uint64_t kSwPowerCap = 0x4;
constexpr uint64_t kHwSlowdown = 0x8;
constexpr uint64_t kSyncBoost = 0x10;
constexpr uint64_t kSwThermalSlowdown = 0x20;
constexpr uint64_t kHwThermalSlowdown = 0x40;
constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
constexpr uint64_t kDisplayClockSetting = 0x100;
// Reasons that mean the GPU is being held back by heat or power, not by choice.
constexpr uint64_t kThermalMask = kSwThermalSlowdown | kHwThermalSlowdown;
// "sw_power_cap,hw_thermal"; empty for none.
std::string Describe(uint64_t reasons);
}  // namespace throttle

struct GpuInfo {
  int index = 0;
  std::string uuid;         // "GPU-8c6b..."; the key of a GPU across re-enumeration
  std::string name;         // "NVIDIA H200"
  std::string serial;       // empty where the board has none
  std::string pci_bus_id;   // "00000000:17:00.0"
  uint64_t memory_total_bytes = 0;
  std::string driver_version;  // "550.54.15"
  std::string cuda_version;    // "12.4" (driver's CUDA version)
  int cc_major = 0, cc_minor = 0;
  std::optional<int> max_pcie_gen, max_pcie_width;
  std::optional<int> numa_node;
  std::string cpu_affinity;    // cpulist, "0-15,32-47"; empty when unknown
  std::optional<double> power_limit_default_w;
  std::optional<double> temp_slowdown_c, temp_shutdown_c;  // the card's own thresholds
  std::optional<bool> ecc_enabled;
  bool simulated = false;
};

struct XidEvent {
  TimeMs time = 0;
  int xid = 0;              // 79 = fallen off the bus, 48 = DBE, 13, 31, 43, ...
  std::string description;  // what it means, for people
};

struct GpuProcess {
  int pid = 0;
  uint64_t used_memory_bytes = 0;
  std::string name;         // the process's command name where known
};

struct GpuSample {
  TimeMs time = 0;
  std::optional<double> gpu_util_pct, mem_util_pct;  // 0..100
  std::optional<uint64_t> mem_used_bytes, mem_total_bytes;
  std::optional<double> temp_c;
  std::optional<double> power_w, power_limit_w;
  std::optional<uint64_t> energy_mj;  // total since driver load, millijoules
  std::optional<int> sm_clock_mhz, mem_clock_mhz;
  std::optional<double> fan_pct;
  std::optional<int> pcie_gen, pcie_width;
  std::optional<double> pcie_tx_kbps, pcie_rx_kbps;  // KB/s, as NVML reports
  std::optional<uint64_t> pcie_replay_count;         // cumulative
  std::optional<uint64_t> ecc_sbe_volatile, ecc_dbe_volatile;
  std::optional<uint64_t> retired_pages_sbe, retired_pages_dbe;
  std::optional<bool> retired_pages_pending;
  std::optional<uint64_t> remapped_rows_correctable, remapped_rows_uncorrectable;
  std::optional<bool> remapped_rows_pending, remapped_rows_failure;
  std::optional<uint64_t> throttle_reasons;  // throttle:: bits
  std::vector<XidEvent> xids;                // since the previous sample
  std::vector<GpuProcess> processes;         // compute processes
};

// Static facts of the whole machine.
struct Fleet {
  std::vector<GpuInfo> gpus;
  // topology[i][j]: how GPU i reaches GPU j (kSelf on the diagonal).
  std::vector<std::vector<Link>> topology;
  // nvlinks[i][j]: active NVLinks from GPU i that reach GPU j, directly or
  // through an NVSwitch (nvidia-smi's NV#); empty when not read.
  std::vector<std::vector<int>> nvlinks;
  // pcie_multiple[i][j]: a kPcieSwitch pair whose path crosses several PCIe
  // bridges (NVML MULTIPLE, nvidia-smi's PXB) rather than one (PIX); empty
  // when not read.
  std::vector<std::vector<bool>> pcie_multiple;
  bool simulated = false;
  std::string driver_name;  // "nvml" or "sim"
};

// Whether `id`, as people write a GPU (its index or its UUID), names the GPU
// with this index and UUID. The one rule for every command and route.
bool NamesGpu(const std::string& id, int index, const std::string& uuid);
// The position in `gpus` of the GPU `id` names, or -1.
int FindGpu(const std::vector<GpuInfo>& gpus, const std::string& id);

}  // namespace gpuherd::gpu
