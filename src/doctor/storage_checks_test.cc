#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

TEST(StorageChecksTest, TunedMachine) {
  TestTree tree("tuned");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "storage.scheduler.nvme0n1").severity, Severity::kOk);
  EXPECT_EQ(FindCheck(report, "storage.scheduler.nvme1n1").current, "none");
  EXPECT_FALSE(HasCheck(report, "storage.scheduler.sda")) << "only NVMe drives are judged";
  const Check& data = FindCheck(report, "storage.noatime./data");
  EXPECT_EQ(data.severity, Severity::kOk);
  EXPECT_EQ(data.current, "noatime");
  EXPECT_FALSE(HasCheck(report, "storage.noatime./")) << "the root file system is not a data mount";
  EXPECT_FALSE(HasCheck(report, "storage.noatime./boot/efi"));
}

TEST(StorageChecksTest, UntunedMachine) {
  TestTree tree("untuned");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "storage.scheduler.nvme0n1").severity, Severity::kOk);
  const Check& sched = FindCheck(report, "storage.scheduler.nvme1n1");
  EXPECT_EQ(sched.severity, Severity::kWarning);
  EXPECT_EQ(sched.current, "mq-deadline");
  EXPECT_EQ(sched.fix[0], "echo none > /sys/block/nvme1n1/queue/scheduler");
  EXPECT_NE(sched.fix[1].find("ATTR{queue/scheduler}=\"none\""), std::string::npos);
  const Check& data = FindCheck(report, "storage.noatime./data");
  EXPECT_EQ(data.severity, Severity::kWarning);
  EXPECT_EQ(data.current, "relatime");
  EXPECT_EQ(data.fix[0], "mount -o remount,noatime /data");
  EXPECT_EQ(FindCheck(report, "storage.noatime./scratch").severity, Severity::kOk);
}

TEST(StorageChecksTest, NothingToJudge) {
  TestTree tree;
  tree.Write("/proc/mounts", "proc /proc proc rw 0 0\n/dev/sda1 / ext4 rw,relatime 0 0");
  const Report report = tree.Run();
  EXPECT_EQ(FindCheck(report, "storage").current, "none found");
}

}  // namespace
}  // namespace gpuherd::doctor
