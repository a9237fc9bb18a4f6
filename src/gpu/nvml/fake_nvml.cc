// A stand-in for libnvidia-ml.so.1, built as a shared library and loaded
// through the same dlopen path as the real one (as DCGM's injection library
// is), so the tests reach NvmlLibrary and NvmlDriver unchanged.
//
// Scripting. The GPUs and their readings come from a JSON script, set either
//   - by calling the exported `int FakeNvmlSetScript(const char* json)` (the
//     test dlopens the same path, which yields the same loaded instance, and
//     finds it with dlsym); it returns 0, or -1 with the reason on stderr; or
//   - from the file named by $GPUHERD_FAKE_NVML_SCRIPT, read by nvmlInit when
//     no script was set, e.g. to run the CLI against a fake fleet.
// `int FakeNvmlInitCount()` tells how many nvmlInit calls are not yet shut down.
//
// Script:
//   {"driver_version": "550.54.15", "cuda_version": 12040,
//    "init_error": 0,                       // nvmlInit's result
//    "topology": [[0, 10], [10, 0]],        // nvmlGpuTopologyLevel_t per pair
//    "gpus": [{
//      "uuid": "GPU-...", "name": "...", "serial": "...",
//      "pci": {"domain": 0, "bus": 23, "device": 0},
//      "memory": {"total": bytes, "used": bytes},
//      "compute_capability": [9, 0], "max_pcie": [5, 16], "pcie": [4, 16],
//      "numa_node": 0, "cpu_affinity": [mask words], "power_default_limit_mw": 700000,
//      "temp_slowdown": 90, "temp_shutdown": 95, "ecc_enabled": true,
//      "utilization": [gpu, memory], "temperature": 41, "power_mw": 123456,
//      "power_limit_mw": 700000, "energy_mj": 123, "sm_clock": 1980, "mem_clock": 2619,
//      "fan": 30, "pcie_throughput_kbps": [tx, rx], "pcie_replay": 2,
//      "ecc_volatile": [sbe, dbe], "retired_pages": [sbe, dbe], "retired_pending": false,
//      "remapped_rows": [correctable, uncorrectable, pending, failure],
//      "throttle": bits, "processes": [{"pid": 1, "used": bytes}],
//      "xids": [79],                        // delivered once each by nvmlEventSetWait
//      "nvlinks": [{"active": true, "remote": {"domain":..,"bus":..,"device":..},
//                   "type": "gpu" | "switch"}],
//      "no_events": false,                  // nvmlDeviceRegisterEvents: NOT_SUPPORTED
//      "lost": false,                       // every call for this GPU: GPU_IS_LOST
//      "errors": {"nvmlDeviceGetFanSpeed": 4}}]}   // a scripted result per function
// A reading whose key is missing answers NVML_ERROR_NOT_SUPPORTED.
//
// Variants (compile definitions) differ in the symbols they export:
//   (none)                    today's names (nvmlInit_v2, ..._v3) next to the old ones;
//   FAKE_NVML_LEGACY          only unversioned/_v2 names; process entries of 16 bytes;
//                             no NUMA node, remapped rows, UUID lookup or NVLink type;
//   FAKE_NVML_CONF_COMPUTE    a driver whose _v3 process entries have 32 bytes;
//   FAKE_NVML_NO_UUID         lacks the required nvmlDeviceGetUUID.
// Not thread-safe: one test thread drives it.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/nvml/nvml_api.h"

