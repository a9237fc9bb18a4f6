#include "helpers/cpp/gpuherd_job.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuherd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class JobHelpersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd_job_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    for (const char* name : {"GPUHERD_METRICS_FILE", "GPUHERD_CHECKPOINT_DIR", "GPUHERD_RESUME",
                             "GPUHERD_RESTART_COUNT"}) {
      ::unsetenv(name);
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

TEST_F(JobHelpersTest, LogMetricsAppendsOneJsonLinePerCall) {
  std::string path = dir_ + "/metrics.jsonl";
  ::setenv("GPUHERD_METRICS_FILE", path.c_str(), 1);
  ASSERT_TRUE(LogMetrics({{"loss", 0.4}, {"acc", 1.0 / 3}}, 12));
  ASSERT_TRUE(LogMetrics({{"lr", 1e-4}}));

  std::vector<std::string> lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 2u);
  // Shortest round-trip numbers: 0.4 stays 0.4, a third reads back exactly.
  EXPECT_THAT(lines[0], HasSubstr(",\"step\":12,\"loss\":0.4,\"acc\":"));
  nlohmann::json first = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(first["step"], 12);
  EXPECT_EQ(first["acc"].get<double>(), 1.0 / 3);
  EXPECT_GT(first["time"].get<double>(), 1e9);
  nlohmann::json second = nlohmann::json::parse(lines[1]);
  EXPECT_FALSE(second.contains("step"));
  EXPECT_EQ(second["lr"].get<double>(), 1e-4);
  EXPECT_LE(first["time"].get<double>(), second["time"].get<double>());
}

TEST_F(JobHelpersTest, LogMetricsEscapesNamesAndWritesNanTokens) {
  std::string path = dir_ + "/metrics.jsonl";
  ::setenv("GPUHERD_METRICS_FILE", path.c_str(), 1);
  ASSERT_TRUE(LogMetrics({{"odd \"name\"\n\\", 2.0}}, 1));
  ASSERT_TRUE(LogMetrics({{"loss", std::nan("")}, {"g", HUGE_VAL}, {"h", -HUGE_VAL}}, 2));
  std::vector<std::string> lines = ReadLines(path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["odd \"name\"\n\\"], 2.0);
  EXPECT_THAT(lines[1], HasSubstr("\"loss\":NaN,\"g\":Infinity,\"h\":-Infinity}"));
}

