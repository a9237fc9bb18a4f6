#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

TEST(CmdlineChecksTest, TunedCommandLine) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "cmdline.pcie_aspm").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "cmdline.pcie_aspm").current, "pcie_aspm=off");
  EXPECT_EQ(FindCheck(report, "cmdline.iommu").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "cmdline.iommu").current, "iommu=pt");
}

TEST(CmdlineChecksTest, UntunedCommandLine) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  const Check& aspm = FindCheck(report, "cmdline.pcie_aspm");
  EXPECT_EQ(aspm.severity, Severity::kWarning);
  EXPECT_EQ(aspm.current, "not set (policy default)");
  ASSERT_FALSE(aspm.fix.empty());
  EXPECT_NE(aspm.fix[0].find("pcie_aspm=off"), std::string::npos);
  EXPECT_NE(aspm.fix[0].find("/etc/default/grub"), std::string::npos);
  const Check& iommu = FindCheck(report, "cmdline.iommu");
  EXPECT_EQ(iommu.severity, Severity::kWarning);
  EXPECT_EQ(iommu.current, "intel_iommu=on");
  EXPECT_NE(iommu.fix[0].find("iommu=pt"), std::string::npos);
}

TEST(CmdlineChecksTest, IommuModes) {
  struct Case {
    const char* cmdline;
    bool groups;
    Severity expected;
  };
  const Case cases[] = {
      {"ro quiet", false, Severity::kOk},                      // no IOMMU at all
      {"ro quiet", true, Severity::kWarning},                  // on by default, translating
      {"ro intel_iommu=on iommu=pt", true, Severity::kOk},
      {"ro amd_iommu=off", true, Severity::kOk},
      {"ro amd_iommu=on", false, Severity::kWarning},
  };
  for (const Case& c : cases) {
    TestTree tree("tuned");
    tree.Write("/proc/cmdline", c.cmdline);
    if (!c.groups) tree.Remove("/sys/kernel/iommu_groups");
    EXPECT_EQ(FindCheck(tree.Run(), "cmdline.iommu").severity, c.expected) << c.cmdline << " groups=" << c.groups;
  }
}

TEST(CmdlineChecksTest, AspmPerformancePolicyOrLastValueWins) {
  TestTree tree("untuned");
  tree.Write("/sys/module/pcie_aspm/parameters/policy", "default [performance] powersave powersupersave");
  EXPECT_EQ(FindCheck(tree.Run(), "cmdline.pcie_aspm").severity, Severity::kOk);
  tree.Write("/sys/module/pcie_aspm/parameters/policy", "[default] performance");
  tree.Write("/proc/cmdline", "pcie_aspm=off pcie_aspm=force");
  EXPECT_EQ(FindCheck(tree.Run(), "cmdline.pcie_aspm").severity, Severity::kWarning);
}

TEST(CmdlineChecksTest, UnreadableCommandLineIsInfo) {
  TestTree tree("tuned");
  tree.Remove("/proc/cmdline");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "cmdline").severity, Severity::kInfo);
  EXPECT_FALSE(HasCheck(report, "cmdline.pcie_aspm"));
}

}  // namespace
}  // namespace gpuherd::doctor
