#include "fence/fence_report.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "fence/ledger.h"

namespace gpuherd::fence {
namespace {

namespace fs = std::filesystem;

class FenceReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fence_report_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST_F(FenceReportTest, NoFilesNoFence) { EXPECT_EQ(ReadFenceReport(dir_.string()).state, "none"); }

TEST_F(FenceReportTest, ReadsTheStatusAndTheLedger) {
  Write(kStatusFileName, "active 67108864\n");
  char error[128];
  LedgerFile* ledger = OpenLedger((dir_ / kLedgerFileName).c_str(), 64 << 20, error, sizeof(error));
  ASSERT_NE(ledger, nullptr);
  LockLedger(ledger);
  Charge(ledger, ClaimEntry(ledger, getpid(), 1), 5 << 20);
  UnlockLedger(ledger);
  FenceReport r = ReadFenceReport(dir_.string());
  EXPECT_EQ(r.state, "active");
  EXPECT_EQ(r.used_bytes, 5u << 20);
  EXPECT_EQ(r.share_bytes, 64u << 20);
}

TEST_F(FenceReportTest, TheJobsTextIsBoundedAndPrintable) {
  Write(kStatusFileName, "off cannot \x1b[31mopen\x07 it\nsecond line");
  FenceReport r = ReadFenceReport(dir_.string());
  EXPECT_EQ(r.state, "off");
  EXPECT_EQ(r.detail, "cannot [31mopen it");
  Write(kStatusFileName, "off " + std::string(4096, 'x'));
  EXPECT_EQ(ReadFenceReport(dir_.string()).state, "none") << "an oversized file is not read";
  Write(kStatusFileName, "something else");
  EXPECT_EQ(ReadFenceReport(dir_.string()).detail, "unreadable status");
}

TEST_F(FenceReportTest, FollowsNoSymbolicLinks) {
  Write("elsewhere", "active 1\n");
  fs::create_symlink(dir_ / "elsewhere", dir_ / kStatusFileName);
  Write("ledger-elsewhere", std::string(sizeof(LedgerFile), '\0'));
  fs::create_symlink(dir_ / "ledger-elsewhere", dir_ / kLedgerFileName);
  FenceReport r = ReadFenceReport(dir_.string());
  EXPECT_EQ(r.state, "none");
  EXPECT_FALSE(r.used_bytes.has_value());
  fs::create_symlink(dir_, dir_.string() + ".link");
  EXPECT_EQ(ReadFenceReport(dir_.string() + ".link").state, "none");
  fs::remove(dir_.string() + ".link");
}

}  // namespace
}  // namespace gpuherd::fence
