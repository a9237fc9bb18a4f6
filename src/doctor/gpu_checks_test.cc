#include <gtest/gtest.h>

#include "doctor/host_gpus.h"
#include "doctor/test_tree.h"
#include "gpu/sim/sim_driver.h"

namespace gpuherd::doctor {
namespace {

gpu::GpuInfo Gpu(int index, const std::string& bus, bool ecc_supported = true) {
  gpu::GpuInfo info;
  info.index = index;
  info.uuid = "GPU-test-" + std::to_string(index);
  info.name = "NVIDIA H100 80GB HBM3";
  info.pci_bus_id = bus;
  info.driver_version = "550.54.15";
  info.max_pcie_gen = 5;
  info.max_pcie_width = 16;
  if (ecc_supported) info.ecc_enabled = true;
  return info;
}

TEST(HostGpusTest, ReadsDriverAndSysfsFacts) {
  TestTree tree("untuned");
  const std::vector<HostGpu> gpus = ReadHostGpus(tree.host());
  ASSERT_EQ(gpus.size(), 4u) << "the audio function and the Intel bridge are not GPUs";
  EXPECT_EQ(gpus[0].pci_bus_id, "0000:17:00.0");
  EXPECT_EQ(gpus[0].model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpus[0].uuid, "GPU-7e2a9b10-3c4d-4e5f-9a0b-000000000000");
  EXPECT_EQ(gpus[0].minor, 0);
  EXPECT_EQ(gpus[0].link_gen, 1);
  EXPECT_EQ(gpus[0].max_link_gen, 5);
  EXPECT_EQ(gpus[2].numa_node, 1);
  EXPECT_EQ(gpus[2].cpu_list, "4-7,12-15");
  EXPECT_EQ(gpus[2].link_width, 8);
  EXPECT_EQ(KernelModuleVersion(tree.host()), "550.54.15");
  EXPECT_EQ(NormalizeBusId("00000000:B1:00.0"), "0000:b1:00.0");
  EXPECT_EQ(NormalizeBusId("0000:17:00.0"), "0000:17:00.0");
}

TEST(GpuChecksTest, TunedMachineFromSysfs) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "gpu.driver_version").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "gpu.persistence").severity, Severity::kOk);
  for (const char* bus : {"0000:17:00.0", "0000:31:00.0", "0000:b1:00.0", "0000:ca:00.0"}) {
    const Check& link = FindCheck(report, std::string("gpu.pcie_link.") + bus);
    EXPECT_EQ(link.severity, Severity::kOk) << bus << ": " << link.current;
    EXPECT_EQ(link.recommended, "gen5 x16 under load");
  }
  const Check& numa = FindCheck(report, "gpu.numa_nic");
  EXPECT_EQ(numa.severity, Severity::kOk) << numa.current;
  EXPECT_EQ(numa.current, "GPUs on node 0,1; RDMA NICs: mlx5_0 on node 0; mlx5_1 on node 1");
}

TEST(GpuChecksTest, UntunedMachineFromSysfs) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "gpu.persistence").severity, Severity::kWarning);
  EXPECT_EQ(FindCheck(report, "gpu.persistence").fix[0], "systemctl enable --now nvidia-persistenced");
  // Idle links lower their generation: that is reported, not blamed.
  const Check& idle = FindCheck(report, "gpu.pcie_link.0000:17:00.0");
  EXPECT_EQ(idle.severity, Severity::kInfo);
  EXPECT_NE(idle.current.find("checked at idle"), std::string::npos);
  const Check& narrow = FindCheck(report, "gpu.pcie_link.0000:b1:00.0");
  EXPECT_EQ(narrow.severity, Severity::kCritical);
  EXPECT_EQ(narrow.current, "gen5 x8 at idle");
  EXPECT_NE(narrow.why.find("15.75 GB/s"), std::string::npos);
  const Check& numa = FindCheck(report, "gpu.numa_nic");
  EXPECT_EQ(numa.severity, Severity::kWarning);
  EXPECT_NE(numa.fix[0].find("NUMA node 1"), std::string::npos);
}

