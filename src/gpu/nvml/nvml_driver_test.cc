#include "gpu/nvml/nvml_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu/xid.h"

namespace gpuherd::gpu::nvml {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kGiB = 1ULL << 30;

// The scripting surface of a fake NVML build (see fake_nvml.cc). dlopen of
// the same path yields the instance the driver loads.
class FakeNvml {
 public:
  explicit FakeNvml(const char* path) : handle_(dlopen(path, RTLD_NOW | RTLD_LOCAL)) {
    if (handle_ == nullptr) return;
    set_script_ = reinterpret_cast<int (*)(const char*)>(dlsym(handle_, "FakeNvmlSetScript"));
    init_count_ = reinterpret_cast<int (*)()>(dlsym(handle_, "FakeNvmlInitCount"));
  }
  ~FakeNvml() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  bool loaded() const { return set_script_ != nullptr && init_count_ != nullptr; }
  void SetScript(const json& script) { ASSERT_EQ(set_script_(script.dump().c_str()), 0); }
  int InitCount() const { return init_count_(); }

 private:
  void* handle_;
  int (*set_script_)(const char*) = nullptr;
  int (*init_count_)() = nullptr;
};

json FullGpu(int index) {
  return json{
      {"uuid", "GPU-0000000" + std::to_string(index)},
      {"name", "NVIDIA H100 80GB HBM3"},
      {"serial", "165432100000" + std::to_string(index)},
      {"pci", {{"domain", 0}, {"bus", 0x17 + index}, {"device", 0}}},
      {"memory", {{"total", 80 * kGiB}, {"used", 3 * kGiB}}},
      {"compute_capability", {9, 0}},
      {"max_pcie", {5, 16}},
      {"pcie", {4, 8}},
      {"numa_node", index},
      // CPUs 0-15 and 32-47 in the first word, CPU 64 in the second.
      {"cpu_affinity", {0x0000FFFF0000FFFFULL, 0x1ULL}},
      {"power_default_limit_mw", 700000},
      {"temp_slowdown", 87},
      {"temp_shutdown", 92},
      {"ecc_enabled", true},
      {"utilization", {75, 30}},
      {"temperature", 61},
      {"power_mw", 345678},
      {"power_limit_mw", 650000},
      {"energy_mj", 123456789012ULL},
      {"sm_clock", 1980},
      {"mem_clock", 2619},
      {"fan", 40},
      {"pcie_throughput_kbps", {1200, 3400}},
      {"pcie_replay", 7},
      {"ecc_volatile", {11, 2}},
      {"retired_pages", {3, 1}},
      {"retired_pending", true},
      {"remapped_rows", {5, 1, 1, 0}},
      {"throttle", 0x44},
      {"processes", json::array()},
  };
}

json Script(int gpu_count) {
  json script = {{"driver_version", "550.54.15"}, {"cuda_version", 12040},
                 {"gpus", json::array()}};
  for (int i = 0; i < gpu_count; ++i) script["gpus"].push_back(FullGpu(i));
  return script;
}

std::string OwnComm() {
  std::ifstream in("/proc/self/comm");
  std::string name;
  std::getline(in, name);
  return name;
}

class NvmlDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fake_.loaded()) << dlerror();
    fake_.SetScript(Script(2));
  }

  std::unique_ptr<Driver> Open(const char* path = FAKE_NVML_PATH) {
    auto driver = OpenNvmlDriver(path);
    EXPECT_TRUE(driver.ok()) << driver.status().ToString();
    return driver.ok() ? std::move(driver).value() : nullptr;
  }

  FakeNvml fake_{FAKE_NVML_PATH};
};

