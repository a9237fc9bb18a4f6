#include "core/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class SafeFileTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-safe-file-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ + "/jobs/7");
    fs::create_directories(dir_ + "/elsewhere");
    Write(dir_ + "/elsewhere/secret", "root only\n");
    options_.use_openat2 = GetParam();
  }
  void TearDown() override { fs::remove_all(dir_); }
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string jobs() const { return dir_ + "/jobs"; }

  std::string dir_;
  BeneathOptions options_;
};

TEST_P(SafeFileTest, ReadsARegularFileFromAnOffsetWithinACap) {
  Write(jobs() + "/7/metrics.jsonl", "0123456789");
  auto chunk = ReadBeneath(jobs(), "7/metrics.jsonl", 2, 5, options_);
  ASSERT_TRUE(chunk.ok()) << chunk.status().message();
  EXPECT_EQ(chunk->data, "23456");
  EXPECT_EQ(chunk->size, 10u);
  auto past = ReadBeneath(jobs(), "7/metrics.jsonl", 10, 5, options_);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->data, "");
}

TEST_P(SafeFileTest, MissingFileIsNotFound) {
  auto chunk = ReadBeneath(jobs(), "7/metrics.jsonl", 0, 5, options_);
  EXPECT_EQ(chunk.status().code(), Code::kNotFound);
}

TEST_P(SafeFileTest, SymlinkToAnotherFileIsRefused) {
  fs::create_symlink(dir_ + "/elsewhere/secret", jobs() + "/7/metrics.jsonl");
  auto chunk = ReadBeneath(jobs(), "7/metrics.jsonl", 0, 100, options_);
  ASSERT_FALSE(chunk.ok());
  EXPECT_EQ(chunk.status().code(), Code::kPermissionDenied);
  EXPECT_THAT(chunk.status().message(), HasSubstr("symbolic link"));
}

TEST_P(SafeFileTest, SymlinkedDirectoryOnTheWayIsRefused) {
  fs::create_directory_symlink(dir_ + "/elsewhere", jobs() + "/8");
  auto chunk = ReadBeneath(jobs(), "8/secret", 0, 100, options_);
  ASSERT_FALSE(chunk.ok());
  EXPECT_EQ(chunk.status().code(), Code::kPermissionDenied);
}

TEST_P(SafeFileTest, HardLinkIsRefused) {
  ASSERT_EQ(link((dir_ + "/elsewhere/secret").c_str(), (jobs() + "/7/metrics.jsonl").c_str()), 0);
  auto chunk = ReadBeneath(jobs(), "7/metrics.jsonl", 0, 100, options_);
  ASSERT_FALSE(chunk.ok());
  EXPECT_THAT(chunk.status().message(), HasSubstr("hard links"));
}

// A FIFO with no writer would block a plain open() forever.
TEST_P(SafeFileTest, FifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo((jobs() + "/7/metrics.jsonl").c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  auto chunk = ReadBeneath(jobs(), "7/metrics.jsonl", 0, 100, options_);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  ASSERT_FALSE(chunk.ok());
  EXPECT_THAT(chunk.status().message(), HasSubstr("not a regular file"));
}

TEST_P(SafeFileTest, PathsThatLeaveTheDirectoryAreRefused) {
  for (const char* bad : {"../elsewhere/secret", "/etc/passwd", "7/../../elsewhere/secret", "", "7//x"}) {
    auto chunk = ReadBeneath(jobs(), bad, 0, 100, options_);
    EXPECT_EQ(chunk.status().code(), Code::kInvalidArgument) << bad;
  }
}

TEST_P(SafeFileTest, SmallFileCapIsEnforced) {
  Write(jobs() + "/7/exit", std::string(100, 'x'));
  EXPECT_EQ(ReadSmallFileBeneath(jobs(), "7/exit", 10).status().code(), Code::kResourceExhausted);
  auto whole = ReadSmallFileBeneath(jobs(), "7/exit", 100);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->size(), 100u);
}

// The message gives the file's true size and the cap, at and around the cap.
TEST_P(SafeFileTest, SmallFileCapMessageCountsTruly) {
  Write(jobs() + "/7/exit", std::string(100, 'x'));
  EXPECT_TRUE(ReadSmallFileBeneath(jobs(), "7/exit", 101).ok());
  EXPECT_TRUE(ReadSmallFileBeneath(jobs(), "7/exit", 100).ok());
  const Status over = ReadSmallFileBeneath(jobs(), "7/exit", 99).status();
  EXPECT_EQ(over.code(), Code::kResourceExhausted);
  EXPECT_EQ(over.message(), jobs() + "/7/exit is 100 bytes; at most 99 are read");
}

INSTANTIATE_TEST_SUITE_P(BothWays, SafeFileTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "openat2" : "per_component"; });

}  // namespace
}  // namespace gpuherd