TEST(GpuChecksTest, LinkUnderLoadDecides) {
  TestTree tree("untuned");
  DoctorInput input;
  input.host = &tree.host();
  input.gpus = {Gpu(0, "00000000:17:00.0"), Gpu(1, "00000000:31:00.0"), Gpu(2, "00000000:B1:00.0")};
  input.pcie_under_load = {{"GPU-test-0", {5, 16}}, {"GPU-test-1", {4, 16}}, {"GPU-test-2", {5, 8}}};
  const Report report = RunDoctor(input);
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.0").severity, Severity::kOk) << "idle gen1, full under load";
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.0").current, "gen5 x16 under load");
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.1").severity, Severity::kWarning);
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.2").severity, Severity::kCritical);
}

TEST(GpuChecksTest, DriverVersionsMustAgree) {
  TestTree tree("tuned");
  std::vector<gpu::GpuInfo> gpus = {Gpu(0, "0000:17:00.0")};
  EXPECT_EQ(FindCheck(tree.Run({}, gpus), "gpu.driver_version").severity, Severity::kOk);
  gpus[0].driver_version = "535.161.08";  // libraries upgraded, old module still loaded
  const Check& check = FindCheck(tree.Run({}, gpus), "gpu.driver_version");
  EXPECT_EQ(check.severity, Severity::kCritical);
  EXPECT_EQ(check.current, "535.161.08, 550.54.15 (kernel module 550.54.15)");
}

TEST(GpuChecksTest, EccOnlyWhereTheCardHasIt) {
  TestTree tree("tuned");
  std::vector<gpu::GpuInfo> gpus = {Gpu(0, "0000:17:00.0"), Gpu(1, "0000:31:00.0"),
                                    Gpu(2, "0000:b1:00.0", /*ecc_supported=*/false)};
  gpus[1].ecc_enabled = false;
  const Report report = tree.Run({}, gpus);
  EXPECT_EQ(FindCheck(report, "gpu.ecc.0").severity, Severity::kOk);
  const Check& off = FindCheck(report, "gpu.ecc.1");
  EXPECT_EQ(off.severity, Severity::kWarning);
  EXPECT_EQ(off.fix[0], "nvidia-smi -i 1 -e 1");
  EXPECT_FALSE(HasCheck(report, "gpu.ecc.2")) << "a GeForce card has no ECC to turn on";
}

TEST(GpuChecksTest, NoGpusOrNoDriver) {
  TestTree empty;
  const Report none = empty.Run();
  EXPECT_EQ(FindCheck(none, "gpu.present").severity, Severity::kInfo);
  EXPECT_FALSE(HasCheck(none, "gpu.persistence"));

  TestTree tree("tuned");
  tree.Remove("/proc/driver/nvidia");
  const Check& driver = FindCheck(tree.Run(), "gpu.driver");
  EXPECT_EQ(driver.severity, Severity::kCritical);
  EXPECT_EQ(driver.current, "4 NVIDIA GPUs on the PCI bus, kernel module not loaded");
}

TEST(GpuChecksTest, SimulatedFleetUsesTheLinkItReads) {
  TestTree tree;  // no sysfs: every fact comes from the driver
  gpu::sim::SimOptions options;
  options.count = 2;
  auto driver = gpu::sim::OpenSimDriver(options);
  ASSERT_TRUE(driver.ok()) << driver.status().ToString();
  auto fleet = (*driver)->Discover();
  ASSERT_TRUE(fleet.ok());
  DoctorInput input;
  input.host = &tree.host();
  input.gpus = fleet->gpus;
  input.pcie_now[fleet->gpus[0].uuid] = {*fleet->gpus[0].max_pcie_gen, *fleet->gpus[0].max_pcie_width};
  const Report report = RunDoctor(input);
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.0").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.1").severity, Severity::kInfo);
  EXPECT_EQ(FindCheck(report, "gpu.pcie_link.1").current, "not readable");
  EXPECT_EQ(FindCheck(report, "gpu.numa_nic").severity, Severity::kInfo) << "no NIC in an empty tree";
}

}  // namespace
}  // namespace gpuherd::doctor
