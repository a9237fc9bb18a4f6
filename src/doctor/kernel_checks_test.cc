#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

const char* const kKernelIds[] = {
    "kernel.vm.swappiness",     "kernel.vm.dirty_ratio",        "kernel.vm.dirty_background_ratio",
    "kernel.net.core.rmem_max", "kernel.net.core.wmem_max",     "kernel.net.ipv4.tcp_rmem",
    "kernel.net.ipv4.tcp_wmem", "kernel.numa_balancing",        "kernel.transparent_hugepage",
    "kernel.cpu_governor"};

TEST(KernelChecksTest, TunedMachinePassesEveryKernelCheck) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  for (const char* id : kKernelIds) {
    const Check& check = FindCheck(report, id);
    EXPECT_EQ(check.severity, Severity::kOk) << id << ": " << check.current;
    EXPECT_TRUE(check.fix.empty()) << id;
    EXPECT_FALSE(check.why.empty()) << id;
  }
  EXPECT_EQ(FindCheck(report, "kernel.net.ipv4.tcp_rmem").current, "4096 87380 16777216");
  EXPECT_EQ(FindCheck(report, "kernel.transparent_hugepage").current, "madvise");
}

TEST(KernelChecksTest, UntunedMachineWarnsOnEveryKernelCheck) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  for (const char* id : kKernelIds) {
    EXPECT_EQ(FindCheck(report, id).severity, Severity::kWarning) << id;
    EXPECT_FALSE(FindCheck(report, id).fix.empty()) << id;
  }
  const Check& swappiness = FindCheck(report, "kernel.vm.swappiness");
  EXPECT_EQ(swappiness.current, "60");
  EXPECT_NE(swappiness.why.find("40%"), std::string::npos) << "cites the utilization swing";
  ASSERT_EQ(swappiness.fix.size(), 2u);
  EXPECT_EQ(swappiness.fix[0], "sysctl -w vm.swappiness=1");
  EXPECT_NE(swappiness.fix[1].find("'vm.swappiness = 1' >> /etc/sysctl.d/90-gpuherd.conf"), std::string::npos);
  EXPECT_EQ(FindCheck(report, "kernel.net.ipv4.tcp_rmem").fix[0],
            "sysctl -w 'net.ipv4.tcp_rmem=4096 87380 16777216'");
  EXPECT_EQ(FindCheck(report, "kernel.transparent_hugepage").current, "always");
  EXPECT_EQ(FindCheck(report, "kernel.cpu_governor").current, "powersave (16 CPUs)");
  EXPECT_NE(FindCheck(report, "kernel.numa_balancing").why.find("60%"), std::string::npos);
}

TEST(KernelChecksTest, ThresholdsAreInclusive) {
  TestTree tree("untuned");
  tree.Write("/proc/sys/vm/swappiness", "10");
  tree.Write("/proc/sys/vm/dirty_ratio", "0");  // vm.dirty_bytes in use instead
  tree.Write("/proc/sys/net/core/rmem_max", "16777216");
  tree.Write("/proc/sys/net/core/wmem_max", "16777215");
  tree.Write("/proc/sys/net/ipv4/tcp_rmem", "4096 87380 33554432");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "kernel.vm.swappiness").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "kernel.vm.dirty_ratio").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "kernel.net.core.rmem_max").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "kernel.net.core.wmem_max").severity, Severity::kWarning);
  EXPECT_EQ(FindCheck(report, "kernel.net.ipv4.tcp_rmem").severity, Severity::kOk);
}

TEST(KernelChecksTest, UnreadableOrMalformedValues) {
  TestTree tree("tuned");
  tree.Remove("/proc/sys/vm/swappiness");
  tree.Write("/proc/sys/vm/dirty_ratio", "ten");
  tree.Remove("/sys/kernel/mm/transparent_hugepage");
  const Report report = tree.Run();
  const Check& swappiness = FindCheck(report, "kernel.vm.swappiness");
  EXPECT_EQ(swappiness.severity, Severity::kInfo);
  EXPECT_NE(swappiness.current.find("/proc/sys/vm/swappiness"), std::string::npos);
  EXPECT_EQ(FindCheck(report, "kernel.vm.dirty_ratio").severity, Severity::kWarning);
  EXPECT_EQ(FindCheck(report, "kernel.transparent_hugepage").severity, Severity::kInfo);
}

TEST(KernelChecksTest, GovernorMixedOrAbsent) {
  TestTree tree("tuned");
  tree.Write("/sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "schedutil");
  Report report = tree.Run();
  const Check& mixed = FindCheck(report, "kernel.cpu_governor");
  EXPECT_EQ(mixed.severity, Severity::kWarning);
  EXPECT_EQ(mixed.current, "performance (15 CPUs), schedutil (1 CPUs)");

  TestTree vm("tuned");
  for (int cpu = 0; cpu < 16; ++cpu) vm.Remove("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cpufreq");
  EXPECT_EQ(FindCheck(vm.Run(), "kernel.cpu_governor").severity, Severity::kInfo);
}

TEST(KernelChecksTest, TransparentHugePagesNeverIsFine) {
  TestTree tree("untuned");
  tree.Write("/sys/kernel/mm/transparent_hugepage/enabled", "always madvise [never]");
  EXPECT_EQ(FindCheck(tree.Run(), "kernel.transparent_hugepage").severity, Severity::kOk);
}

}  // namespace
}  // namespace gpuherd::doctor
