// The datasheet catalogue of GPU models: real specs of real cards, as NVML and
// the vendor's data sheets report them. The burn-in scores real cards against
// it (nominal rates, memory, limits); the simulated fleet is built from it.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace gpuherd::gpu {

struct GpuModel {
  std::string_view key;           // short lookup key: "h100-sxm"
  std::string_view name;          // as NVML reports it: "NVIDIA H100 80GB HBM3"
  std::string_view architecture;  // "Hopper"
  uint64_t memory_bytes;          // total as NVML reports it
  int cc_major, cc_minor;
  int max_pcie_gen, max_pcie_width;
  double power_limit_w;           // TDP = default power limit
  double idle_power_w;
  int base_sm_clock_mhz;
  int max_sm_clock_mhz;           // boost clock a cool, loaded card runs at
  int idle_sm_clock_mhz;
  int max_mem_clock_mhz;
  int idle_mem_clock_mhz;         // HBM does not clock down: equal to max
  double temp_slowdown_c, temp_shutdown_c;
  bool ecc;                       // datacenter parts: on; GeForce: unsupported
  int nvlinks;                    // 0 for PCIe cards
  bool has_fan;                   // passive datacenter cards report no fan
  double mem_bandwidth_gbs;       // GB/s
  double fp32_tflops;
  double fp16_tflops;             // dense tensor-core rate where the card has them
  // Dense BF16 tensor-core rate with FP32 accumulation; 0 before Ampere
  // (compute capability 8.0), which has no BF16.
  double bf16_tflops;
  // The simulation's thermal parameters: °C per W above ambient at steady
  // state, and the first-order time constant of the heatsink.
  double thermal_resistance_c_per_w;
  double thermal_time_constant_s;
};

// Every model, in a stable order.
std::span<const GpuModel> Catalog();

// Finds a model by key ("rtx3090") or NVML name ("NVIDIA GeForce RTX 3090"),
// ignoring case. Null when unknown.
const GpuModel* FindModel(std::string_view key_or_name);

// As FindModel, with a kNotFound error that lists the known keys.
Result<const GpuModel*> LookupModel(std::string_view key_or_name);

// "gtx1070ti, rtx3090, ..." for messages.
std::string KnownModelKeys();

// Whether the memory error counters of the model live in retired pages
// (before Ampere) or remapped rows (Ampere and later). Only for ECC models.
bool UsesRowRemapping(const GpuModel& model);

}  // namespace gpuherd::gpu