TEST_F(JobHelpersTest, LogMetricsOutsideGpuherdWarnsOnceAndWritesNothing) {
  // A fresh process, so that no earlier test has used up the one warning.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string dir = dir_;
  EXPECT_EXIT(
      {
        if (::chdir(dir.c_str()) != 0) std::_Exit(2);  // whatever it writes would land here
        bool ok = LogMetrics({{"loss", 1.0}}, 1) && LogMetrics({{"loss", 1.0}}, 2);
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      ::testing::Eq("gpuherd_job: GPUHERD_METRICS_FILE is not set; metrics are not recorded\n"));
  EXPECT_TRUE(ListDir(dir_).empty());
}

TEST_F(JobHelpersTest, LogMetricsReportsAnUnwritableFile) {
  std::string path = dir_ + "/missing/metrics.jsonl";
  ::setenv("GPUHERD_METRICS_FILE", path.c_str(), 1);
  std::string error;
  EXPECT_FALSE(LogMetrics({{"loss", 1.0}}, 1, &error));
  EXPECT_THAT(error, HasSubstr(path));
}

TEST_F(JobHelpersTest, CheckpointRoundTripsBinaryBytesAndLeavesNoTemporaryFile) {
  std::string ckpt = dir_ + "/a/b";
  ::setenv("GPUHERD_CHECKPOINT_DIR", ckpt.c_str(), 1);
  std::string error = "stale";
  EXPECT_EQ(LoadCheckpoint(&error), std::nullopt);
  EXPECT_EQ(error, "");
  std::string bytes("model\0cursor\xff", 13);
  ASSERT_TRUE(SaveCheckpoint(bytes, &error)) << error;
  EXPECT_EQ(LoadCheckpoint(), bytes);
  ASSERT_TRUE(SaveCheckpoint("second"));
  EXPECT_EQ(LoadCheckpoint(), "second");
  EXPECT_THAT(ListDir(ckpt), ElementsAre(kCheckpointFile));
}

TEST_F(JobHelpersTest, CheckpointKeepsCursorAndRngExactly) {
  std::mt19937_64 rng(42);
  rng.discard(1000);
  long long cursor = 1234;
  std::ostringstream out;
  out << cursor << ' ' << rng;
  ASSERT_TRUE(SaveCheckpointTo(dir_, out.str()));
  std::vector<unsigned long long> expected = {rng(), rng(), rng()};

  std::optional<std::string> bytes = LoadCheckpointFrom(dir_);
  ASSERT_TRUE(bytes.has_value());
  std::mt19937_64 restored;
  long long restored_cursor = 0;
  std::istringstream in(*bytes);
  in >> restored_cursor >> restored;
  EXPECT_EQ(restored_cursor, 1234);
  EXPECT_EQ((std::vector<unsigned long long>{restored(), restored(), restored()}), expected);
}

TEST_F(JobHelpersTest, CheckpointErrorsSayWhatIsWrong) {
  std::string error;
  EXPECT_FALSE(SaveCheckpoint("x", &error));
  EXPECT_THAT(error, HasSubstr("GPUHERD_CHECKPOINT_DIR is not set"));
  EXPECT_EQ(LoadCheckpoint(&error), std::nullopt);
  EXPECT_THAT(error, HasSubstr("GPUHERD_CHECKPOINT_DIR is not set"));

  std::string file = dir_ + "/plain-file";
  std::ofstream(file) << "not a directory";
  EXPECT_FALSE(SaveCheckpointTo(file, "x", &error));
  EXPECT_THAT(error, HasSubstr(file));
  // A checkpoint path that is a directory cannot be read.
  ASSERT_EQ(::mkdir((dir_ + "/d").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir_ + "/d/" + kCheckpointFile).c_str(), 0755), 0);
  EXPECT_EQ(LoadCheckpointFrom(dir_ + "/d", &error), std::nullopt);
  EXPECT_THAT(error, HasSubstr(kCheckpointFile));
}

TEST_F(JobHelpersTest, RestartCountAndResuming) {
  EXPECT_EQ(RestartCount(), 0);
  EXPECT_FALSE(Resuming());
  ::setenv("GPUHERD_RESTART_COUNT", "3", 1);
  ::setenv("GPUHERD_RESUME", "1", 1);
  EXPECT_EQ(RestartCount(), 3);
  EXPECT_TRUE(Resuming());
  ::setenv("GPUHERD_RESTART_COUNT", "3x", 1);
  EXPECT_EQ(RestartCount(), 0);
}

// Signal state is process-wide and SIGTERM's is final, so each scenario runs in a child;
// the exit code names the first expectation that failed.
TEST_F(JobHelpersTest, SigusrOneRequestsACheckpointUntilOneIsSaved) {
  std::string dir = dir_;
  EXPECT_EXIT(
      {
        if (ShouldCheckpoint() || ShouldExit()) std::_Exit(1);
        ::raise(SIGUSR1);
        if (!ShouldCheckpoint()) std::_Exit(2);
        if (ShouldExit()) std::_Exit(3);
        if (!ShouldCheckpoint()) std::_Exit(4);  // reading does not clear it
        if (!SaveCheckpointTo(dir, "x")) std::_Exit(5);
        if (ShouldCheckpoint()) std::_Exit(6);
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(JobHelpersTest, SigtermRequestsCheckpointAndExitForGood) {
  std::string dir = dir_;
  EXPECT_EXIT(
      {
        InstallSignalHandlers();
        ::raise(SIGTERM);
        if (!ShouldCheckpoint() || !ShouldExit()) std::_Exit(1);
        if (!SaveCheckpointTo(dir, "x")) std::_Exit(2);
        if (!ShouldCheckpoint() || !ShouldExit()) std::_Exit(3);
        std::_Exit(kExitStopped == 143 ? 0 : 4);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace gpuherd
