#include "gpu/catalog.h"

#include <array>
#include <cctype>

namespace gpuherd::gpu {
namespace {

constexpr uint64_t kMiB = 1024ull * 1024;

// Memory totals, clocks and thermal thresholds are what NVML reports on
// typical boards (nvidia-smi -q); power, bandwidth and TFLOPS are the vendor's
// data-sheet figures (dense tensor-core rates; BF16 with FP32 accumulation).
// Thermal resistance is chosen so that a card at its power limit settles where
// such cards run in a well-cooled server (65-75 °C).
constexpr std::array kModels = {
    GpuModel{.key = "gtx1070ti", .name = "NVIDIA GeForce GTX 1070 Ti", .architecture = "Pascal",
             .memory_bytes = 8192 * kMiB, .cc_major = 6, .cc_minor = 1,
             .max_pcie_gen = 3, .max_pcie_width = 16,
             .power_limit_w = 180, .idle_power_w = 10,
             .base_sm_clock_mhz = 1607, .max_sm_clock_mhz = 1683, .idle_sm_clock_mhz = 139,
             .max_mem_clock_mhz = 4004, .idle_mem_clock_mhz = 405,
             .temp_slowdown_c = 96, .temp_shutdown_c = 99,
             .ecc = false, .nvlinks = 0, .has_fan = true,
             .mem_bandwidth_gbs = 256, .fp32_tflops = 8.19,
             .fp16_tflops = 0.128, .bf16_tflops = 0,
             .thermal_resistance_c_per_w = 0.244, .thermal_time_constant_s = 70},
    GpuModel{.key = "rtx3090", .name = "NVIDIA GeForce RTX 3090", .architecture = "Ampere",
             .memory_bytes = 24576 * kMiB, .cc_major = 8, .cc_minor = 6,
             .max_pcie_gen = 4, .max_pcie_width = 16,
             .power_limit_w = 350, .idle_power_w = 25,
             .base_sm_clock_mhz = 1395, .max_sm_clock_mhz = 1695, .idle_sm_clock_mhz = 210,
             .max_mem_clock_mhz = 9751, .idle_mem_clock_mhz = 405,
             .temp_slowdown_c = 95, .temp_shutdown_c = 98,
             .ecc = false, .nvlinks = 0, .has_fan = true,
             .mem_bandwidth_gbs = 936, .fp32_tflops = 35.6,
             .fp16_tflops = 71, .bf16_tflops = 71,
             .thermal_resistance_c_per_w = 0.12, .thermal_time_constant_s = 80},
    GpuModel{.key = "rtx4090", .name = "NVIDIA GeForce RTX 4090", .architecture = "Ada Lovelace",
             .memory_bytes = 24564 * kMiB, .cc_major = 8, .cc_minor = 9,
             .max_pcie_gen = 4, .max_pcie_width = 16,
             .power_limit_w = 450, .idle_power_w = 20,
             .base_sm_clock_mhz = 2235, .max_sm_clock_mhz = 2520, .idle_sm_clock_mhz = 210,
             .max_mem_clock_mhz = 10501, .idle_mem_clock_mhz = 405,
             .temp_slowdown_c = 87, .temp_shutdown_c = 90,
             .ecc = false, .nvlinks = 0, .has_fan = true,
             .mem_bandwidth_gbs = 1008, .fp32_tflops = 82.6,
             .fp16_tflops = 165.2, .bf16_tflops = 165.2,
             .thermal_resistance_c_per_w = 0.084, .thermal_time_constant_s = 80},
    GpuModel{.key = "t4", .name = "Tesla T4", .architecture = "Turing",
             .memory_bytes = 15360 * kMiB, .cc_major = 7, .cc_minor = 5,
             .max_pcie_gen = 3, .max_pcie_width = 16,
             .power_limit_w = 70, .idle_power_w = 10,
             .base_sm_clock_mhz = 585, .max_sm_clock_mhz = 1590, .idle_sm_clock_mhz = 300,
             .max_mem_clock_mhz = 5001, .idle_mem_clock_mhz = 405,
             .temp_slowdown_c = 93, .temp_shutdown_c = 96,
             .ecc = true, .nvlinks = 0, .has_fan = false,
             .mem_bandwidth_gbs = 320, .fp32_tflops = 8.1,
             .fp16_tflops = 65, .bf16_tflops = 0,
             .thermal_resistance_c_per_w = 0.6, .thermal_time_constant_s = 60},
    GpuModel{.key = "v100-sxm2", .name = "Tesla V100-SXM2-32GB", .architecture = "Volta",
             .memory_bytes = 32768 * kMiB, .cc_major = 7, .cc_minor = 0,
             .max_pcie_gen = 3, .max_pcie_width = 16,
             .power_limit_w = 300, .idle_power_w = 40,
             .base_sm_clock_mhz = 1290, .max_sm_clock_mhz = 1530, .idle_sm_clock_mhz = 135,
             .max_mem_clock_mhz = 877, .idle_mem_clock_mhz = 877,
             .temp_slowdown_c = 87, .temp_shutdown_c = 90,
             .ecc = true, .nvlinks = 6, .has_fan = false,
             .mem_bandwidth_gbs = 900, .fp32_tflops = 15.7,
             .fp16_tflops = 125, .bf16_tflops = 0,
             .thermal_resistance_c_per_w = 0.117, .thermal_time_constant_s = 90},
    GpuModel{.key = "a100-40gb", .name = "NVIDIA A100-SXM4-40GB", .architecture = "Ampere",
             .memory_bytes = 40960 * kMiB, .cc_major = 8, .cc_minor = 0,
             .max_pcie_gen = 4, .max_pcie_width = 16,
             .power_limit_w = 400, .idle_power_w = 55,
             .base_sm_clock_mhz = 1095, .max_sm_clock_mhz = 1410, .idle_sm_clock_mhz = 210,
             .max_mem_clock_mhz = 1215, .idle_mem_clock_mhz = 1215,
             .temp_slowdown_c = 89, .temp_shutdown_c = 92,
             .ecc = true, .nvlinks = 12, .has_fan = false,
             .mem_bandwidth_gbs = 1555, .fp32_tflops = 19.5,
             .fp16_tflops = 312, .bf16_tflops = 312,
             .thermal_resistance_c_per_w = 0.0875, .thermal_time_constant_s = 100},
    GpuModel{.key = "l40s", .name = "NVIDIA L40S", .architecture = "Ada Lovelace",
             .memory_bytes = 46068 * kMiB, .cc_major = 8, .cc_minor = 9,
             .max_pcie_gen = 4, .max_pcie_width = 16,
             .power_limit_w = 350, .idle_power_w = 35,
             .base_sm_clock_mhz = 1110, .max_sm_clock_mhz = 2520, .idle_sm_clock_mhz = 210,
             .max_mem_clock_mhz = 9001, .idle_mem_clock_mhz = 405,
             .temp_slowdown_c = 89, .temp_shutdown_c = 92,
             .ecc = true, .nvlinks = 0, .has_fan = false,
             .mem_bandwidth_gbs = 864, .fp32_tflops = 91.6,
             .fp16_tflops = 362, .bf16_tflops = 362,
             .thermal_resistance_c_per_w = 0.129, .thermal_time_constant_s = 90},
    GpuModel{.key = "h100-sxm", .name = "NVIDIA H100 80GB HBM3", .architecture = "Hopper",
             .memory_bytes = 81559 * kMiB, .cc_major = 9, .cc_minor = 0,
             .max_pcie_gen = 5, .max_pcie_width = 16,
             .power_limit_w = 700, .idle_power_w = 70,
             .base_sm_clock_mhz = 1590, .max_sm_clock_mhz = 1980, .idle_sm_clock_mhz = 345,
             .max_mem_clock_mhz = 2619, .idle_mem_clock_mhz = 2619,
             .temp_slowdown_c = 90, .temp_shutdown_c = 92,
             .ecc = true, .nvlinks = 18, .has_fan = false,
             .mem_bandwidth_gbs = 3350, .fp32_tflops = 66.9,
             .fp16_tflops = 989.4, .bf16_tflops = 989.4,
             .thermal_resistance_c_per_w = 0.054, .thermal_time_constant_s = 110},
    GpuModel{.key = "h200", .name = "NVIDIA H200", .architecture = "Hopper",
             .memory_bytes = 143771 * kMiB, .cc_major = 9, .cc_minor = 0,
             .max_pcie_gen = 5, .max_pcie_width = 16,
             .power_limit_w = 700, .idle_power_w = 75,
             .base_sm_clock_mhz = 1590, .max_sm_clock_mhz = 1980, .idle_sm_clock_mhz = 345,
             .max_mem_clock_mhz = 3201, .idle_mem_clock_mhz = 3201,
             .temp_slowdown_c = 90, .temp_shutdown_c = 92,
             .ecc = true, .nvlinks = 18, .has_fan = false,
             .mem_bandwidth_gbs = 4800, .fp32_tflops = 66.9,
             .fp16_tflops = 989.4, .bf16_tflops = 989.4,
             .thermal_resistance_c_per_w = 0.054, .thermal_time_constant_s = 110},
};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::span<const GpuModel> Catalog() { return kModels; }

const GpuModel* FindModel(std::string_view key_or_name) {
  for (const GpuModel& model : kModels) {
    if (EqualsIgnoreCase(model.key, key_or_name) || EqualsIgnoreCase(model.name, key_or_name)) {
      return &model;
    }
  }
  return nullptr;
}

Result<const GpuModel*> LookupModel(std::string_view key_or_name) {
  if (const GpuModel* model = FindModel(key_or_name)) return model;
  return NotFound("unknown GPU model \"" + std::string(key_or_name) +
                  "\"; known models: " + KnownModelKeys());
}

std::string KnownModelKeys() {
  std::string out;
  for (const GpuModel& model : kModels) {
    if (!out.empty()) out += ", ";
    out += model.key;
  }
  return out;
}

bool UsesRowRemapping(const GpuModel& model) { return model.ecc && model.cc_major >= 8; }

}  // namespace gpuherd::gpu
