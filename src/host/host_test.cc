#include "host/host.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpuherd::host {
namespace {

namespace fs = std::filesystem;

class HostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpuherd_host_test_" + std::to_string(getpid()));
    fs::create_directories(root_ / "proc/sys/vm");
    fs::create_directories(root_ / "etc");
    std::ofstream(root_ / "proc/sys/vm/swappiness") << "60\n";
    std::ofstream(root_ / "etc/hostname") << "gpu-node-7\n";
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(HostTest, ReadsUnderRoot) {
  auto host = NewHost(root_.string());
  auto v = ReadTrimmed(*host, "/proc/sys/vm/swappiness");
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "60");
  EXPECT_EQ(host->Hostname(), "gpu-node-7");
  EXPECT_TRUE(host->Exists("/etc/hostname"));
  EXPECT_FALSE(host->Exists("/etc/passwd"));
}

TEST_F(HostTest, MissingFileIsAnErrorThatNamesThePath) {
  auto host = NewHost(root_.string());
  auto v = host->ReadFile("/proc/cpuinfo");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("proc/cpuinfo"), std::string::npos);
}

TEST_F(HostTest, ReadsProcessSessionDespiteOddCommandNames) {
  fs::create_directories(root_ / "proc/4242");
  std::ofstream(root_ / "proc/4242/stat") << "4242 (my (odd) job) S 4200 4242 4100 0 -1 4194560 100\n";
  fs::create_directories(root_ / "proc/77");
  std::ofstream(root_ / "proc/77/stat") << "77 (truncated";
  auto host = NewHost(root_.string());
  EXPECT_EQ(ProcessSession(*host, 4242), 4100);
  EXPECT_EQ(ProcessSession(*host, 77), std::nullopt);
  EXPECT_EQ(ProcessSession(*host, 1), std::nullopt);
}

TEST_F(HostTest, ListsSorted) {
  auto host = NewHost(root_.string());
  auto names = host->ListDir("/");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"etc", "proc"}));
}

}  // namespace
}  // namespace gpuherd::host
