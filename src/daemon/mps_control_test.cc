#include "daemon/mps_control.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;

// A stand-in nvidia-cuda-mps-control on PATH that logs each call: its
// arguments, the variables it was given and what it read on stdin.
class MpsControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mps_control_test." + std::to_string(getpid()));
    fs::create_directories(dir_ / "bin");
    log_ = (dir_ / "calls.log").string();
    old_path_ = std::getenv("PATH");
    setenv("PATH", ((dir_ / "bin").string() + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override {
    setenv("PATH", old_path_.c_str(), 1);
    fs::remove_all(dir_);
  }
  void FakeControl(int exit_status) {
    std::string script = (dir_ / "bin" / "nvidia-cuda-mps-control").string();
    std::ofstream(script) << "#!/bin/sh\n"
                          << "input=''; [ $# -eq 0 ] && read -r input\n"
                          << "echo \"args=$* gpu=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY "
                          << "log=$CUDA_MPS_LOG_DIRECTORY input=$input\" >> " << log_ << "\n"
                          << "exit " << exit_status << "\n";
    chmod(script.c_str(), 0755);
  }
  std::string Log() {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  fs::path dir_;
  std::string log_, old_path_;
};

TEST_F(MpsControlTest, StartsOneControlDaemonPerGpuAndQuitsThem) {
  FakeControl(0);
  std::string home = (dir_ / "home").string();
  auto mps = StartMpsControl(home, {"GPU-aaa", "GPU-bbb"});
  ASSERT_TRUE(mps.ok()) << mps.status().ToString();
  EXPECT_EQ(Log(), "args=-d gpu=GPU-aaa pipe=" + home + "/mps/0/pipe log=" + home + "/mps/0/log input=\n" +
                       "args=-d gpu=GPU-bbb pipe=" + home + "/mps/1/pipe log=" + home + "/mps/1/log input=\n");
  auto env = (*mps)->JobEnv(1, uint64_t{4} << 30);
  EXPECT_EQ(env["CUDA_MPS_PIPE_DIRECTORY"], home + "/mps/1/pipe");
  EXPECT_EQ(env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"], "0=4096M");
  (*mps)->Shutdown();
  std::string log = Log();
  EXPECT_NE(log.find("args= gpu=GPU-aaa pipe=" + home + "/mps/0/pipe log=" + home + "/mps/0/log input=quit"),
            std::string::npos) << log;
  EXPECT_NE(log.find("args= gpu=GPU-bbb"), std::string::npos) << log;
}

TEST_F(MpsControlTest, WithoutTheProgramTheStartFailsClearly) {
  auto mps = StartMpsControl((dir_ / "home").string(), {"GPU-aaa"});
  ASSERT_FALSE(mps.ok());
  EXPECT_NE(mps.status().message().find("nvidia-cuda-mps-control"), std::string::npos);
  EXPECT_NE(mps.status().message().find("PATH"), std::string::npos);
}

TEST_F(MpsControlTest, AControlDaemonThatFailsFailsTheStart) {
  FakeControl(3);
  auto mps = StartMpsControl((dir_ / "home").string(), {"GPU-aaa"});
  ASSERT_FALSE(mps.ok());
  EXPECT_NE(mps.status().message().find("exited with status 3"), std::string::npos) << mps.status().ToString();
}

}  // namespace
}  // namespace gpuherd::daemon