TEST_F(NvmlDriverTest, MissingLibraryNamesThePathAndDlerror) {
  auto driver = OpenNvmlDriver("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), Code::kUnavailable);
  EXPECT_THAT(driver.status().message(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
  EXPECT_THAT(driver.status().message(), HasSubstr("cannot open shared object file"));
}

TEST_F(NvmlDriverTest, MissingRequiredSymbolNamesTheSymbol) {
  auto driver = OpenNvmlDriver(FAKE_NVML_NO_UUID_PATH);
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), Code::kUnavailable);
  EXPECT_THAT(driver.status().message(), HasSubstr("nvmlDeviceGetUUID"));
  EXPECT_THAT(driver.status().message(), HasSubstr(FAKE_NVML_NO_UUID_PATH));
  EXPECT_THAT(driver.status().message(), HasSubstr("undefined symbol"));
}

TEST_F(NvmlDriverTest, EmptyPathTakesTheEnvironmentVariable) {
  const char* saved = std::getenv("GPUHERD_NVML_LIBRARY");
  std::string saved_value = saved != nullptr ? saved : "";

  setenv("GPUHERD_NVML_LIBRARY", FAKE_NVML_PATH, 1);
  auto driver = OpenNvmlDriver();
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  auto fleet = (*driver)->Discover();
  ASSERT_TRUE(fleet.ok());
  EXPECT_EQ(fleet->gpus.size(), 2u);

  setenv("GPUHERD_NVML_LIBRARY", "/nowhere/libnvml-elsewhere.so", 1);
  auto missing = OpenNvmlDriver("");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nowhere/libnvml-elsewhere.so"));

  if (saved != nullptr) {
    setenv("GPUHERD_NVML_LIBRARY", saved_value.c_str(), 1);
  } else {
    unsetenv("GPUHERD_NVML_LIBRARY");
  }
}

TEST_F(NvmlDriverTest, InitFailureIsUnavailableWithNvmlText) {
  json script = Script(1);
  script["init_error"] = 9;  // NVML_ERROR_DRIVER_NOT_LOADED
  fake_.SetScript(script);
  auto driver = OpenNvmlDriver(FAKE_NVML_PATH);
  ASSERT_FALSE(driver.ok());
  EXPECT_EQ(driver.status().code(), Code::kUnavailable);
  EXPECT_THAT(driver.status().message(), HasSubstr("Driver Not Loaded"));
}

TEST_F(NvmlDriverTest, ShutsNvmlDownWhenDestroyed) {
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(fake_.InitCount(), 1);
  EXPECT_EQ(driver->name(), "nvml");
  EXPECT_FALSE(driver->simulated());
  driver.reset();
  EXPECT_EQ(fake_.InitCount(), 0);
}

TEST_F(NvmlDriverTest, DiscoverFillsEveryGpuInfoField) {
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
  EXPECT_EQ(fleet->driver_name, "nvml");
  EXPECT_FALSE(fleet->simulated);
  ASSERT_EQ(fleet->gpus.size(), 2u);
  const GpuInfo& gpu = fleet->gpus[1];
  EXPECT_EQ(gpu.index, 1);
  EXPECT_EQ(gpu.uuid, "GPU-00000001");
  EXPECT_EQ(gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.serial, "1654321000001");
  EXPECT_EQ(gpu.pci_bus_id, "00000000:18:00.0");
  EXPECT_EQ(gpu.memory_total_bytes, 80 * kGiB);
  EXPECT_EQ(gpu.driver_version, "550.54.15");
  EXPECT_EQ(gpu.cuda_version, "12.4");
  EXPECT_EQ(gpu.cc_major, 9);
  EXPECT_EQ(gpu.cc_minor, 0);
  EXPECT_EQ(gpu.max_pcie_gen, 5);
  EXPECT_EQ(gpu.max_pcie_width, 16);
  EXPECT_EQ(gpu.numa_node, 1);
  EXPECT_EQ(gpu.cpu_affinity, "0-15,32-47,64");
  EXPECT_EQ(gpu.power_limit_default_w, 700.0);
  EXPECT_EQ(gpu.temp_slowdown_c, 87.0);
  EXPECT_EQ(gpu.temp_shutdown_c, 92.0);
  EXPECT_EQ(gpu.ecc_enabled, true);
  EXPECT_FALSE(gpu.simulated);
}

TEST_F(NvmlDriverTest, SampleFillsEveryGpuSampleField) {
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());
  auto sample = driver->Sample(0, 1'700'000'000'000);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->time, 1'700'000'000'000);
  EXPECT_EQ(sample->gpu_util_pct, 75.0);
  EXPECT_EQ(sample->mem_util_pct, 30.0);
  EXPECT_EQ(sample->mem_used_bytes, 3 * kGiB);
  EXPECT_EQ(sample->mem_total_bytes, 80 * kGiB);
  EXPECT_EQ(sample->temp_c, 61.0);
  EXPECT_EQ(sample->power_w, 345.678);
  EXPECT_EQ(sample->power_limit_w, 650.0);
  EXPECT_EQ(sample->energy_mj, 123456789012ULL);
  EXPECT_EQ(sample->sm_clock_mhz, 1980);
  EXPECT_EQ(sample->mem_clock_mhz, 2619);
  EXPECT_EQ(sample->fan_pct, 40.0);
  EXPECT_EQ(sample->pcie_gen, 4);
  EXPECT_EQ(sample->pcie_width, 8);
  EXPECT_EQ(sample->pcie_tx_kbps, 1200.0);
  EXPECT_EQ(sample->pcie_rx_kbps, 3400.0);
  EXPECT_EQ(sample->pcie_replay_count, 7u);
  EXPECT_EQ(sample->ecc_sbe_volatile, 11u);
  EXPECT_EQ(sample->ecc_dbe_volatile, 2u);
  EXPECT_EQ(sample->retired_pages_sbe, 3u);
  EXPECT_EQ(sample->retired_pages_dbe, 1u);
  EXPECT_EQ(sample->retired_pages_pending, true);
  EXPECT_EQ(sample->remapped_rows_correctable, 5u);
  EXPECT_EQ(sample->remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(sample->remapped_rows_pending, true);
  EXPECT_EQ(sample->remapped_rows_failure, false);
  EXPECT_EQ(sample->throttle_reasons, throttle::kSwPowerCap | throttle::kHwThermalSlowdown);
  EXPECT_TRUE(sample->xids.empty());
  EXPECT_TRUE(sample->processes.empty());
}

