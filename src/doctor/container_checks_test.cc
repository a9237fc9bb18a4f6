#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

constexpr char kId[] = "containers.nvidia_runtime";

TEST(ContainerChecksTest, TunedHasTheRuntime) {
  TestTree tree("tuned");
  const Check& check = FindCheck(tree.Run(), kId);
  EXPECT_EQ(check.severity, Severity::kOk);
  EXPECT_EQ(check.current, "configured");
}

TEST(ContainerChecksTest, UntunedLacksRuntimeAndToolkit) {
  TestTree tree("untuned");
  const Check& check = FindCheck(tree.Run(), kId);
  EXPECT_EQ(check.severity, Severity::kWarning);
  EXPECT_NE(check.current.find("NVIDIA Container Toolkit not installed"), std::string::npos);
  ASSERT_EQ(check.fix.size(), 3u);
  EXPECT_EQ(check.fix[1], "nvidia-ctk runtime configure --runtime=docker");
}

TEST(ContainerChecksTest, ToolkitWithoutConfigurationOrDaemonJson) {
  TestTree tree("untuned");
  tree.Write("/usr/bin/nvidia-ctk", "");
  tree.Remove("/etc/docker/daemon.json");
  const Check& check = FindCheck(tree.Run(), kId);
  EXPECT_EQ(check.severity, Severity::kWarning);
  EXPECT_EQ(check.current, "Docker installed, no /etc/docker/daemon.json");
  EXPECT_EQ(check.fix.size(), 2u);
}

TEST(ContainerChecksTest, BrokenDaemonJsonIsCritical) {
  TestTree tree("tuned");
  tree.Write("/etc/docker/daemon.json", "{ \"runtimes\": { \"nvidia\": ");
  EXPECT_EQ(FindCheck(tree.Run(), kId).severity, Severity::kCritical);
}

TEST(ContainerChecksTest, NoDockerNothingToDo) {
  TestTree tree("untuned");
  tree.Remove("/usr/bin/dockerd");
  tree.Remove("/etc/docker");
  const Check& check = FindCheck(tree.Run(), kId);
  EXPECT_EQ(check.severity, Severity::kOk);
  EXPECT_EQ(check.current, "Docker not installed");
}

}  // namespace
}  // namespace gpuherd::doctor