namespace gpuherd::gpu::nvml {

struct nvmlDevice_st {
  size_t index;
};
struct nvmlEventSet_st {
  std::set<size_t> devices;
};

namespace {

using nlohmann::json;

struct FakeState {
  json script = json::object();
  bool script_set = false;
  int init_count = 0;
  std::vector<std::deque<unsigned long long>> pending_xids;
  // Handles stay valid across script changes, as NVML's do across calls.
  std::vector<std::unique_ptr<nvmlDevice_st>> handles;
};

FakeState& State() {
  static FakeState state;
  return state;
}

int LoadScript(const std::string& text) {
  FakeState& state = State();
  try {
    json script = json::parse(text);
    if (!script.is_object()) throw std::runtime_error("the script must be a JSON object");
    const json& gpus = script.value("gpus", json::array());
    state.pending_xids.assign(gpus.size(), {});
    for (size_t i = 0; i < gpus.size(); ++i) {
      for (const json& xid : gpus[i].value("xids", json::array())) {
        state.pending_xids[i].push_back(xid.get<unsigned long long>());
      }
    }
    while (state.handles.size() < gpus.size()) {
      state.handles.push_back(std::make_unique<nvmlDevice_st>(nvmlDevice_st{state.handles.size()}));
    }
    state.script = std::move(script);
    state.script_set = true;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fake NVML: bad script: %s\n", e.what());
    return -1;
  }
}

const json& Gpus() {
  static const json kNone = json::array();
  auto it = State().script.find("gpus");
  return it != State().script.end() ? *it : kNone;
}

nvmlReturn_t Scripted(const json& gpu, const char* function) {
  if (gpu.value("lost", false)) return NVML_ERROR_GPU_IS_LOST;
  auto errors = gpu.find("errors");
  if (errors != gpu.end() && errors->contains(function)) {
    return static_cast<nvmlReturn_t>((*errors)[function].get<int>());
  }
  return NVML_SUCCESS;
}

// Runs `body` with the GPU's script unless NVML is not initialised, the
// handle is bad, or the script makes `function` fail.
template <typename Body>
nvmlReturn_t ForGpu(nvmlDevice_t device, const char* function, Body body) {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || device->index >= Gpus().size()) return NVML_ERROR_INVALID_ARGUMENT;
  const json& gpu = Gpus()[device->index];
  nvmlReturn_t scripted = Scripted(gpu, function);
  if (scripted != NVML_SUCCESS) return scripted;
  return body(gpu);
}

template <typename T>
nvmlReturn_t Field(const json& gpu, const char* key, T* out) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto it = gpu.find(key);
  if (it == gpu.end()) return NVML_ERROR_NOT_SUPPORTED;
  *out = it->get<T>();
  return NVML_SUCCESS;
}

template <typename T>
nvmlReturn_t Element(const json& gpu, const char* key, size_t i, T* out) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto it = gpu.find(key);
  if (it == gpu.end() || i >= it->size()) return NVML_ERROR_NOT_SUPPORTED;
  *out = (*it)[i].get<T>();
  return NVML_SUCCESS;
}

nvmlReturn_t CopyString(const std::string& text, char* buffer, unsigned int length) {
  if (buffer == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

nvmlReturn_t StringField(const json& gpu, const char* key, char* buffer, unsigned int length) {
  auto it = gpu.find(key);
  if (it == gpu.end()) return NVML_ERROR_NOT_SUPPORTED;
  return CopyString(it->get<std::string>(), buffer, length);
}

void FillPci(const json& address, nvmlPciInfo_t* pci) {
  *pci = {};
  pci->domain = address.value("domain", 0u);
  pci->bus = address.value("bus", 0u);
  pci->device = address.value("device", 0u);
  std::snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", pci->domain, pci->bus,
                pci->device);
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0",
                pci->domain & 0xFFFF, pci->bus, pci->device);
}

nvmlReturn_t PciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return ForGpu(device, "nvmlDeviceGetPciInfo", [&](const json& gpu) {
    if (pci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto it = gpu.find("pci");
    if (it == gpu.end()) return NVML_ERROR_NOT_SUPPORTED;
    FillPci(*it, pci);
    return NVML_SUCCESS;
  });
}