TEST_F(NvmlDriverTest, UnsupportedOrForbiddenReadingsAreAbsentNotZero) {
  json script = Script(1);
  json& gpu = script["gpus"][0];
  for (const char* key : {"serial", "compute_capability", "max_pcie", "numa_node", "cpu_affinity",
                          "power_default_limit_mw", "temp_slowdown", "temp_shutdown",
                          "ecc_enabled", "temperature", "power_mw", "power_limit_mw",
                          "energy_mj", "sm_clock", "mem_clock", "fan", "pcie",
                          "pcie_throughput_kbps", "pcie_replay", "ecc_volatile",
                          "retired_pages", "retired_pending", "remapped_rows", "throttle"}) {
    gpu.erase(key);
  }
  // NO_PERMISSION for a reading that is scripted: still absent.
  gpu["errors"] = {{"nvmlDeviceGetUtilizationRates", 4}};
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok());
  const GpuInfo& info = fleet->gpus[0];
  EXPECT_EQ(info.serial, "");
  EXPECT_EQ(info.max_pcie_gen, std::nullopt);
  EXPECT_EQ(info.max_pcie_width, std::nullopt);
  EXPECT_EQ(info.numa_node, std::nullopt);
  EXPECT_EQ(info.cpu_affinity, "");
  EXPECT_EQ(info.power_limit_default_w, std::nullopt);
  EXPECT_EQ(info.temp_slowdown_c, std::nullopt);
  EXPECT_EQ(info.temp_shutdown_c, std::nullopt);
  EXPECT_EQ(info.ecc_enabled, std::nullopt);

  auto sample = driver->Sample(0, 5);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->gpu_util_pct, std::nullopt);
  EXPECT_EQ(sample->mem_util_pct, std::nullopt);
  EXPECT_EQ(sample->mem_used_bytes, 3 * kGiB);  // still scripted
  EXPECT_EQ(sample->temp_c, std::nullopt);
  EXPECT_EQ(sample->power_w, std::nullopt);
  EXPECT_EQ(sample->power_limit_w, std::nullopt);
  EXPECT_EQ(sample->energy_mj, std::nullopt);
  EXPECT_EQ(sample->sm_clock_mhz, std::nullopt);
  EXPECT_EQ(sample->mem_clock_mhz, std::nullopt);
  EXPECT_EQ(sample->fan_pct, std::nullopt);
  EXPECT_EQ(sample->pcie_gen, std::nullopt);
  EXPECT_EQ(sample->pcie_width, std::nullopt);
  EXPECT_EQ(sample->pcie_tx_kbps, std::nullopt);
  EXPECT_EQ(sample->pcie_rx_kbps, std::nullopt);
  EXPECT_EQ(sample->pcie_replay_count, std::nullopt);
  EXPECT_EQ(sample->ecc_sbe_volatile, std::nullopt);
  EXPECT_EQ(sample->ecc_dbe_volatile, std::nullopt);
  EXPECT_EQ(sample->retired_pages_sbe, std::nullopt);
  EXPECT_EQ(sample->retired_pages_dbe, std::nullopt);
  EXPECT_EQ(sample->retired_pages_pending, std::nullopt);
  EXPECT_EQ(sample->remapped_rows_correctable, std::nullopt);
  EXPECT_EQ(sample->remapped_rows_uncorrectable, std::nullopt);
  EXPECT_EQ(sample->remapped_rows_pending, std::nullopt);
  EXPECT_EQ(sample->remapped_rows_failure, std::nullopt);
  EXPECT_EQ(sample->throttle_reasons, std::nullopt);
}

