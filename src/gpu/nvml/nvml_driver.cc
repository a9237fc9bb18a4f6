#include "gpu/nvml/nvml_driver.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "gpu/nvml/nvml_library.h"
#include "gpu/xid.h"
#include "host/host.h"

namespace gpuherd::gpu::nvml {
namespace {

constexpr unsigned int kCpuMaskWords = 64;  // room for 4096 CPUs
// Bounds one drain of the event set, should a driver keep reporting events.
constexpr int kMaxEventsPerDrain = 1024;

// 12040 -> "12.4".
std::string CudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// NVML's CPU bitmask -> "0-15,32-47".
std::string CpuListFromMask(const unsigned long* words, unsigned int count) {
  constexpr int kBits = sizeof(unsigned long) * 8;
  const int total = static_cast<int>(count) * kBits;
  std::string list;
  int run_start = -1;
  for (int cpu = 0; cpu <= total; ++cpu) {
    bool set = cpu < total && ((words[cpu / kBits] >> (cpu % kBits)) & 1UL) != 0;
    if (set && run_start < 0) run_start = cpu;
    if (!set && run_start >= 0) {
      if (!list.empty()) list += ',';
      list += std::to_string(run_start);
      if (cpu - 1 > run_start) list += "-" + std::to_string(cpu - 1);
      run_start = -1;
    }
  }
  return list;
}

Link LinkFromLevel(nvmlGpuTopologyLevel_t level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:  // two GPUs of one board, behind the board's own switch
    case NVML_TOPOLOGY_SINGLE:
    case NVML_TOPOLOGY_MULTIPLE:
      return Link::kPcieSwitch;
    case NVML_TOPOLOGY_HOSTBRIDGE:
      return Link::kHostBridge;
    case NVML_TOPOLOGY_NODE:
      return Link::kNumaNode;
    case NVML_TOPOLOGY_SYSTEM:
      return Link::kCrossSocket;
  }
  return Link::kUnknown;
}

struct PciAddress {
  unsigned int domain = 0, bus = 0, device = 0;
  bool operator==(const PciAddress&) const = default;
};

std::string BusIdText(const nvmlPciInfo_t& pci) {
  std::string id(pci.busId, strnlen(pci.busId, sizeof(pci.busId)));
  if (!id.empty()) return id;
  char text[32];
  std::snprintf(text, sizeof(text), "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
  return text;
}

std::string TrimRight(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\0')) {
    text.pop_back();
  }
  return text;
}

// Calls NVML for one GPU and keeps the first sign that the GPU itself stopped
// answering; any other failure just leaves that reading absent.
class Caller {
 public:
  explicit Caller(const NvmlLibrary& library) : library_(library) {}

  // False when the entry point is missing or fails.
  template <typename Fn, typename... Args>
  bool Call(Fn fn, const char* what, Args... args) {
    if (fn == nullptr) return false;
    return Check(fn(args...), what);
  }

  bool Check(nvmlReturn_t result, const char* what) {
    if (result == NVML_SUCCESS) return true;
    // Both mean the GPU can do no work until it is reset or reseated.
    bool gone = result == NVML_ERROR_GPU_IS_LOST || result == NVML_ERROR_RESET_REQUIRED;
    if (gone && lost_.empty()) lost_ = std::string(what) + ": " + library_.ErrorString(result);
    return false;
  }

  // Empty while the GPU answers.
  const std::string& lost() const { return lost_; }

 private:
  const NvmlLibrary& library_;
  std::string lost_;
};

// Reads the compute-process list with entries of type Info, retrying when
// processes start between the size query and the read.
template <typename Info>
std::vector<GpuProcess> ReadProcesses(Caller& call, nvmlDeviceProcessesFn fn,
                                      nvmlDevice_t handle) {
  constexpr const char* kWhat = "nvmlDeviceGetComputeRunningProcesses";
  unsigned int count = 0;
  nvmlReturn_t result = fn(handle, &count, nullptr);
  for (int attempt = 0; attempt < 3 && result == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
    std::vector<Info> infos(count + 8);
    unsigned int filled = static_cast<unsigned int>(infos.size());
    result = fn(handle, &filled, infos.data());
    if (result == NVML_SUCCESS) {
      std::vector<GpuProcess> processes;
      for (unsigned int i = 0; i < filled && i < infos.size(); ++i) {
        GpuProcess process;
        process.pid = static_cast<int>(infos[i].pid);
        if (infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
          process.used_memory_bytes = infos[i].usedGpuMemory;
        }
        processes.push_back(std::move(process));
      }
      return processes;
    }
    count = filled;
  }
  call.Check(result, kWhat);  // SUCCESS on the size query: no processes
  return {};
}

class NvmlDriver : public Driver {
 public:
  NvmlDriver(std::unique_ptr<NvmlLibrary> library, std::unique_ptr<host::Host> host)
      : library_(std::move(library)), api_(library_->api()), host_(std::move(host)) {}

