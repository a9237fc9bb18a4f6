#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

TEST(LimitsChecksTest, TunedMachine) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  const Check& memlock = FindCheck(report, "limits.memlock");
  EXPECT_EQ(memlock.severity, Severity::kOk) << memlock.current;
  EXPECT_EQ(memlock.current,
            "configured: soft unlimited, hard unlimited (/etc/security/limits.d/90-gpuherd.conf); "
            "this process: unlimited");
  EXPECT_EQ(FindCheck(report, "limits.nofile").severity, Severity::kOk);
}

TEST(LimitsChecksTest, UntunedMachineWithRdmaIsCritical) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  const Check& memlock = FindCheck(report, "limits.memlock");
  EXPECT_EQ(memlock.severity, Severity::kCritical);
  EXPECT_EQ(memlock.current, "configured: soft not set, hard not set; this process: 8 MiB");
  EXPECT_NE(memlock.fix[0].find("* soft memlock unlimited"), std::string::npos);
  EXPECT_NE(memlock.fix[0].find("/etc/security/limits.d/90-gpuherd.conf"), std::string::npos);
  const Check& nofile = FindCheck(report, "limits.nofile");
  EXPECT_EQ(nofile.severity, Severity::kWarning);
  EXPECT_NE(nofile.current.find("this process: 1024"), std::string::npos);
}

TEST(LimitsChecksTest, WithoutRdmaLowMemlockIsAWarning) {
  TestTree tree("untuned");
  tree.Remove("/sys/class/infiniband");
  EXPECT_EQ(FindCheck(tree.Run(), "limits.memlock").severity, Severity::kWarning);
}

TEST(LimitsChecksTest, LaterFilesOverrideEarlierOnesAndDashSetsBoth) {
  TestTree tree("untuned");
  tree.Write("/etc/security/limits.conf", "*  -  memlock  unlimited\n*  soft  nofile  4096");
  tree.Write("/etc/security/limits.d/50-site.conf", "* soft memlock 65536   # a later, lower limit\n"
                                                    "@gpu - nofile 1048576");
  const Report report = tree.Run();
  const Check& memlock = FindCheck(report, "limits.memlock");
  EXPECT_EQ(memlock.severity, Severity::kCritical);
  EXPECT_NE(memlock.current.find("soft 64 MiB, hard unlimited"), std::string::npos) << memlock.current;
  // Group lines do not count for every user; 4096 is too low.
  EXPECT_EQ(FindCheck(report, "limits.nofile").severity, Severity::kWarning);
  tree.Write("/etc/security/limits.d/60-gpu.conf", "* soft nofile 65536\n* soft memlock unlimited");
  const Report fixed = tree.Run();
  EXPECT_EQ(FindCheck(fixed, "limits.nofile").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(fixed, "limits.memlock").severity, Severity::kOk);
}

}  // namespace
}  // namespace gpuherd::doctor