TEST_F(NvmlDriverTest, LostGpuFailsItsOwnSampleWhileOthersGoOn) {
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());
  json script = Script(2);
  script["gpus"][1]["lost"] = true;
  fake_.SetScript(script);

  auto lost = driver->Sample(1, 10);
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), Code::kUnavailable);
  EXPECT_THAT(lost.status().message(), HasSubstr("GPU 1 (GPU-00000001)"));
  EXPECT_THAT(lost.status().message(), HasSubstr("GPU is lost"));
  auto healthy = driver->Sample(0, 10);
  ASSERT_TRUE(healthy.ok()) << healthy.status().ToString();
  EXPECT_EQ(healthy->temp_c, 61.0);
}

TEST_F(NvmlDriverTest, GpuLostInOneReadingFailsTheSampleAndKeepsItsXid) {
  json script = Script(2);
  script["gpus"][0]["xids"] = {79};
  script["gpus"][0]["errors"] = {{"nvmlDeviceGetTemperature", 15}};
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());
  auto sample = driver->Sample(0, 10);
  ASSERT_FALSE(sample.ok());
  EXPECT_EQ(sample.status().code(), Code::kUnavailable);
  EXPECT_THAT(sample.status().message(), HasSubstr("nvmlDeviceGetTemperature"));
  EXPECT_THAT(sample.status().message(), HasSubstr("XID 79"));
  EXPECT_TRUE(driver->Sample(1, 10).ok());
}

TEST_F(NvmlDriverTest, GpuWithoutHandleIsLeftOutAndOthersKeepTheirIndex) {
  json script = Script(2);
  script["gpus"][0]["errors"] = {{"nvmlDeviceGetHandleByIndex", 15}};
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok());
  ASSERT_EQ(fleet->gpus.size(), 1u);
  EXPECT_EQ(fleet->gpus[0].index, 1);
  EXPECT_EQ(fleet->topology, (std::vector<std::vector<Link>>{{Link::kSelf}}));
  EXPECT_TRUE(driver->Sample(1, 10).ok());
  EXPECT_EQ(driver->Sample(0, 10).status().code(), Code::kNotFound);
}

TEST_F(NvmlDriverTest, SampleBeforeDiscoverIsAPreconditionError) {
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(driver->Sample(0, 10).status().code(), Code::kFailedPrecondition);
}

TEST_F(NvmlDriverTest, XidEventsAreDeliveredOnceToTheirGpu) {
  json script = Script(2);
  script["gpus"][0]["xids"] = {13, 79};
  script["gpus"][1]["xids"] = {31};
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());

  auto first = driver->Sample(0, 1000);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_EQ(first->xids.size(), 2u);
  EXPECT_EQ(first->xids[0].xid, 13);
  EXPECT_EQ(first->xids[1].xid, 79);
  EXPECT_EQ(first->xids[1].time, 1000);
  EXPECT_EQ(first->xids[1].description, XidDescription(79));

  auto again = driver->Sample(0, 2000);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->xids.empty());

  // Drained during GPU 0's sample, kept for GPU 1's.
  auto other = driver->Sample(1, 3000);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other->xids.size(), 1u);
  EXPECT_EQ(other->xids[0].xid, 31);
  EXPECT_TRUE(driver->Sample(1, 4000)->xids.empty());
}