template <typename Info>
nvmlReturn_t Processes(nvmlDevice_t device, unsigned int* count, void* out) {
  return ForGpu(device, "nvmlDeviceGetComputeRunningProcesses", [&](const json& gpu) {
    if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    const json processes = gpu.value("processes", json::array());
    if (*count < processes.size()) {
      *count = static_cast<unsigned int>(processes.size());
      return processes.empty() ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    auto* infos = static_cast<Info*>(out);
    for (size_t i = 0; i < processes.size(); ++i) {
      infos[i] = Info{};
      infos[i].pid = processes[i].value("pid", 0u);
      infos[i].usedGpuMemory = processes[i].value("used", 0ull);
    }
    *count = static_cast<unsigned int>(processes.size());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t Init() {
  FakeState& state = State();
  if (!state.script_set) {
    const char* path = std::getenv("GPUHERD_FAKE_NVML_SCRIPT");
    if (path != nullptr && *path != '\0') {
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      if (!in || LoadScript(text.str()) != 0) return NVML_ERROR_UNKNOWN;
    }
  }
  auto error = static_cast<nvmlReturn_t>(state.script.value("init_error", 0));
  if (error != NVML_SUCCESS) return error;
  ++state.init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t Count(unsigned int* count) {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(Gpus().size());
  return NVML_SUCCESS;
}

nvmlReturn_t HandleByIndex(unsigned int index, nvmlDevice_t* device) {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= Gpus().size()) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t scripted = Scripted(Gpus()[index], "nvmlDeviceGetHandleByIndex");
  if (scripted != NVML_SUCCESS) return scripted;
  *device = State().handles[index].get();
  return NVML_SUCCESS;
}

nvmlReturn_t CudaDriverVersion(int* version) {
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  auto it = State().script.find("cuda_version");
  if (it == State().script.end()) return NVML_ERROR_NOT_SUPPORTED;
  *version = it->get<int>();
  return NVML_SUCCESS;
}

nvmlReturn_t ThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  return ForGpu(device, "nvmlDeviceGetCurrentClocksEventReasons",
                [&](const json& gpu) { return Field(gpu, "throttle", reasons); });
}

nvmlReturn_t EventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  if (set == nullptr || data == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t index : set->devices) {
    auto& pending = State().pending_xids;
    if (index >= pending.size() || pending[index].empty()) continue;
    data->device = State().handles[index].get();
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = pending[index].front();
    pending[index].pop_front();
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

const json* NvLink(const json& gpu, unsigned int link, nvmlReturn_t* result) {
  auto it = gpu.find("nvlinks");
  if (it == gpu.end()) {
    *result = NVML_ERROR_NOT_SUPPORTED;
    return nullptr;
  }
  if (link >= it->size()) {
    *result = NVML_ERROR_INVALID_ARGUMENT;
    return nullptr;
  }
  *result = NVML_SUCCESS;
  return &(*it)[link];
}

}  // namespace

// C linkage gives these their plain NVML names despite the namespace.
extern "C" {

int FakeNvmlSetScript(const char* text) { return LoadScript(text != nullptr ? text : ""); }
int FakeNvmlInitCount() { return State().init_count; }

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires reset";
    default: return "Unknown Error";
  }
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlInit_v2() { return Init(); }
#endif
nvmlReturn_t nvmlInit() { return Init(); }

nvmlReturn_t nvmlShutdown() {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  --State().init_count;
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_LEGACY
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) { return Count(count); }
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return HandleByIndex(index, device);
}
nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < Gpus().size(); ++i) {
    if (Gpus()[i].value("uuid", "") != uuid) continue;
    if (Gpus()[i].value("lost", false)) return NVML_ERROR_GPU_IS_LOST;
    *device = State().handles[i].get();
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) { return CudaDriverVersion(version); }
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return PciInfo(device, pci);
}
nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int* node) {
  return ForGpu(device, "nvmlDeviceGetNumaNodeId",
                [&](const json& gpu) { return Field(gpu, "numa_node", node); });
}
nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* correctable,
                                       unsigned int* uncorrectable, unsigned int* pending,
                                       unsigned int* failure) {
  return ForGpu(device, "nvmlDeviceGetRemappedRows", [&](const json& gpu) {
    nvmlReturn_t result = Element(gpu, "remapped_rows", 0, correctable);
    if (result == NVML_SUCCESS) result = Element(gpu, "remapped_rows", 1, uncorrectable);
    if (result == NVML_SUCCESS) result = Element(gpu, "remapped_rows", 2, pending);
    if (result == NVML_SUCCESS) result = Element(gpu, "remapped_rows", 3, failure);
    return result;
  });
}
nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long* reasons) {
  return ThrottleReasons(device, reasons);
}
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data,
                                 unsigned int timeout_ms) {
  return EventSetWait(set, data, timeout_ms);
}
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t* type) {
  return ForGpu(device, "nvmlDeviceGetNvLinkRemoteDeviceType", [&](const json& gpu) {
    nvmlReturn_t result;
    const json* entry = NvLink(gpu, link, &result);
    if (entry == nullptr) return result;
    *type = entry->value("type", "gpu") == "switch" ? NVML_NVLINK_DEVICE_TYPE_SWITCH
                                                    : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
  });
}
// Process getters of today's drivers: _v3's entry size depends on the generation.
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     void* infos) {
#ifdef FAKE_NVML_CONF_COMPUTE
  return Processes<nvmlProcessInfo_v3cc_t>(device, count, infos);
#else
  return Processes<nvmlProcessInfo_v2_t>(device, count, infos);
#endif
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     void* infos) {
  return Processes<nvmlProcessInfo_v2_t>(device, count, infos);
}
#ifdef FAKE_NVML_CONF_COMPUTE
nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t, void*) {
  return NVML_ERROR_NOT_SUPPORTED;
}
#else
nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t, void*) {
  return NVML_ERROR_NOT_SUPPORTED;
}
#endif
#endif  // !FAKE_NVML_LEGACY

nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) { return Count(count); }
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return HandleByIndex(index, device);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) { return CudaDriverVersion(version); }
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return PciInfo(device, pci);
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long* reasons) {
  return ThrottleReasons(device, reasons);
}
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data,
                              unsigned int timeout_ms) {
  return EventSetWait(set, data, timeout_ms);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  void* infos) {
  return Processes<nvmlProcessInfo_v1_t>(device, count, infos);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  return StringField(State().script, "driver_version", version, length);
}

#ifndef FAKE_NVML_NO_UUID
nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return ForGpu(device, "nvmlDeviceGetUUID",
                [&](const json& gpu) { return StringField(gpu, "uuid", uuid, length); });
}
#endif
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return ForGpu(device, "nvmlDeviceGetName",
                [&](const json& gpu) { return StringField(gpu, "name", name, length); });
}
nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  return ForGpu(device, "nvmlDeviceGetSerial",
                [&](const json& gpu) { return StringField(gpu, "serial", serial, length); });
}
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return ForGpu(device, "nvmlDeviceGetMemoryInfo", [&](const json& gpu) {
    if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto it = gpu.find("memory");
    if (it == gpu.end()) return NVML_ERROR_NOT_SUPPORTED;
    memory->total = it->value("total", 0ull);
    memory->used = it->value("used", 0ull);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
  });
}
nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return ForGpu(device, "nvmlDeviceGetCudaComputeCapability", [&](const json& gpu) {
    nvmlReturn_t result = Element(gpu, "compute_capability", 0, major);
    return result == NVML_SUCCESS ? Element(gpu, "compute_capability", 1, minor) : result;
  });
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* gen) {
  return ForGpu(device, "nvmlDeviceGetMaxPcieLinkGeneration",
                [&](const json& gpu) { return Element(gpu, "max_pcie", 0, gen); });
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return ForGpu(device, "nvmlDeviceGetMaxPcieLinkWidth",
                [&](const json& gpu) { return Element(gpu, "max_pcie", 1, width); });
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* gen) {
  return ForGpu(device, "nvmlDeviceGetCurrPcieLinkGeneration",
                [&](const json& gpu) { return Element(gpu, "pcie", 0, gen); });
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* width) {
  return ForGpu(device, "nvmlDeviceGetCurrPcieLinkWidth",
                [&](const json& gpu) { return Element(gpu, "pcie", 1, width); });
}
nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int words,
                                      unsigned long* mask) {
  return ForGpu(device, "nvmlDeviceGetCpuAffinity", [&](const json& gpu) {
    if (mask == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    auto it = gpu.find("cpu_affinity");
    if (it == gpu.end()) return NVML_ERROR_NOT_SUPPORTED;
    for (unsigned int i = 0; i < words; ++i) {
      mask[i] = i < it->size() ? (*it)[i].get<unsigned long>() : 0;
    }
    return NVML_SUCCESS;
  });
}
nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int* mw) {
  return ForGpu(device, "nvmlDeviceGetPowerManagementDefaultLimit",
                [&](const json& gpu) { return Field(gpu, "power_default_limit_mw", mw); });
}
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device,
                                               nvmlTemperatureThresholds_t threshold,
                                               unsigned int* celsius) {
  return ForGpu(device, "nvmlDeviceGetTemperatureThreshold", [&](const json& gpu) {
    switch (threshold) {
      case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: return Field(gpu, "temp_slowdown", celsius);
      case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: return Field(gpu, "temp_shutdown", celsius);
    }
    return NVML_ERROR_NOT_SUPPORTED;
  });
}
nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                  nvmlEnableState_t* pending) {
  return ForGpu(device, "nvmlDeviceGetEccMode", [&](const json& gpu) {
    bool enabled = false;
    nvmlReturn_t result = Field(gpu, "ecc_enabled", &enabled);
    if (result != NVML_SUCCESS || current == nullptr || pending == nullptr) return result;
    *current = *pending = enabled ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* rates) {
  return ForGpu(device, "nvmlDeviceGetUtilizationRates", [&](const json& gpu) {
    if (rates == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t result = Element(gpu, "utilization", 0, &rates->gpu);
    return result == NVML_SUCCESS ? Element(gpu, "utilization", 1, &rates->memory) : result;
  });
}
nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int* celsius) {
  return ForGpu(device, "nvmlDeviceGetTemperature", [&](const json& gpu) {
    if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    return Field(gpu, "temperature", celsius);
  });
}
nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* mw) {
  return ForGpu(device, "nvmlDeviceGetPowerUsage",
                [&](const json& gpu) { return Field(gpu, "power_mw", mw); });
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* mw) {
  return ForGpu(device, "nvmlDeviceGetEnforcedPowerLimit",
                [&](const json& gpu) { return Field(gpu, "power_limit_mw", mw); });
}
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* mj) {
  return ForGpu(device, "nvmlDeviceGetTotalEnergyConsumption",
                [&](const json& gpu) { return Field(gpu, "energy_mj", mj); });
}
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                    unsigned int* mhz) {
  return ForGpu(device, "nvmlDeviceGetClockInfo", [&](const json& gpu) {
    switch (type) {
      case NVML_CLOCK_SM: return Field(gpu, "sm_clock", mhz);
      case NVML_CLOCK_MEM: return Field(gpu, "mem_clock", mhz);
      default: return NVML_ERROR_NOT_SUPPORTED;
    }
  });
}
nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* percent) {
  return ForGpu(device, "nvmlDeviceGetFanSpeed",
                [&](const json& gpu) { return Field(gpu, "fan", percent); });
}
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int* kbps) {
  return ForGpu(device, "nvmlDeviceGetPcieThroughput", [&](const json& gpu) {
    return Element(gpu, "pcie_throughput_kbps", counter == NVML_PCIE_UTIL_TX_BYTES ? 0 : 1, kbps);
  });
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* count) {
  return ForGpu(device, "nvmlDeviceGetPcieReplayCounter",
                [&](const json& gpu) { return Field(gpu, "pcie_replay", count); });
}
nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t type,
                                         nvmlEccCounterType_t counter,
                                         unsigned long long* count) {
  return ForGpu(device, "nvmlDeviceGetTotalEccErrors", [&](const json& gpu) {
    if (counter != NVML_VOLATILE_ECC) return NVML_ERROR_NOT_SUPPORTED;
    return Element(gpu, "ecc_volatile", type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? 0 : 1, count);
  });
}
nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int* count, unsigned long long* addresses) {
  return ForGpu(device, "nvmlDeviceGetRetiredPages", [&](const json& gpu) {
    unsigned int pages = 0;
    nvmlReturn_t result = Element(gpu, "retired_pages", cause, &pages);
    if (result != NVML_SUCCESS || count == nullptr) return result;
    if (*count < pages) {
      *count = pages;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < pages && addresses != nullptr; ++i) addresses[i] = 0x1000 * i;
    *count = pages;
    return NVML_SUCCESS;
  });
}
nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device,
                                                    nvmlEnableState_t* pending) {
  return ForGpu(device, "nvmlDeviceGetRetiredPagesPendingStatus", [&](const json& gpu) {
    bool value = false;
    nvmlReturn_t result = Field(gpu, "retired_pending", &value);
    if (result == NVML_SUCCESS) *pending = value ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return result;
  });
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t first, nvmlDevice_t second,
                                                 nvmlGpuTopologyLevel_t* level) {
  return ForGpu(first, "nvmlDeviceGetTopologyCommonAncestor", [&](const json&) {
    auto it = State().script.find("topology");
    if (it == State().script.end()) return NVML_ERROR_NOT_SUPPORTED;
    if (second == nullptr || level == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    *level = static_cast<nvmlGpuTopologyLevel_t>(
        (*it).at(first->index).at(second->index).get<int>());
    return NVML_SUCCESS;
  });
}
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t* active) {
  return ForGpu(device, "nvmlDeviceGetNvLinkState", [&](const json& gpu) {
    nvmlReturn_t result;
    const json* entry = NvLink(gpu, link, &result);
    if (entry == nullptr) return result;
    *active = entry->value("active", false) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
  });
}
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t* pci) {
  return ForGpu(device, "nvmlDeviceGetNvLinkRemotePciInfo", [&](const json& gpu) {
    nvmlReturn_t result;
    const json* entry = NvLink(gpu, link, &result);
    if (entry == nullptr) return result;
    FillPci(entry->value("remote", json::object()), pci);
    return NVML_SUCCESS;
  });
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  if (State().init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *set = new nvmlEventSet_st;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  delete set;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
  return ForGpu(device, "nvmlDeviceRegisterEvents", [&](const json& gpu) {
    if (set == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
    if (gpu.value("no_events", false)) return NVML_ERROR_NOT_SUPPORTED;
    if ((types & nvmlEventTypeXidCriticalError) != 0) set->devices.insert(device->index);
    return NVML_SUCCESS;
  });
}

}  // extern "C"

}  // namespace gpuherd::gpu::nvml
