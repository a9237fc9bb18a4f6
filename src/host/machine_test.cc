#include "host/machine.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace gpuherd::host {
namespace {

namespace fs = std::filesystem;

class MachineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpuherd_machine_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc");
    fs::create_directories(root_ / "sys/devices/system/cpu");
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) { std::ofstream(root_ / path) << text; }
  fs::path root_;
};

TEST_F(MachineTest, CountsOnlineCpusAndInstalledMemory) {
  Write("sys/devices/system/cpu/online", "0-31,64-95\n");
  Write("proc/meminfo", "MemTotal:       263921516 kB\nMemFree:        1000 kB\n");
  auto size = ReadMachineSize(*NewHost(root_.string()));
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(size->cpus, 64);
  EXPECT_EQ(size->mem_bytes, uint64_t{263921516} * 1024);
}

TEST_F(MachineTest, ABrokenFileIsAnErrorThatNamesIt) {
  Write("sys/devices/system/cpu/online", "0-\n");
  Write("proc/meminfo", "MemTotal:       1 kB\n");
  auto size = ReadMachineSize(*NewHost(root_.string()));
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("cpu/online"), std::string::npos);
  Write("sys/devices/system/cpu/online", "0-3\n");
  Write("proc/meminfo", "SwapTotal:      1 kB\n");
  size = ReadMachineSize(*NewHost(root_.string()));
  ASSERT_FALSE(size.ok());
  EXPECT_NE(size.status().message().find("MemTotal"), std::string::npos);
}

TEST_F(MachineTest, ReadsThisMachine) {
  auto size = ReadMachineSize(*NewHost("/"));
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_GE(size->cpus, 1);
  EXPECT_GT(size->mem_bytes, uint64_t{64} << 20);
}

}  // namespace
}  // namespace gpuherd::host