  ~NvmlDriver() override {
    FreeEventSet();
    api_.shutdown();
  }

  std::string name() const override { return "nvml"; }
  bool simulated() const override { return false; }
  Result<Fleet> Discover() override;
  Result<GpuSample> Sample(int index, TimeMs now) override;

 private:
  struct Device {
    int index = 0;  // NVML's index, as nvidia-smi and CUDA number the GPU
    std::string uuid;
    nvmlDevice_t handle = nullptr;
    PciAddress pci;
    std::vector<XidEvent> pending_xids;  // drained but not yet handed out
  };

  // Whom a GPU's active NVLinks reach.
  struct NvLinkPeers {
    std::vector<PciAddress> remotes;
    bool reaches_switch = false;
    int switch_links = 0;  // active links to an NVSwitch
  };

  std::optional<GpuInfo> DescribeDevice(unsigned int index, nvmlDevice_t handle,
                                        const std::string& driver_version,
                                        const std::string& cuda_version, PciAddress* pci);
  NvLinkPeers ReadNvLinks(nvmlDevice_t handle);
  void ReadTopology(Fleet* fleet);
  void CreateEventSet();
  void FreeEventSet();
  void DrainEvents(TimeMs now);
  std::string ProcessName(int pid) const;

  std::unique_ptr<NvmlLibrary> library_;
  const NvmlApi& api_;
  std::unique_ptr<host::Host> host_;
  bool discovered_ = false;
  std::vector<Device> devices_;
  nvmlEventSet_t events_ = nullptr;
};

Result<Fleet> NvmlDriver::Discover() {
  unsigned int count = 0;
  nvmlReturn_t result = api_.device_get_count(&count);
  if (result != NVML_SUCCESS) {
    return Unavailable("nvmlDeviceGetCount failed: " + library_->ErrorString(result));
  }
  // Events pending from the previous enumeration are dropped with its set.
  FreeEventSet();
  devices_.clear();

  Caller call(*library_);
  char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  std::string driver_version;
  if (call.Call(api_.system_get_driver_version, "nvmlSystemGetDriverVersion", text,
                NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE)) {
    driver_version.assign(text, strnlen(text, sizeof(text)));
  }
  std::string cuda_version;
  int cuda = 0;
  if (call.Call(api_.system_get_cuda_driver_version, "nvmlSystemGetCudaDriverVersion", &cuda)) {
    cuda_version = CudaVersionText(cuda);
  }

  Fleet fleet;
  fleet.driver_name = "nvml";
  fleet.simulated = false;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    result = api_.device_get_handle_by_index(i, &handle);
    if (result != NVML_SUCCESS) {
      // A GPU off the bus keeps its index but yields no handle; the others go on.
      spdlog::warn("NVML: GPU {} left out: nvmlDeviceGetHandleByIndex: {}", i,
                   library_->ErrorString(result));
      continue;
    }
    PciAddress pci;
    std::optional<GpuInfo> info = DescribeDevice(i, handle, driver_version, cuda_version, &pci);
    if (!info) continue;
    devices_.push_back(Device{info->index, info->uuid, handle, pci, {}});
    fleet.gpus.push_back(std::move(*info));
  }
  CreateEventSet();
  ReadTopology(&fleet);
  discovered_ = true;
  return fleet;
}