TEST_F(NvmlDriverTest, GpuWithoutEventSupportStillSamples) {
  json script = Script(1);
  script["gpus"][0]["no_events"] = true;
  script["gpus"][0]["xids"] = {13};
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());
  auto sample = driver->Sample(0, 10);
  ASSERT_TRUE(sample.ok());
  EXPECT_TRUE(sample->xids.empty());
  EXPECT_EQ(sample->temp_c, 61.0);
}

TEST_F(NvmlDriverTest, ProcessesOfTheV3LayoutWithNames) {
  json script = Script(1);
  script["gpus"][0]["processes"] = {
      {{"pid", getpid()}, {"used", 5 * kGiB}},
      {{"pid", 2147483000}, {"used", 1 * kGiB}},
      {{"pid", 77}, {"used", 0xFFFFFFFFFFFFFFFFULL}},  // NVML's "not available"
  };
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());
  auto sample = driver->Sample(0, 10);
  ASSERT_TRUE(sample.ok());
  ASSERT_EQ(sample->processes.size(), 3u);
  EXPECT_EQ(sample->processes[0].pid, getpid());
  EXPECT_EQ(sample->processes[0].used_memory_bytes, 5 * kGiB);
  EXPECT_EQ(sample->processes[0].name, OwnComm());
  EXPECT_FALSE(OwnComm().empty());
  EXPECT_EQ(sample->processes[1].pid, 2147483000);
  EXPECT_EQ(sample->processes[1].used_memory_bytes, 1 * kGiB);
  EXPECT_EQ(sample->processes[1].name, "");  // no such process
  EXPECT_EQ(sample->processes[2].used_memory_bytes, 0u);
}

TEST_F(NvmlDriverTest, ProcessesOfTheConfidentialComputingV3Layout) {
  FakeNvml cc(FAKE_NVML_CC_PATH);
  ASSERT_TRUE(cc.loaded());
  json script = Script(1);
  script["gpus"][0]["processes"] = {{{"pid", 101}, {"used", 1000}},
                                    {{"pid", 102}, {"used", 2000}},
                                    {{"pid", 103}, {"used", 3000}}};
  cc.SetScript(script);
  auto driver = Open(FAKE_NVML_CC_PATH);
  ASSERT_NE(driver, nullptr);
  ASSERT_TRUE(driver->Discover().ok());
  auto sample = driver->Sample(0, 10);
  ASSERT_TRUE(sample.ok());
  ASSERT_EQ(sample->processes.size(), 3u);
  EXPECT_EQ(sample->processes[2].pid, 103);
  EXPECT_EQ(sample->processes[2].used_memory_bytes, 3000u);
}

TEST_F(NvmlDriverTest, LegacyLibraryWorksThroughTheOlderEntryPoints) {
  FakeNvml legacy(FAKE_NVML_LEGACY_PATH);
  ASSERT_TRUE(legacy.loaded());
  json script = Script(2);
  script["gpus"][0]["processes"] = {{{"pid", 201}, {"used", 1111}},
                                    {{"pid", 202}, {"used", 2222}}};
  script["gpus"][0]["xids"] = {48};
  legacy.SetScript(script);
  auto driver = Open(FAKE_NVML_LEGACY_PATH);
  ASSERT_NE(driver, nullptr);
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
  ASSERT_EQ(fleet->gpus.size(), 2u);
  EXPECT_EQ(fleet->gpus[0].cuda_version, "12.4");
  EXPECT_EQ(fleet->gpus[0].pci_bus_id, "00000000:17:00.0");
  EXPECT_EQ(fleet->gpus[0].numa_node, std::nullopt);  // no nvmlDeviceGetNumaNodeId

  auto sample = driver->Sample(0, 10);
  ASSERT_TRUE(sample.ok()) << sample.status().ToString();
  EXPECT_EQ(sample->throttle_reasons, 0x44u);
  EXPECT_EQ(sample->remapped_rows_correctable, std::nullopt);  // symbol absent
  ASSERT_EQ(sample->processes.size(), 2u);
  EXPECT_EQ(sample->processes[1].pid, 202);
  EXPECT_EQ(sample->processes[1].used_memory_bytes, 2222u);
  ASSERT_EQ(sample->xids.size(), 1u);
  EXPECT_EQ(sample->xids[0].xid, 48);

  // Without nvmlDeviceGetHandleByUUID, loss shows in the readings.
  script["gpus"][1]["lost"] = true;
  legacy.SetScript(script);
  auto lost = driver->Sample(1, 20);
  ASSERT_FALSE(lost.ok());
  EXPECT_THAT(lost.status().message(), HasSubstr("GPU is lost"));
  EXPECT_TRUE(driver->Sample(0, 20).ok());
}

