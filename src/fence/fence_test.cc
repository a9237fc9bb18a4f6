// The fence in real processes: fence_probe, a driver-API program linked to
// the fake libcuda.so.1, runs with libgpuherd-fence.so preloaded.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fence/fence_report.h"

extern char** environ;

namespace gpuherd::fence {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1 << 20;

// One fence_probe process with pipes to its stdin and stdout; its stderr
// goes to a file.
class Probe {
 public:
  Probe(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
        const std::string& stderr_path) {
    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    std::vector<std::string> argv_text = {FENCE_PROBE};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_text;
    for (const auto& [k, v] : env) env_text.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, FENCE_PROBE, &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = fdopen(out[0], "r");
  }
  ~Probe() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    if (from_ != nullptr) fclose(from_);
    if (to_ >= 0) close(to_);
  }

  std::string Line() {
    char buffer[256];
    if (fgets(buffer, sizeof(buffer), from_) == nullptr) return "<eof>";
    std::string line = buffer;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  void Continue() { EXPECT_EQ(write(to_, "\n", 1), 1); }
  void Kill() { kill(pid_, SIGKILL); }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  FILE* from_ = nullptr;
};

class FenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fence_test." + std::to_string(getpid()) + "." +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    env_ = {{"LD_PRELOAD", FENCE_LIBRARY},
            {"LD_LIBRARY_PATH", FAKE_LIBCUDA_DIR},
            {"GPUHERD_GPU_MEM_LIMIT_MB", "64"},
            {"GPUHERD_FENCE_LEDGER", (dir_ / kLedgerFileName).string()},
            {"GPUHERD_FENCE_STATUS", (dir_ / kStatusFileName).string()}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the probe to its end; returns its stdout lines.
  std::vector<std::string> Run(const std::vector<std::string>& args) {
    Probe probe(args, env_, Stderr());
    std::vector<std::string> lines;
    for (std::string line = probe.Line(); line != "<eof>"; line = probe.Line()) lines.push_back(line);
    int status = probe.Wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(Stderr());
    return lines;
  }
  std::string Stderr() const { return (dir_ / "stderr").string(); }
  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static std::string Info(uint64_t free_mib, uint64_t total_mib) {
    return "info " + std::to_string(free_mib * kMiB) + " " + std::to_string(total_mib * kMiB) + " 0";
  }

  fs::path dir_;
  std::map<std::string, std::string> env_;
};

class FenceViaTest : public FenceTest, public ::testing::WithParamInterface<const char*> {};

// However the program reaches the driver, the share holds.
TEST_P(FenceViaTest, AllocatesWithinTheShareAndFailsPastIt) {
  auto lines = Run({GetParam(), "fenced", "info", "alloc", "32", "alloc", "16", "alloc", "32", "info", "free",
                    "alloc", "32", "info"});
  std::vector<std::string> expected = {"fenced yes", Info(64, 64), "alloc 32 0", "alloc 16 0",
                                       "alloc 32 2",  // CUDA_ERROR_OUT_OF_MEMORY
                                       Info(16, 64), "free 0", "alloc 32 0", Info(0, 64)};
  EXPECT_EQ(lines, expected);
  FenceReport report = ReadFenceReport(dir_.string());
  EXPECT_EQ(report.state, "active");
  EXPECT_EQ(report.share_bytes, 64 * kMiB);
  EXPECT_EQ(report.used_bytes, 0u) << "a process that ended holds nothing";
  EXPECT_EQ(ReadFile(Stderr()), "");
}

INSTANTIATE_TEST_SUITE_P(Ways, FenceViaTest, ::testing::Values("direct", "dlsym", "procaddress"));

TEST_F(FenceTest, EveryAllocationEntryPointCounts) {
  env_["GPUHERD_GPU_MEM_LIMIT_MB"] = "8";
  auto lines = Run({"procaddress", "managed", "3", "async", "3", "create", "2", "create", "1", "info",
                    "free", "free", "free", "free", "info",
                    // 1024 x 512 floats of 4 channels: 8 MiB; one more row is too many.
                    "array", "1024", "512", "4", "free", "array", "1024", "513", "4",
                    "array3d", "256", "256", "32", "free",  // 8 MiB
                    "mipmap", "1024", "1024", "2", "mipmap", "1024", "512", "2",  // 5 MiB, then 2.5 MiB
                    "info", "free", "free", "pitch", "1000", "2048", "info"});
  std::vector<std::string> expected = {
      "managed 3 0", "async 3 0", "create 2 0", "create 1 2", Info(0, 8),
      "free 0", "free 0", "free 0", "free none", Info(8, 8),
      "array 0", "free 0", "array 2", "array3d 0", "free 0",
      "mipmap 0", "mipmap 0", "info 524288 8388608 0", "free 0", "free 0",
      // The pitch (1024) is charged, not the width asked for (1000 floats).
      "pitch 0 1024", Info(6, 8)};
  EXPECT_EQ(lines, expected);
}