std::optional<GpuInfo> NvmlDriver::DescribeDevice(unsigned int index, nvmlDevice_t handle,
                                                  const std::string& driver_version,
                                                  const std::string& cuda_version,
                                                  PciAddress* pci) {
  Caller call(*library_);
  GpuInfo info;
  info.index = static_cast<int>(index);
  info.driver_version = driver_version;
  info.cuda_version = cuda_version;

  char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  nvmlReturn_t result = api_.device_get_uuid(handle, text, sizeof(text));
  if (result != NVML_SUCCESS) {
    // The UUID is the GPU's key everywhere else; without it the GPU cannot be tracked.
    spdlog::warn("NVML: GPU {} left out: nvmlDeviceGetUUID: {}", index,
                 library_->ErrorString(result));
    return std::nullopt;
  }
  info.uuid.assign(text, strnlen(text, sizeof(text)));
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (call.Call(api_.device_get_name, "nvmlDeviceGetName", handle, name, sizeof(name))) {
    info.name.assign(name, strnlen(name, sizeof(name)));
  }
  char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE] = {};
  if (call.Call(api_.device_get_serial, "nvmlDeviceGetSerial", handle, serial, sizeof(serial))) {
    info.serial.assign(serial, strnlen(serial, sizeof(serial)));
  }
  nvmlPciInfo_t pci_info = {};
  if (call.Call(api_.device_get_pci_info, "nvmlDeviceGetPciInfo", handle, &pci_info)) {
    info.pci_bus_id = BusIdText(pci_info);
    *pci = PciAddress{pci_info.domain, pci_info.bus, pci_info.device};
  }
  nvmlMemory_t memory = {};
  if (call.Call(api_.device_get_memory_info, "nvmlDeviceGetMemoryInfo", handle, &memory)) {
    info.memory_total_bytes = memory.total;
  }
  int major = 0, minor = 0;
  if (call.Call(api_.device_get_cuda_compute_capability, "nvmlDeviceGetCudaComputeCapability",
                handle, &major, &minor)) {
    info.cc_major = major;
    info.cc_minor = minor;
  }
  unsigned int value = 0;
  if (call.Call(api_.device_get_max_pcie_link_generation, "nvmlDeviceGetMaxPcieLinkGeneration",
                handle, &value)) {
    info.max_pcie_gen = static_cast<int>(value);
  }
  if (call.Call(api_.device_get_max_pcie_link_width, "nvmlDeviceGetMaxPcieLinkWidth", handle,
                &value)) {
    info.max_pcie_width = static_cast<int>(value);
  }
  if (call.Call(api_.device_get_numa_node_id, "nvmlDeviceGetNumaNodeId", handle, &value)) {
    info.numa_node = static_cast<int>(value);
  }
  unsigned long mask[kCpuMaskWords] = {};
  if (call.Call(api_.device_get_cpu_affinity, "nvmlDeviceGetCpuAffinity", handle, kCpuMaskWords,
                mask)) {
    info.cpu_affinity = CpuListFromMask(mask, kCpuMaskWords);
  }
  if (call.Call(api_.device_get_power_management_default_limit,
                "nvmlDeviceGetPowerManagementDefaultLimit", handle, &value)) {
    info.power_limit_default_w = value / 1000.0;
  }
  if (call.Call(api_.device_get_temperature_threshold, "nvmlDeviceGetTemperatureThreshold",
                handle, NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, &value)) {
    info.temp_slowdown_c = value;
  }
  if (call.Call(api_.device_get_temperature_threshold, "nvmlDeviceGetTemperatureThreshold",
                handle, NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, &value)) {
    info.temp_shutdown_c = value;
  }
  nvmlEnableState_t current = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
  if (call.Call(api_.device_get_ecc_mode, "nvmlDeviceGetEccMode", handle, &current, &pending)) {
    info.ecc_enabled = current == NVML_FEATURE_ENABLED;
  }
  if (!call.lost().empty()) {
    // Kept: its first Sample fails the same way and the GPU is marked lost.
    spdlog::warn("NVML: GPU {} ({}) stopped answering during discovery: {}", index, info.uuid,
                 call.lost());
  }
  return info;
}

