#include "exec/exit_watcher.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exec/pidfd.h"

extern char** environ;

namespace gpuherd::exec {
namespace {

// True when `pid` has exited (a zombie counts: its parent may be an init
// that does not reap).
bool Gone(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return true;
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

class ExitWatcherTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-watcher-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    auto watcher = ExitWatcher::Start([this](ExitRecord r) {
      std::lock_guard lock(mu_);
      records_.push_back(std::move(r));
      cv_.notify_all();
    });
    ASSERT_TRUE(watcher.ok());
    watcher_ = std::move(watcher).value();
  }
  void TearDown() override {
    watcher_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Waits until `n` records arrived; returns them all.
  std::vector<ExitRecord> WaitForRecords(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return records_.size() >= n; });
    return records_;
  }

  std::string dir_;
  std::unique_ptr<ExitWatcher> watcher_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ExitRecord> records_;
};

TEST_F(ExitWatcherTest, DeadShimDeliversItsRecord) {
  ExitRecord written;
  written.job_id = 5;
  written.attempt = 2;
  written.how = ExitRecord::How::kSignaled;
  written.signal = SIGSEGV;
  written.message = "killed by SIGSEGV";
  ASSERT_TRUE(WriteExitRecord(dir_, written).ok());
  ASSERT_TRUE(watcher_->Watch(5, 2, {5000000, 1}, -1, dir_).ok());
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].job_id, 5);
  EXPECT_EQ(records[0].how, ExitRecord::How::kSignaled);
  EXPECT_EQ(records[0].signal, SIGSEGV);
  EXPECT_FALSE(watcher_->IsWatching(5, 2));
}

TEST_F(ExitWatcherTest, AttemptWithoutShimIsLost) {
  ASSERT_TRUE(watcher_->Watch(6, 1, ShimIdentity{}, -1, dir_).ok());
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].how, ExitRecord::How::kShimLost);
  EXPECT_NE(records[0].message.find("no supervisor was started"), std::string::npos) << records[0].message;
}

TEST_F(ExitWatcherTest, ExitOfWatchedProcessIsDeliveredOnceAndSignalsGoThroughPidfd) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto start = ProcessStartTime(child);
  ASSERT_TRUE(start.ok());
  int pidfd = PidfdOpen(child);
  ASSERT_GE(pidfd, 0);
  ASSERT_TRUE(watcher_->Watch(7, 1, {child, *start}, pidfd, dir_).ok());
  EXPECT_EQ(watcher_->Watch(7, 1, {child, *start}, -1, dir_).code(), Code::kAlreadyExists);
  EXPECT_TRUE(watcher_->IsWatching(7, 1));
  ASSERT_TRUE(watcher_->Signal(7, 1, SIGKILL).ok());
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  // No exit record was written: the "shim" was killed.
  EXPECT_EQ(records[0].how, ExitRecord::How::kShimLost);
  EXPECT_NE(records[0].message.find(std::to_string(child)), std::string::npos);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(WaitForRecords(2, std::chrono::milliseconds(200)).size(), 1u);
  EXPECT_EQ(watcher_->Signal(7, 1, SIGTERM).code(), Code::kNotFound);
}

TEST_F(ExitWatcherTest, RecycledPidIsNotTakenForTheShim) {
  // A stranger that leads its own session, holding the pid the shim file names.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t stranger = 0;
  char sleep_cmd[] = "sleep", seconds[] = "30";
  char* argv[] = {sleep_cmd, seconds, nullptr};
  ASSERT_EQ(posix_spawnp(&stranger, "sleep", nullptr, &attr, argv, environ), 0);
  posix_spawnattr_destroy(&attr);
  auto start = ProcessStartTime(stranger);
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(WriteShimFile(dir_, {stranger, *start - 1}).ok());
  ASSERT_TRUE(watcher_->Watch(8, 1, {stranger, *start - 1}, -1, dir_).ok());
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].how, ExitRecord::How::kShimLost);
  EXPECT_FALSE(Gone(stranger)) << "a process that merely reuses the shim's pid was killed";
  kill(stranger, SIGKILL);
  waitpid(stranger, nullptr, 0);
}

