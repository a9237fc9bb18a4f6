// libnvidia-ml opened with dlopen at run time: the entry points gpuherd uses,
// each resolved to the newest name the installed driver exports. Nothing here
// calls into NVML; NvmlDriver does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gpu/nvml/nvml_api.h"

namespace gpuherd::gpu::nvml {

// The library NVIDIA's driver installs; the default when nothing else is named.
inline constexpr char kDefaultNvmlLibrary[] = "libnvidia-ml.so.1";

// The empty path means $GPUHERD_NVML_LIBRARY when set, else kDefaultNvmlLibrary.
std::string ResolveNvmlLibraryPath(const std::string& path);

// How the entries of the compute-process list are laid out; it depends on
// which getter was resolved and, for _v3, on the driver's generation.
enum class ProcessLayout {
  kAbsent,          // no process getter at all
  kV1,              // nvmlDeviceGetComputeRunningProcesses: nvmlProcessInfo_v1_t
  kV2,              // _v2, and _v3 of most drivers: nvmlProcessInfo_v2_t
  kV3ConfCompute,   // _v3 of confidential-computing-era drivers: nvmlProcessInfo_v3cc_t
};

// Typed entry points. Required ones are never null; optional ones are null
// when the library lacks every name for them, and the reading is then absent.
struct NvmlApi {
  // Required.
  nvmlVoidFn init = nullptr;
  nvmlVoidFn shutdown = nullptr;
  nvmlErrorStringFn error_string = nullptr;
  nvmlUintOutFn device_get_count = nullptr;
  nvmlHandleByIndexFn device_get_handle_by_index = nullptr;
  nvmlDeviceStringFn device_get_uuid = nullptr;
  nvmlDeviceStringFn device_get_name = nullptr;
  nvmlDevicePciInfoFn device_get_pci_info = nullptr;
  nvmlDeviceMemoryFn device_get_memory_info = nullptr;
  nvmlStringOutFn system_get_driver_version = nullptr;
  // Optional: static facts.
  nvmlHandleByUuidFn device_get_handle_by_uuid = nullptr;
  nvmlIntOutFn system_get_cuda_driver_version = nullptr;
  nvmlDeviceStringFn device_get_serial = nullptr;
  nvmlDeviceComputeCapabilityFn device_get_cuda_compute_capability = nullptr;
  nvmlDeviceUintFn device_get_max_pcie_link_generation = nullptr;
  nvmlDeviceUintFn device_get_max_pcie_link_width = nullptr;
  nvmlDeviceUintFn device_get_numa_node_id = nullptr;
  nvmlDeviceCpuAffinityFn device_get_cpu_affinity = nullptr;
  nvmlDeviceUintFn device_get_power_management_default_limit = nullptr;
  nvmlDeviceTemperatureThresholdFn device_get_temperature_threshold = nullptr;
  nvmlDeviceEccModeFn device_get_ecc_mode = nullptr;
  nvmlDeviceTopologyFn device_get_topology_common_ancestor = nullptr;
  nvmlDeviceNvLinkStateFn device_get_nvlink_state = nullptr;
  nvmlDeviceNvLinkPciFn device_get_nvlink_remote_pci_info = nullptr;
  nvmlDeviceNvLinkTypeFn device_get_nvlink_remote_device_type = nullptr;
  // Optional: readings.
  nvmlDeviceUtilizationFn device_get_utilization_rates = nullptr;
  nvmlDeviceTemperatureFn device_get_temperature = nullptr;
  nvmlDeviceUintFn device_get_power_usage = nullptr;
  nvmlDeviceUintFn device_get_enforced_power_limit = nullptr;
  nvmlDeviceUllFn device_get_total_energy_consumption = nullptr;
  nvmlDeviceClockFn device_get_clock_info = nullptr;
  nvmlDeviceUintFn device_get_fan_speed = nullptr;
  nvmlDeviceUintFn device_get_curr_pcie_link_generation = nullptr;
  nvmlDeviceUintFn device_get_curr_pcie_link_width = nullptr;
  nvmlDevicePcieThroughputFn device_get_pcie_throughput = nullptr;
  nvmlDeviceUintFn device_get_pcie_replay_counter = nullptr;
  nvmlDeviceTotalEccFn device_get_total_ecc_errors = nullptr;
  nvmlDeviceRetiredPagesFn device_get_retired_pages = nullptr;
  nvmlDeviceEnableFn device_get_retired_pages_pending_status = nullptr;
  nvmlDeviceRemappedRowsFn device_get_remapped_rows = nullptr;
  nvmlDeviceUllFn device_get_current_clocks_event_reasons = nullptr;
  nvmlDeviceProcessesFn device_get_compute_running_processes = nullptr;
  // Optional: XID events.
  nvmlEventSetCreateFn event_set_create = nullptr;
  nvmlEventSetFreeFn event_set_free = nullptr;
  nvmlDeviceRegisterEventsFn device_register_events = nullptr;
  nvmlEventSetWaitFn event_set_wait = nullptr;
};

// Owns the dlopen handle; the function pointers die with it. Not thread-safe
// beyond what NVML itself guarantees.
class NvmlLibrary {
 public:
  // Loads `path` (as given to dlopen: a file name searched the usual way, or a
  // path) and resolves every entry. kUnavailable when the library cannot be
  // loaded or lacks a required entry; the message names the library, the
  // symbol and dlerror's text.
  static Result<std::unique_ptr<NvmlLibrary>> Open(const std::string& path);

  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();

  const NvmlApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  ProcessLayout process_layout() const { return process_layout_; }

  // The exported name an entry was resolved to, looked up by its newest name:
  // ResolvedName("nvmlInit_v2") is "nvmlInit" on an old driver. Empty when
  // the entry is absent or unknown.
  std::string ResolvedName(std::string_view newest_name) const;

  // nvmlErrorString's text with the code: "GPU is lost (15)".
  std::string ErrorString(nvmlReturn_t result) const;

 private:
  NvmlLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
  NvmlApi api_;
  ProcessLayout process_layout_ = ProcessLayout::kAbsent;
  // (newest name, resolved name) for every entry found.
  std::vector<std::pair<std::string, std::string>> resolved_;
};

}  // namespace gpuherd::gpu::nvml
