#include "daemon/queue/job_processes.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace gpuherd::daemon::queue {
namespace {

namespace fs = std::filesystem;

// A fixture /proc: pid → session.
class JobProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpuherd_job_processes_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    // The shim (100) leads its session; 101 is the job's; 102 is a neighbour's.
    Stat(100, 100);
    Stat(101, 100);
    Stat(102, 500);
    host_ = host::NewHost(root_.string());
  }
  void TearDown() override { fs::remove_all(root_); }
  void Stat(int pid, int session) {
    fs::create_directories(root_ / "proc" / std::to_string(pid));
    std::ofstream(root_ / "proc" / std::to_string(pid) / "stat")
        << pid << " (python3 x) S 1 " << pid << " " << session << " 0 -1 4194560\n";
  }
  static gpu::GpuSample Sample() {
    gpu::GpuSample s;
    s.processes = {{100, 1, "shim"}, {101, 10, "python3"}, {102, 100, "neighbour"}, {103, 1000, "gone"}};
    return s;
  }

  fs::path root_;
  std::unique_ptr<host::Host> host_;
};

TEST_F(JobProcessesTest, TheShimsSessionIsTheJobs) {
  EXPECT_EQ(JobGpuMemory(Sample(), *host_, 100, std::nullopt), std::optional<uint64_t>(11));
}

TEST_F(JobProcessesTest, TheControlGroupAddsProcessesThatLeftTheSession) {
  // 103 has no /proc entry here (it called setsid and the fixture lacks it):
  // its control group still names it.
  EXPECT_EQ(JobGpuMemory(Sample(), *host_, 100, std::vector<int>{101, 103}), std::optional<uint64_t>(1011));
}

TEST_F(JobProcessesTest, NoneOfTheJobsProcessesOnTheGpuIsNoReading) {
  EXPECT_EQ(JobGpuMemory(Sample(), *host_, 7, std::nullopt), std::nullopt);
  EXPECT_EQ(JobGpuMemory(Sample(), *host_, 0, std::vector<int>{}), std::nullopt);
  // Another shim's session counts for its own job only.
  EXPECT_EQ(JobGpuMemory(Sample(), *host_, 500, std::nullopt), std::optional<uint64_t>(100));
}

}  // namespace
}  // namespace gpuherd::daemon::queue
