// The part of NVML's C ABI that gpuherd uses, written from NVIDIA's NVML API
// reference so that nothing from the driver or the CUDA toolkit is needed to
// build. Names follow NVML's own spelling (not gpuherd's style) so each line
// can be checked against the reference; values and layouts are the stable ABI
// and must never be "tidied".
#pragma once

namespace gpuherd::gpu::nvml {

// A fixed underlying type, as for CUresult: a newer NVML returns codes not
// listed here, and loading one into an enum without it is undefined.
enum nvmlReturn_t : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_UNKNOWN = 999,
};

enum nvmlEnableState_t { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };

enum nvmlTemperatureSensors_t { NVML_TEMPERATURE_GPU = 0 };

enum nvmlTemperatureThresholds_t {
  NVML_TEMPERATURE_THRESHOLD_SHUTDOWN = 0,
  NVML_TEMPERATURE_THRESHOLD_SLOWDOWN = 1,
};

enum nvmlClockType_t {
  NVML_CLOCK_GRAPHICS = 0,
  NVML_CLOCK_SM = 1,
  NVML_CLOCK_MEM = 2,
  NVML_CLOCK_VIDEO = 3,
};

enum nvmlPcieUtilCounter_t { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };

enum nvmlMemoryErrorType_t {
  NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
  NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
};

enum nvmlEccCounterType_t { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };

enum nvmlPageRetirementCause_t {
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
};

enum nvmlGpuTopologyLevel_t {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};

enum nvmlIntNvLinkDeviceType_t {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF,
};

constexpr unsigned long long nvmlEventTypeXidCriticalError = 0x0000000000000008ULL;

// Buffer sizes NVML documents for its string getters.
constexpr unsigned int NVML_DEVICE_UUID_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_NAME_V2_BUFFER_SIZE = 96;
constexpr unsigned int NVML_DEVICE_SERIAL_BUFFER_SIZE = 30;
constexpr unsigned int NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE = 80;
constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE = 32;
constexpr unsigned int NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE = 16;
// The most NVLinks any GPU has had (Hopper); NVML rejects larger link numbers.
constexpr unsigned int NVML_NVLINK_MAX_LINKS = 18;

// Opaque handles owned by NVML.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;
struct nvmlEventSet_st;
using nvmlEventSet_t = nvmlEventSet_st*;

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_t {
  unsigned int gpu;     // percent of the sample period a kernel ran
  unsigned int memory;  // percent of the sample period memory was read or written
};

// The layout of nvmlDeviceGetPciInfo_v2 and _v3 (and the NVLink remote PCI
// getter); the unversioned getter used an older, shorter layout.
struct nvmlPciInfo_t {
  char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
};

// One entry of nvmlDeviceGetComputeRunningProcesses (unversioned): 16 bytes.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

// One entry of the _v2 getter, and of _v3 in most drivers: 24 bytes.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// One entry of _v3 in the drivers of the confidential-computing era that
// export nvmlDeviceGetConfComputeMemSizeInfo but not yet
// nvmlDeviceGetRunningProcessDetailList: 32 bytes.
struct nvmlProcessInfo_v3cc_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
  unsigned long long usedGpuCcProtectedMemory;
};

// Older drivers fill only the first three fields; the struct is zeroed first.
struct nvmlEventData_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the XID number for XID events
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

// NVML reports unsupported usedGpuMemory (e.g. under WDDM) as this value.
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;

// Function types, one per distinct signature. Versioned and unversioned
// entry points that share a signature share a type.
using nvmlVoidFn = nvmlReturn_t (*)();
using nvmlErrorStringFn = const char* (*)(nvmlReturn_t);
using nvmlUintOutFn = nvmlReturn_t (*)(unsigned int*);
using nvmlIntOutFn = nvmlReturn_t (*)(int*);
using nvmlStringOutFn = nvmlReturn_t (*)(char*, unsigned int);
using nvmlHandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);
using nvmlHandleByUuidFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using nvmlDeviceStringFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);
using nvmlDeviceUintFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);
using nvmlDeviceUllFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);
using nvmlDeviceEnableFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t*);
using nvmlDeviceEccModeFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlEnableState_t*, nvmlEnableState_t*);
using nvmlDevicePciInfoFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*);
using nvmlDeviceMemoryFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*);
using nvmlDeviceUtilizationFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlUtilization_t*);
using nvmlDeviceComputeCapabilityFn = nvmlReturn_t (*)(nvmlDevice_t, int*, int*);
using nvmlDeviceCpuAffinityFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, unsigned long*);
using nvmlDeviceTemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlTemperatureSensors_t,
                                                 unsigned int*);
using nvmlDeviceTemperatureThresholdFn = nvmlReturn_t (*)(nvmlDevice_t,
                                                          nvmlTemperatureThresholds_t,
                                                          unsigned int*);
using nvmlDeviceClockFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlClockType_t, unsigned int*);
using nvmlDevicePcieThroughputFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPcieUtilCounter_t,
                                                    unsigned int*);
using nvmlDeviceTotalEccFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlMemoryErrorType_t,
                                              nvmlEccCounterType_t, unsigned long long*);
using nvmlDeviceRetiredPagesFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlPageRetirementCause_t,
                                                  unsigned int*, unsigned long long*);
using nvmlDeviceRemappedRowsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, unsigned int*,
                                                  unsigned int*, unsigned int*);
// The entries' layout depends on which version was resolved (see above), so
// the array is passed untyped.
using nvmlDeviceProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, void*);
using nvmlDeviceTopologyFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t,
                                              nvmlGpuTopologyLevel_t*);
using nvmlDeviceNvLinkStateFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int,
                                                 nvmlEnableState_t*);
using nvmlDeviceNvLinkPciFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int, nvmlPciInfo_t*);
using nvmlDeviceNvLinkTypeFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int,
                                                nvmlIntNvLinkDeviceType_t*);
using nvmlEventSetCreateFn = nvmlReturn_t (*)(nvmlEventSet_t*);
using nvmlEventSetFreeFn = nvmlReturn_t (*)(nvmlEventSet_t);
using nvmlDeviceRegisterEventsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long,
                                                    nvmlEventSet_t);
using nvmlEventSetWaitFn = nvmlReturn_t (*)(nvmlEventSet_t, nvmlEventData_t*, unsigned int);

}  // namespace gpuherd::gpu::nvml
