// The reset before a requalification burn-in against the fake libnvidia-ml
// (loaded through the real dlopen path) and the simulated fleet: nvidia-smi
// --gpu-reset is asked for only for a real, answering GPU with no process on
// it. The command runner is a recorder: nothing here resets anything.
#include "burnin/gpu_reset.h"

#include <dlfcn.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpu/nvml/nvml_driver.h"
#include "gpu/sim/sim_driver.h"

namespace gpuherd::burnin {
namespace {

using nlohmann::json;

class RecordingRunner : public exec::CommandRunner {
 public:
  Result<exec::CommandResult> Run(const exec::CommandRequest& request) override {
    calls.push_back(request.argv);
    return result;
  }
  std::vector<std::vector<std::string>> calls;
  exec::CommandResult result;
};

json Gpu(int index, json processes, bool lost = false) {
  return {{"uuid", "GPU-0000000" + std::to_string(index)},
          {"name", "NVIDIA H100 80GB HBM3"},
          {"pci", {{"domain", 0}, {"bus", 0x17 + index}, {"device", 0}}},
          {"memory", {{"total", 80ULL << 30}, {"used", 1ULL << 30}}},
          {"compute_capability", {9, 0}},
          {"temperature", 40},
          {"utilization", {0, 0}},
          {"processes", std::move(processes)},
          {"lost", lost}};
}

class GpuResetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    set_ = reinterpret_cast<int (*)(const char*)>(dlsym(handle_, "FakeNvmlSetScript"));
    ASSERT_NE(set_, nullptr);
    SetScript(false);
    auto driver = gpu::nvml::OpenNvmlDriver(FAKE_NVML_PATH);
    ASSERT_TRUE(driver.ok()) << driver.status().ToString();
    driver_ = std::move(driver).value();
    auto fleet = driver_->Discover();
    ASSERT_TRUE(fleet.ok()) << fleet.status().ToString();
    fleet_ = *fleet;
  }
  // GPU 0 has a process on it, GPU 1 is idle, GPU 2 falls off the bus once found.
  void SetScript(bool gpu2_lost) {
    json script = {{"driver_version", "550.54.15"},
                   {"cuda_version", 12040},
                   {"gpus", {Gpu(0, json::array({{{"pid", 4242}, {"used", 1ULL << 30}}})), Gpu(1, json::array()),
                             Gpu(2, json::array(), gpu2_lost)}}};
    ASSERT_EQ(set_(script.dump().c_str()), 0);
  }
  void TearDown() override {
    driver_.reset();
    if (handle_) dlclose(handle_);
  }
  const gpu::GpuInfo& Info(const std::string& uuid) const {
    for (const gpu::GpuInfo& g : fleet_.gpus) {
      if (g.uuid == uuid) return g;
    }
    ADD_FAILURE() << uuid << " is not in the fleet";
    return fleet_.gpus.at(0);
  }

  void* handle_ = nullptr;
  int (*set_)(const char*) = nullptr;
  std::unique_ptr<gpu::Driver> driver_;
  gpu::Fleet fleet_;
  RecordingRunner runner_;
};

TEST_F(GpuResetTest, AGpuWithAProcessOnItIsNeverReset) {
  Check c = ResetBeforeBurnIn(*driver_, Info("GPU-00000000"), 1000, runner_);
  EXPECT_EQ(c.name, "gpu_reset");
  EXPECT_EQ(c.outcome, CheckOutcome::kSkipped);
  EXPECT_EQ(c.reason, "processes_on_gpu");
  EXPECT_EQ(c.message, "not reset: 1 process(es) use the GPU");
  EXPECT_TRUE(runner_.calls.empty());
}

TEST_F(GpuResetTest, AnIdleGpuIsResetByItsPciAddress) {
  const gpu::GpuInfo& idle = Info("GPU-00000001");
  ASSERT_FALSE(idle.pci_bus_id.empty());
  Check c = ResetBeforeBurnIn(*driver_, idle, 1000, runner_);
  EXPECT_EQ(c.outcome, CheckOutcome::kPass) << c.message;
  ASSERT_EQ(runner_.calls.size(), 1u);
  EXPECT_EQ(runner_.calls[0], (std::vector<std::string>{"nvidia-smi", "--gpu-reset", "-i", idle.pci_bus_id}));
}

TEST_F(GpuResetTest, AFailedResetIsAWarningWithNvidiaSmisWords) {
  runner_.result = {1, "", "Unable to reset GPU: In use by another client\x1b[2J"};
  Check c = ResetBeforeBurnIn(*driver_, Info("GPU-00000001"), 1000, runner_);
  EXPECT_EQ(c.outcome, CheckOutcome::kWarn);
  EXPECT_EQ(c.reason, "reset_failed");
  EXPECT_NE(c.message.find("exit 1: Unable to reset GPU: In use by another client"), std::string::npos) << c.message;
  EXPECT_EQ(c.message.find('\x1b'), std::string::npos);
}

TEST_F(GpuResetTest, AGpuThatDoesNotAnswerIsNotReset) {
  SetScript(true);
  Check c = ResetBeforeBurnIn(*driver_, Info("GPU-00000002"), 1000, runner_);
  EXPECT_EQ(c.outcome, CheckOutcome::kSkipped);
  EXPECT_EQ(c.reason, "gpu_not_answering");
  EXPECT_TRUE(runner_.calls.empty());
}

TEST(GpuResetSimTest, ASimulatedCardIsNeverReset) {
  gpu::sim::SimOptions options;
  options.count = 1;
  auto driver = gpu::sim::OpenSimDriver(options);
  ASSERT_TRUE(driver.ok());
  auto fleet = (*driver)->Discover();
  ASSERT_TRUE(fleet.ok());
  RecordingRunner runner;
  Check c = ResetBeforeBurnIn(**driver, fleet->gpus[0], 1000, runner);
  EXPECT_EQ(c.outcome, CheckOutcome::kSkipped);
  EXPECT_EQ(c.reason, "simulated");
  EXPECT_TRUE(runner.calls.empty());
}

}  // namespace
}  // namespace gpuherd::burnin