TEST_F(NvmlDriverTest, TopologyLevelsAndNvLinks) {
  json script = Script(4);
  // GPU 0 <-> GPU 1 by a direct NVLink (GPU 1's link to GPU 2 is down);
  // GPUs 2 and 3 on an NVSwitch.
  script["gpus"][0]["nvlinks"] = {
      {{"active", true}, {"remote", {{"domain", 0}, {"bus", 0x18}, {"device", 0}}}}};
  script["gpus"][1]["nvlinks"] = {
      {{"active", false}, {"remote", {{"domain", 0}, {"bus", 0x19}, {"device", 0}}}}};
  script["gpus"][2]["nvlinks"] = {{{"active", true}, {"type", "switch"}}};
  script["gpus"][3]["nvlinks"] = {{{"active", false}, {"type", "switch"}},
                                  {{"active", true}, {"type", "switch"}}};
  script["topology"] = {{0, 10, 50, 40}, {10, 0, 30, 20}, {50, 30, 0, 40}, {40, 20, 40, 0}};
  fake_.SetScript(script);
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok());
  const auto& t = fleet->topology;
  ASSERT_EQ(t.size(), 4u);
  EXPECT_THAT(t[0], ElementsAre(Link::kSelf, Link::kNvLink, Link::kCrossSocket, Link::kNumaNode));
  EXPECT_THAT(t[1], ElementsAre(Link::kNvLink, Link::kSelf, Link::kHostBridge, Link::kPcieSwitch));
  EXPECT_THAT(t[2], ElementsAre(Link::kCrossSocket, Link::kHostBridge, Link::kSelf, Link::kNvLink));
  EXPECT_THAT(t[3], ElementsAre(Link::kNumaNode, Link::kPcieSwitch, Link::kNvLink, Link::kSelf));
  // nvidia-smi topo -m's NV# and PXB: one direct link, one link each to the
  // switch; GPUs 1 and 3 behind several PCIe bridges (NVML MULTIPLE).
  const auto& n = fleet->nvlinks;
  ASSERT_EQ(n.size(), 4u);
  EXPECT_THAT(n[0], ElementsAre(0, 1, 0, 0));
  EXPECT_THAT(n[2], ElementsAre(0, 0, 0, 1));
  EXPECT_TRUE(fleet->pcie_multiple[1][3]);
  EXPECT_TRUE(fleet->pcie_multiple[3][1]);
  EXPECT_FALSE(fleet->pcie_multiple[0][3]);
}

TEST_F(NvmlDriverTest, TopologyUnknownWithoutNvmlAnswer) {
  auto driver = Open();  // the script has no topology: NOT_SUPPORTED
  ASSERT_NE(driver, nullptr);
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok());
  EXPECT_EQ(fleet->topology, (std::vector<std::vector<Link>>{{Link::kSelf, Link::kUnknown},
                                                             {Link::kUnknown, Link::kSelf}}));
}

TEST_F(NvmlDriverTest, RediscoverSeesAChangedFleet) {
  auto driver = Open();
  ASSERT_NE(driver, nullptr);
  ASSERT_EQ(driver->Discover()->gpus.size(), 2u);
  fake_.SetScript(Script(3));
  auto fleet = driver->Discover();
  ASSERT_TRUE(fleet.ok());
  EXPECT_EQ(fleet->gpus.size(), 3u);
  EXPECT_TRUE(driver->Sample(2, 10).ok());
}

}  // namespace
}  // namespace gpuherd::gpu::nvml