NvmlDriver::NvLinkPeers NvmlDriver::ReadNvLinks(nvmlDevice_t handle) {
  NvLinkPeers peers;
  if (api_.device_get_nvlink_state == nullptr) return peers;
  for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
    nvmlEnableState_t active = NVML_FEATURE_DISABLED;
    nvmlReturn_t result = api_.device_get_nvlink_state(handle, link, &active);
    // NOT_SUPPORTED: no NVLink at all; INVALID_ARGUMENT: past this GPU's last link.
    if (result == NVML_ERROR_NOT_SUPPORTED || result == NVML_ERROR_INVALID_ARGUMENT) break;
    if (result != NVML_SUCCESS || active != NVML_FEATURE_ENABLED) continue;
    nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    if (api_.device_get_nvlink_remote_device_type != nullptr &&
        api_.device_get_nvlink_remote_device_type(handle, link, &type) == NVML_SUCCESS &&
        type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
      peers.reaches_switch = true;
      ++peers.switch_links;
      continue;
    }
    nvmlPciInfo_t remote = {};
    if (api_.device_get_nvlink_remote_pci_info != nullptr &&
        api_.device_get_nvlink_remote_pci_info(handle, link, &remote) == NVML_SUCCESS) {
      peers.remotes.push_back(PciAddress{remote.domain, remote.bus, remote.device});
    }
  }
  return peers;
}

void NvmlDriver::ReadTopology(Fleet* fleet) {
  const size_t n = devices_.size();
  std::vector<std::vector<Link>> topology(n, std::vector<Link>(n, Link::kUnknown));
  std::vector<std::vector<int>> nvlinks(n, std::vector<int>(n, 0));
  std::vector<std::vector<bool>> pcie_multiple(n, std::vector<bool>(n, false));
  std::vector<NvLinkPeers> peers;
  for (const Device& device : devices_) peers.push_back(ReadNvLinks(device.handle));
  auto links = [&](size_t from, size_t to) {
    int count = 0;
    for (const PciAddress& remote : peers[from].remotes) count += remote == devices_[to].pci ? 1 : 0;
    return count;
  };
  for (size_t i = 0; i < n; ++i) {
    topology[i][i] = Link::kSelf;
    for (size_t j = i + 1; j < n; ++j) {
      Link link = Link::kUnknown;
      nvmlGpuTopologyLevel_t level;
      if (api_.device_get_topology_common_ancestor != nullptr &&
          api_.device_get_topology_common_ancestor(devices_[i].handle, devices_[j].handle,
                                                   &level) == NVML_SUCCESS) {
        link = LinkFromLevel(level);
        pcie_multiple[i][j] = pcie_multiple[j][i] = level == NVML_TOPOLOGY_MULTIPLE;
      }
      // All GPUs on one NVSwitch fabric reach each other over NVLink.
      bool both_on_switch = peers[i].reaches_switch && peers[j].reaches_switch;
      int count = std::max(links(i, j), links(j, i));
      if (both_on_switch) count += std::min(peers[i].switch_links, peers[j].switch_links);
      if (count > 0) link = Link::kNvLink;
      nvlinks[i][j] = nvlinks[j][i] = count;
      topology[i][j] = topology[j][i] = link;
    }
  }
  fleet->topology = std::move(topology);
  fleet->nvlinks = std::move(nvlinks);
  fleet->pcie_multiple = std::move(pcie_multiple);
}

void NvmlDriver::CreateEventSet() {
  if (api_.event_set_create == nullptr || api_.device_register_events == nullptr ||
      api_.event_set_wait == nullptr || api_.event_set_free == nullptr) {
    return;
  }
  nvmlReturn_t result = api_.event_set_create(&events_);
  if (result != NVML_SUCCESS) {
    events_ = nullptr;
    spdlog::warn("NVML: no XID events: nvmlEventSetCreate: {}", library_->ErrorString(result));
    return;
  }
  for (const Device& device : devices_) {
    result = api_.device_register_events(device.handle, nvmlEventTypeXidCriticalError, events_);
    if (result != NVML_SUCCESS) {
      // Common on GeForce cards and in containers; the GPU is still sampled.
      spdlog::info("NVML: no XID events for GPU {}: {}", device.index,
                   library_->ErrorString(result));
    }
  }
}

void NvmlDriver::FreeEventSet() {
  if (events_ != nullptr) api_.event_set_free(events_);
  events_ = nullptr;
}

void NvmlDriver::DrainEvents(TimeMs now) {
  if (events_ == nullptr) return;
  for (int i = 0; i < kMaxEventsPerDrain; ++i) {
    nvmlEventData_t data = {};
    if (api_.event_set_wait(events_, &data, 0) != NVML_SUCCESS) return;  // TIMEOUT: none left
    if ((data.eventType & nvmlEventTypeXidCriticalError) == 0) continue;
    for (Device& device : devices_) {
      if (device.handle != data.device) continue;
      int xid = static_cast<int>(data.eventData);
      device.pending_xids.push_back(XidEvent{now, xid, XidDescription(xid)});
      break;
    }
  }
}