TEST_F(ExitWatcherTest, LostShimsLeftoverJobIsKilled) {
  // A "shim" that leads a session, starts a job in it, and dies without a record.
  int job_pipe[2], go_pipe[2];
  ASSERT_EQ(pipe(job_pipe), 0);
  ASSERT_EQ(pipe(go_pipe), 0);
  pid_t shim = fork();
  ASSERT_GE(shim, 0);
  if (shim == 0) {
    close(job_pipe[0]);
    close(go_pipe[1]);
    setsid();
    pid_t job = fork();
    if (job == 0) {
      execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
      _exit(127);
    }
    ssize_t ignored = write(job_pipe[1], &job, sizeof(job));
    char byte;
    ignored = read(go_pipe[0], &byte, 1);
    (void)ignored;
    _exit(0);
  }
  close(job_pipe[1]);
  close(go_pipe[0]);
  pid_t job = 0;
  ASSERT_EQ(read(job_pipe[0], &job, sizeof(job)), static_cast<ssize_t>(sizeof(job)));
  auto start = ProcessStartTime(shim);
  ASSERT_TRUE(start.ok());
  close(go_pipe[1]);
  waitpid(shim, nullptr, 0);
  ASSERT_FALSE(Gone(job));
  ASSERT_TRUE(watcher_->Watch(9, 1, {shim, *start}, -1, dir_).ok());
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].how, ExitRecord::How::kShimLost);
  EXPECT_NE(records[0].message.find("killed 1 leftover"), std::string::npos) << records[0].message;
  for (int i = 0; i < 100 && !Gone(job); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(Gone(job));
  close(job_pipe[0]);
}

// A process that ends between open() and read() of its /proc/<pid>/stat
// makes read() fail (ESRCH). A directory in place of the stat file fails
// read() the same way (EISDIR), deterministically; reading it with an
// ifstream threw std::ios_base::failure out of the watcher thread, and
// std::terminate took the daemon down.
TEST_F(ExitWatcherTest, LeftoverScanSurvivesUnreadableStatFiles) {
  const std::string proc = dir_ + "/proc";
  // Ends mid-read: "stat" is a directory.
  std::filesystem::create_directories(proc + "/4000001/stat");
  // Not a number, truncated, and enormous stat files.
  std::filesystem::create_directories(proc + "/4000002");
  std::ofstream(proc + "/4000002/stat") << "4000002 (a) S 1 x";
  std::filesystem::create_directories(proc + "/4000003");
  std::ofstream(proc + "/4000003/stat") << "4000003 (a) S";
  std::filesystem::create_directories(proc + "/4000004");
  std::ofstream(proc + "/4000004/stat") << "4000004 (" << std::string(100000, ')') << ") S 1 1 7 0";
  std::filesystem::create_directories(proc + "/self");
  // The shim's own pid does not exist there: no start time to compare with.
  ShimIdentity shim{4000005, 1};
  int killed = -1;
  EXPECT_NO_THROW(killed = KillLeftovers(shim, proc));
  EXPECT_EQ(killed, 0);
}

TEST_F(ExitWatcherTest, SignalToUnknownAttemptIsNotFound) {
  EXPECT_EQ(watcher_->Signal(99, 1, SIGUSR1).code(), Code::kNotFound);
}

}  // namespace
}  // namespace gpuherd::exec

namespace gpuherd::exec {
namespace {

// While the process is out of descriptors, an ended shim's record cannot be
// opened: that is no loss. The watcher reads it again once it can, and
// delivers the job's real end instead of "supervisor lost".
TEST_F(ExitWatcherTest, ARecordUnreadableForWantOfDescriptorsIsReadAgainNotLost) {
  ExitRecord r;
  r.job_id = 31;
  r.attempt = 1;
  r.how = ExitRecord::How::kExited;
  r.code = 0;
  r.message = "exited with code 0";
  ASSERT_TRUE(WriteExitRecord(dir_, r).ok());
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  // A new descriptor takes the lowest free number, which the limit caps:
  // below the lowest free one, none is left.
  const int lowest_free = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  Status watched = watcher_->Watch(31, 1, ShimIdentity{}, -1, dir_);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const size_t delivered_while_short = WaitForRecords(1, std::chrono::milliseconds(1)).size();
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_TRUE(watched.ok()) << watched.ToString();
  EXPECT_EQ(delivered_while_short, 0u);
  auto records = WaitForRecords(1);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].how, ExitRecord::How::kExited) << records[0].message;
  EXPECT_EQ(records[0].code, 0);
}

}  // namespace
}  // namespace gpuherd::exec
