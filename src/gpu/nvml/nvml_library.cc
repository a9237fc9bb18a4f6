#include "gpu/nvml/nvml_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "gpu/dynamic_symbols.h"

namespace gpuherd::gpu::nvml {
namespace {

enum class Need { kRequired, kOptional };

// Stores a dlsym result into one typed member of NvmlApi.
template <auto kMember>
void Assign(NvmlApi& api, void* symbol) {
  using Fn = std::remove_reference_t<decltype(api.*kMember)>;
  api.*kMember = reinterpret_cast<Fn>(symbol);
}

struct SymbolEntry {
  // Newest first; later names are older entry points with the same signature
  // (or, for the process list, a layout told apart by process_layout()).
  const char* names[3];
  Need need;
  void (*assign)(NvmlApi&, void*);
};

// Every NVML entry point gpuherd calls.
const SymbolEntry kSymbols[] = {
    {{"nvmlInit_v2", "nvmlInit"}, Need::kRequired, &Assign<&NvmlApi::init>},
    {{"nvmlShutdown"}, Need::kRequired, &Assign<&NvmlApi::shutdown>},
    {{"nvmlErrorString"}, Need::kRequired, &Assign<&NvmlApi::error_string>},
    {{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, Need::kRequired,
     &Assign<&NvmlApi::device_get_count>},
    {{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, Need::kRequired,
     &Assign<&NvmlApi::device_get_handle_by_index>},
    {{"nvmlDeviceGetUUID"}, Need::kRequired, &Assign<&NvmlApi::device_get_uuid>},
    {{"nvmlDeviceGetName"}, Need::kRequired, &Assign<&NvmlApi::device_get_name>},
    // The unversioned getter fills an older, shorter struct: never fall back to it.
    {{"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, Need::kRequired,
     &Assign<&NvmlApi::device_get_pci_info>},
    {{"nvmlDeviceGetMemoryInfo"}, Need::kRequired, &Assign<&NvmlApi::device_get_memory_info>},
    {{"nvmlSystemGetDriverVersion"}, Need::kRequired,
     &Assign<&NvmlApi::system_get_driver_version>},

    {{"nvmlDeviceGetHandleByUUID"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_handle_by_uuid>},
    {{"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"}, Need::kOptional,
     &Assign<&NvmlApi::system_get_cuda_driver_version>},
    {{"nvmlDeviceGetSerial"}, Need::kOptional, &Assign<&NvmlApi::device_get_serial>},
    {{"nvmlDeviceGetCudaComputeCapability"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_cuda_compute_capability>},
    {{"nvmlDeviceGetMaxPcieLinkGeneration"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_max_pcie_link_generation>},
    {{"nvmlDeviceGetMaxPcieLinkWidth"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_max_pcie_link_width>},
    {{"nvmlDeviceGetNumaNodeId"}, Need::kOptional, &Assign<&NvmlApi::device_get_numa_node_id>},
    {{"nvmlDeviceGetCpuAffinity"}, Need::kOptional, &Assign<&NvmlApi::device_get_cpu_affinity>},
    {{"nvmlDeviceGetPowerManagementDefaultLimit"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_power_management_default_limit>},
    {{"nvmlDeviceGetTemperatureThreshold"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_temperature_threshold>},
    {{"nvmlDeviceGetEccMode"}, Need::kOptional, &Assign<&NvmlApi::device_get_ecc_mode>},
    {{"nvmlDeviceGetTopologyCommonAncestor"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_topology_common_ancestor>},
    {{"nvmlDeviceGetNvLinkState"}, Need::kOptional, &Assign<&NvmlApi::device_get_nvlink_state>},
    // The unversioned remote-PCI getter fills the short struct as well.
    {{"nvmlDeviceGetNvLinkRemotePciInfo_v2"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_nvlink_remote_pci_info>},
    {{"nvmlDeviceGetNvLinkRemoteDeviceType"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_nvlink_remote_device_type>},

    {{"nvmlDeviceGetUtilizationRates"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_utilization_rates>},
    {{"nvmlDeviceGetTemperature"}, Need::kOptional, &Assign<&NvmlApi::device_get_temperature>},
    {{"nvmlDeviceGetPowerUsage"}, Need::kOptional, &Assign<&NvmlApi::device_get_power_usage>},
    {{"nvmlDeviceGetEnforcedPowerLimit"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_enforced_power_limit>},
    {{"nvmlDeviceGetTotalEnergyConsumption"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_total_energy_consumption>},
    {{"nvmlDeviceGetClockInfo"}, Need::kOptional, &Assign<&NvmlApi::device_get_clock_info>},
    {{"nvmlDeviceGetFanSpeed"}, Need::kOptional, &Assign<&NvmlApi::device_get_fan_speed>},
    {{"nvmlDeviceGetCurrPcieLinkGeneration"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_curr_pcie_link_generation>},
    {{"nvmlDeviceGetCurrPcieLinkWidth"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_curr_pcie_link_width>},
    {{"nvmlDeviceGetPcieThroughput"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_pcie_throughput>},
    {{"nvmlDeviceGetPcieReplayCounter"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_pcie_replay_counter>},
    {{"nvmlDeviceGetTotalEccErrors"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_total_ecc_errors>},
    {{"nvmlDeviceGetRetiredPages"}, Need::kOptional, &Assign<&NvmlApi::device_get_retired_pages>},
    {{"nvmlDeviceGetRetiredPagesPendingStatus"}, Need::kOptional,
     &Assign<&NvmlApi::device_get_retired_pages_pending_status>},
    {{"nvmlDeviceGetRemappedRows"}, Need::kOptional, &Assign<&NvmlApi::device_get_remapped_rows>},
    {{"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"},
     Need::kOptional, &Assign<&NvmlApi::device_get_current_clocks_event_reasons>},
    {{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
      "nvmlDeviceGetComputeRunningProcesses"},
     Need::kOptional, &Assign<&NvmlApi::device_get_compute_running_processes>},

    {{"nvmlEventSetCreate"}, Need::kOptional, &Assign<&NvmlApi::event_set_create>},
    {{"nvmlEventSetFree"}, Need::kOptional, &Assign<&NvmlApi::event_set_free>},
    {{"nvmlDeviceRegisterEvents"}, Need::kOptional, &Assign<&NvmlApi::device_register_events>},
    {{"nvmlEventSetWait_v2", "nvmlEventSetWait"}, Need::kOptional,
     &Assign<&NvmlApi::event_set_wait>},
};

constexpr std::string_view kProcessesV3 = "nvmlDeviceGetComputeRunningProcesses_v3";

}  // namespace

std::string ResolveNvmlLibraryPath(const std::string& path) {
  if (!path.empty()) return path;
  const char* env = std::getenv("GPUHERD_NVML_LIBRARY");
  if (env != nullptr && *env != '\0') return env;
  return kDefaultNvmlLibrary;
}

Result<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = dlerror();
    return Unavailable("cannot load the NVML library " + path + ": " +
                       (text != nullptr ? text : "unknown dlopen error") +
                       " (is the NVIDIA driver installed? GPUHERD_NVML_LIBRARY names another)");
  }
  std::unique_ptr<NvmlLibrary> library(new NvmlLibrary(handle, path));
  for (const SymbolEntry& entry : kSymbols) {
    const SymbolLookup found = LookupFirst(handle, entry.names);
    void* symbol = found.symbol;
    const int variant = found.variant;
    const std::string& tried = found.tried;
    const std::string& last_error = found.error;
    if (symbol == nullptr) {
      if (entry.need == Need::kOptional) continue;
      return Unavailable("the NVML library " + path + " lacks the required symbol " + tried +
                         " (dlerror: " + last_error + "); the driver may be too old");
    }
    entry.assign(library->api_, symbol);
    library->resolved_.emplace_back(entry.names[0], entry.names[variant]);
    if (std::string_view(entry.names[0]) == kProcessesV3) {
      if (variant == 2) {
        library->process_layout_ = ProcessLayout::kV1;
      } else if (variant == 1) {
        library->process_layout_ = ProcessLayout::kV2;
      } else {
        // _v3 briefly carried a 64-bit protected-memory field per entry; the
        // drivers that did export the confidential-computing size getter but
        // not yet the process-detail list. Reading with the wrong stride would
        // garble every entry after the first.
        std::string unused;
        bool cc_era =
            LookupSymbol(handle, "nvmlDeviceGetConfComputeMemSizeInfo", &unused) != nullptr &&
            LookupSymbol(handle, "nvmlDeviceGetRunningProcessDetailList", &unused) == nullptr;
        library->process_layout_ = cc_era ? ProcessLayout::kV3ConfCompute : ProcessLayout::kV2;
      }
    }
  }
  return library;
}

NvmlLibrary::~NvmlLibrary() { dlclose(handle_); }

std::string NvmlLibrary::ResolvedName(std::string_view newest_name) const {
  for (const auto& [newest, resolved] : resolved_) {
    if (newest == newest_name) return resolved;
  }
  return "";
}

std::string NvmlLibrary::ErrorString(nvmlReturn_t result) const {
  const char* text = api_.error_string != nullptr ? api_.error_string(result) : nullptr;
  std::string message = text != nullptr ? text : "NVML error";
  return message + " (" + std::to_string(static_cast<int>(result)) + ")";
}

}  // namespace gpuherd::gpu::nvml