TEST_F(FenceTest, TwoProcessesOfAJobShareOneAccount) {
  Probe first({"direct", "alloc", "40", "pause", "info"}, env_, Stderr());
  EXPECT_EQ(first.Line(), "alloc 40 0");
  EXPECT_EQ(first.Line(), "paused");
  auto second = Run({"dlsym", "alloc", "40", "alloc", "20", "info"});
  EXPECT_EQ(second, (std::vector<std::string>{"alloc 40 2", "alloc 20 0", Info(4, 64)}));
  first.Continue();
  EXPECT_EQ(first.Line(), Info(24, 64));  // the second process has ended
  EXPECT_EQ(first.Wait(), 0);
  EXPECT_EQ(Run({"procaddress", "alloc", "64"}), std::vector<std::string>{"alloc 64 0"});
}

TEST_F(FenceTest, AProcessKilledMidAllocationLeavesTheLedgerConsistent) {
  env_["FAKE_CUDA_HANG_BYTES"] = std::to_string(30 * kMiB);
  env_["FAKE_CUDA_HANG_FILE"] = (dir_ / "hanging").string();
  Probe doomed({"direct", "alloc", "20", "alloc", "30"}, env_, Stderr());
  EXPECT_EQ(doomed.Line(), "alloc 20 0");
  for (int i = 0; i < 500 && !fs::exists(dir_ / "hanging"); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(fs::exists(dir_ / "hanging"));
  EXPECT_EQ(ReadFenceReport(dir_.string()).used_bytes, 50 * kMiB) << "the 30 MiB are reserved in the driver call";
  doomed.Kill();
  doomed.Wait();
  env_.erase("FAKE_CUDA_HANG_BYTES");
  EXPECT_EQ(Run({"direct", "info", "alloc", "64", "info"}),
            (std::vector<std::string>{Info(64, 64), "alloc 64 0", Info(0, 64)}));
}

TEST_F(FenceTest, GetProcAddressHandsOutTheFencedEntryPoints) {
  // The fake driver resolves names from its own table, never through dlsym:
  // only the fence's cuGetProcAddress can have replaced them.
  EXPECT_EQ(Run({"procaddress", "fenced"}), std::vector<std::string>{"fenced yes"});
  env_.erase("LD_PRELOAD");
  EXPECT_EQ(Run({"procaddress", "fenced", "alloc", "100"}),
            (std::vector<std::string>{"fenced no", "alloc 100 0"}));
}

TEST_F(FenceTest, PassesThroughAndSaysSoOnceWhenTheLedgerCannotBeOpened) {
  env_["GPUHERD_FENCE_LEDGER"] = (dir_ / "missing" / "fence.ledger").string();
  EXPECT_EQ(Run({"direct", "alloc", "100", "alloc", "100", "info"}),
            (std::vector<std::string>{"alloc 100 0", "alloc 100 0", "info " + std::to_string((8192 - 200) * kMiB) +
                                                                          " " + std::to_string(8192 * kMiB) + " 0"}));
  std::string err = ReadFile(Stderr());
  EXPECT_NE(err.find("gpuherd-fence: cannot open the ledger"), std::string::npos) << err;
  EXPECT_EQ(err.find("gpuherd-fence"), err.rfind("gpuherd-fence")) << "said once: " << err;
  FenceReport report = ReadFenceReport(dir_.string());
  EXPECT_EQ(report.state, "off");
  EXPECT_NE(report.detail.find("cannot open the ledger"), std::string::npos) << report.detail;
}

TEST_F(FenceTest, AJobWithoutAShareIsNotFenced) {
  env_.erase("GPUHERD_GPU_MEM_LIMIT_MB");
  EXPECT_EQ(Run({"direct", "alloc", "100"}), std::vector<std::string>{"alloc 100 0"});
  EXPECT_EQ(ReadFile(Stderr()), "");
  EXPECT_FALSE(fs::exists(dir_ / kLedgerFileName));
}

TEST_F(FenceTest, RtldNextLookupsStillSeeTheirCaller) {
  EXPECT_EQ(Run({"direct", "rtld-next"}), std::vector<std::string>{"rtld-next ok"});
}

}  // namespace
}  // namespace gpuherd::fence