std::string NvmlDriver::ProcessName(int pid) const {
  auto comm = host_->ReadFile("/proc/" + std::to_string(pid) + "/comm");
  return comm.ok() ? TrimRight(*comm) : "";
}

Result<GpuSample> NvmlDriver::Sample(int index, TimeMs now) {
  if (!discovered_) return FailedPrecondition("NVML: Sample() called before Discover()");
  Device* device = nullptr;
  for (Device& candidate : devices_) {
    if (candidate.index == index) device = &candidate;
  }
  if (device == nullptr) {
    return NotFound("NVML: no GPU with index " + std::to_string(index) +
                    " was discovered; run Discover() again to re-enumerate");
  }
  const std::string label = "GPU " + std::to_string(index) + " (" + device->uuid + ")";
  // A fresh lookup notices a GPU that has gone since discovery.
  nvmlDevice_t handle = device->handle;
  if (api_.device_get_handle_by_uuid != nullptr) {
    nvmlReturn_t result = api_.device_get_handle_by_uuid(device->uuid.c_str(), &handle);
    if (result != NVML_SUCCESS) {
      return Unavailable(label + ": nvmlDeviceGetHandleByUUID: " + library_->ErrorString(result));
    }
  }
  DrainEvents(now);
  std::vector<XidEvent> xids = std::move(device->pending_xids);
  device->pending_xids.clear();

  Caller call(*library_);
  GpuSample sample;
  sample.time = now;
  nvmlUtilization_t utilization = {};
  if (call.Call(api_.device_get_utilization_rates, "nvmlDeviceGetUtilizationRates", handle,
                &utilization)) {
    sample.gpu_util_pct = utilization.gpu;
    sample.mem_util_pct = utilization.memory;
  }
  nvmlMemory_t memory = {};
  if (call.Call(api_.device_get_memory_info, "nvmlDeviceGetMemoryInfo", handle, &memory)) {
    sample.mem_used_bytes = memory.used;
    sample.mem_total_bytes = memory.total;
  }
  unsigned int value = 0;
  if (call.Call(api_.device_get_temperature, "nvmlDeviceGetTemperature", handle,
                NVML_TEMPERATURE_GPU, &value)) {
    sample.temp_c = value;
  }
  if (call.Call(api_.device_get_power_usage, "nvmlDeviceGetPowerUsage", handle, &value)) {
    sample.power_w = value / 1000.0;
  }
  if (call.Call(api_.device_get_enforced_power_limit, "nvmlDeviceGetEnforcedPowerLimit", handle,
                &value)) {
    sample.power_limit_w = value / 1000.0;
  }
  unsigned long long wide = 0;
  if (call.Call(api_.device_get_total_energy_consumption, "nvmlDeviceGetTotalEnergyConsumption",
                handle, &wide)) {
    sample.energy_mj = wide;
  }
  if (call.Call(api_.device_get_clock_info, "nvmlDeviceGetClockInfo", handle, NVML_CLOCK_SM,
                &value)) {
    sample.sm_clock_mhz = static_cast<int>(value);
  }
  if (call.Call(api_.device_get_clock_info, "nvmlDeviceGetClockInfo", handle, NVML_CLOCK_MEM,
                &value)) {
    sample.mem_clock_mhz = static_cast<int>(value);
  }
  if (call.Call(api_.device_get_fan_speed, "nvmlDeviceGetFanSpeed", handle, &value)) {
    sample.fan_pct = value;
  }
  if (call.Call(api_.device_get_curr_pcie_link_generation, "nvmlDeviceGetCurrPcieLinkGeneration",
                handle, &value)) {
    sample.pcie_gen = static_cast<int>(value);
  }
  if (call.Call(api_.device_get_curr_pcie_link_width, "nvmlDeviceGetCurrPcieLinkWidth", handle,
                &value)) {
    sample.pcie_width = static_cast<int>(value);
  }
  if (call.Call(api_.device_get_pcie_throughput, "nvmlDeviceGetPcieThroughput", handle,
                NVML_PCIE_UTIL_TX_BYTES, &value)) {
    sample.pcie_tx_kbps = value;
  }
  if (call.Call(api_.device_get_pcie_throughput, "nvmlDeviceGetPcieThroughput", handle,
                NVML_PCIE_UTIL_RX_BYTES, &value)) {
    sample.pcie_rx_kbps = value;
  }
  if (call.Call(api_.device_get_pcie_replay_counter, "nvmlDeviceGetPcieReplayCounter", handle,
                &value)) {
    sample.pcie_replay_count = value;
  }
  if (call.Call(api_.device_get_total_ecc_errors, "nvmlDeviceGetTotalEccErrors", handle,
                NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &wide)) {
    sample.ecc_sbe_volatile = wide;
  }
  if (call.Call(api_.device_get_total_ecc_errors, "nvmlDeviceGetTotalEccErrors", handle,
                NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &wide)) {
    sample.ecc_dbe_volatile = wide;
  }
  if (api_.device_get_retired_pages != nullptr) {
    // A zero-sized buffer asks for the count only; NVML answers
    // INSUFFICIENT_SIZE when there are pages.
    for (auto cause : {NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
                       NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR}) {
      unsigned int pages = 0;
      nvmlReturn_t result = api_.device_get_retired_pages(handle, cause, &pages, nullptr);
      if (result != NVML_SUCCESS && result != NVML_ERROR_INSUFFICIENT_SIZE) {
        call.Check(result, "nvmlDeviceGetRetiredPages");
        continue;
      }
      (cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? sample.retired_pages_dbe
                                                                 : sample.retired_pages_sbe) =
          pages;
    }
  }
  nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
  if (call.Call(api_.device_get_retired_pages_pending_status,
                "nvmlDeviceGetRetiredPagesPendingStatus", handle, &pending)) {
    sample.retired_pages_pending = pending == NVML_FEATURE_ENABLED;
  }
  unsigned int correctable = 0, uncorrectable = 0, rows_pending = 0, rows_failure = 0;
  if (call.Call(api_.device_get_remapped_rows, "nvmlDeviceGetRemappedRows", handle, &correctable,
                &uncorrectable, &rows_pending, &rows_failure)) {
    sample.remapped_rows_correctable = correctable;
    sample.remapped_rows_uncorrectable = uncorrectable;
    sample.remapped_rows_pending = rows_pending != 0;
    sample.remapped_rows_failure = rows_failure != 0;
  }
  if (call.Call(api_.device_get_current_clocks_event_reasons,
                "nvmlDeviceGetCurrentClocksEventReasons", handle, &wide)) {
    sample.throttle_reasons = wide;
  }
  if (nvmlDeviceProcessesFn fn = api_.device_get_compute_running_processes; fn != nullptr) {
    switch (library_->process_layout()) {
      case ProcessLayout::kV1:
        sample.processes = ReadProcesses<nvmlProcessInfo_v1_t>(call, fn, handle);
        break;
      case ProcessLayout::kV2:
        sample.processes = ReadProcesses<nvmlProcessInfo_v2_t>(call, fn, handle);
        break;
      case ProcessLayout::kV3ConfCompute:
        sample.processes = ReadProcesses<nvmlProcessInfo_v3cc_t>(call, fn, handle);
        break;
      case ProcessLayout::kAbsent:
        break;
    }
    for (GpuProcess& process : sample.processes) process.name = ProcessName(process.pid);
  }

  if (!call.lost().empty()) {
    std::string message = label + ": " + call.lost();
    // The XIDs that came with the loss (79 above all) would otherwise vanish with the sample.
    for (const XidEvent& xid : xids) {
      message += "; XID " + std::to_string(xid.xid) + " (" + xid.description + ")";
    }
    return Unavailable(message);
  }
  sample.xids = std::move(xids);
  return sample;
}

}  // namespace

Result<std::unique_ptr<Driver>> OpenNvmlDriver(const std::string& library_path) {
  const std::string path = ResolveNvmlLibraryPath(library_path);
  auto library = NvmlLibrary::Open(path);
  if (!library.ok()) return library.status();
  nvmlReturn_t result = (*library)->api().init();
  if (result != NVML_SUCCESS) {
    return Unavailable("nvmlInit failed in " + path + ": " + (*library)->ErrorString(result) +
                       " (is the NVIDIA kernel module loaded?)");
  }
  return std::unique_ptr<Driver>(
      std::make_unique<NvmlDriver>(std::move(library).value(), host::NewHost("/")));
}

}  // namespace gpuherd::gpu::nvml
