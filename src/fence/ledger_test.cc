#include "fence/ledger.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace gpuherd::fence {
namespace {

namespace fs = std::filesystem;

class LedgerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ledger_test." + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "fence.ledger").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  LedgerFile* Open(uint64_t limit) {
    char error[256] = "";
    LedgerFile* ledger = OpenLedger(path_.c_str(), limit, error, sizeof(error));
    EXPECT_NE(ledger, nullptr) << error;
    return ledger;
  }

  // Runs `child` in a forked process that ends without tidying up.
  template <typename F>
  void InChild(F child) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      child();
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }

  fs::path dir_;
  std::string path_;
};

TEST_F(LedgerTest, ReservesWithinTheLimitOnly) {
  LedgerFile* ledger = Open(100);
  ASSERT_TRUE(LockLedger(ledger));
  int slot = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()));
  ASSERT_GE(slot, 0);
  EXPECT_TRUE(Reserve(ledger, slot, 60));
  EXPECT_TRUE(Reserve(ledger, slot, 40));
  EXPECT_FALSE(Reserve(ledger, slot, 1));
  Release(ledger, slot, 30);
  EXPECT_EQ(ledger->used_bytes, 70u);
  EXPECT_FALSE(Reserve(ledger, slot, UINT64_MAX));
  EXPECT_TRUE(Reserve(ledger, slot, 30));
  UnlockLedger(ledger);
}

TEST_F(LedgerTest, TheFirstProcessSetsTheLimit) {
  Open(100);
  LedgerFile* again = Open(5000);
  EXPECT_EQ(again->limit_bytes, 100u);
}

TEST_F(LedgerTest, RefusesAFileOfAnotherSize) {
  { std::FILE* f = std::fopen(path_.c_str(), "w"); std::fputs("not a ledger", f); std::fclose(f); }
  char error[256] = "";
  EXPECT_EQ(OpenLedger(path_.c_str(), 100, error, sizeof(error)), nullptr);
  EXPECT_NE(std::string(error).find("size"), std::string::npos) << error;
}

TEST_F(LedgerTest, RefusesASymbolicLink) {
  fs::create_symlink(dir_ / "elsewhere", path_);
  char error[256] = "";
  EXPECT_EQ(OpenLedger(path_.c_str(), 100, error, sizeof(error)), nullptr);
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere"));
}

TEST_F(LedgerTest, ADeadProcessesShareIsReclaimed) {
  LedgerFile* ledger = Open(100);
  InChild([&] {
    LockLedger(ledger);
    int slot = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()));
    Reserve(ledger, slot, 80);
    UnlockLedger(ledger);
  });
  EXPECT_EQ(ledger->used_bytes, 80u);
  ASSERT_TRUE(LockLedger(ledger));
  int slot = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()));
  EXPECT_TRUE(Reserve(ledger, slot, 90));  // the child is gone: its 80 are back
  EXPECT_EQ(ledger->used_bytes, 90u);
  UnlockLedger(ledger);
}

TEST_F(LedgerTest, AHolderThatDiesMidUpdateLeavesItConsistent) {
  LedgerFile* ledger = Open(100);
  ASSERT_TRUE(LockLedger(ledger));
  int mine = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()));
  ASSERT_TRUE(Reserve(ledger, mine, 30));
  UnlockLedger(ledger);
  InChild([&] {
    LockLedger(ledger);
    int slot = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()));
    // Killed between its entry and the total, holding the lock.
    ledger->entries[slot].bytes += 50;
    raise(SIGKILL);
  });
  ASSERT_TRUE(LockLedger(ledger));  // EOWNERDEAD, repaired
  EXPECT_EQ(ledger->used_bytes, 30u);
  EXPECT_TRUE(Reserve(ledger, mine, 70));
  UnlockLedger(ledger);
  ASSERT_TRUE(LockLedger(ledger));  // consistent again: an ordinary lock
  UnlockLedger(ledger);
}

TEST_F(LedgerTest, AReusedPidIsNotMistakenForTheDeadProcess) {
  LedgerFile* ledger = Open(100);
  ASSERT_TRUE(LockLedger(ledger));
  // An entry of this very pid, but a process that started at another time.
  int stale = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()) + 12345);
  Reserve(ledger, stale, 100);
  int mine = ClaimEntry(ledger, getpid(), ProcessStartTime(getpid()));
  EXPECT_NE(stale, mine);
  EXPECT_TRUE(Reserve(ledger, mine, 100));
  UnlockLedger(ledger);
}

}  // namespace
}  // namespace gpuherd::fence
