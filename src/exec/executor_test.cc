#include "exec/executor.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "exec/job_files.h"
#include "exec/launcher.h"

namespace gpuherd::exec {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kTestdata = EXEC_TESTDATA_DIR;

std::string StdoutPath(const std::string& dir) { return dir + "/stdout"; }
std::string StderrPath(const std::string& dir) { return dir + "/stderr"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool WaitUntil(const std::function<bool()>& done, milliseconds timeout = seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// True when `pid` has exited (a zombie counts: its parent may be an init
// that does not reap).
bool Gone(int pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z';
}

// Live launchers of this process: its children started with the hidden argument.
std::vector<int> LauncherPids() {
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile(entry.path().string() + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    char state = 0;
    int ppid = 0;
    rest >> state >> ppid;
    if (ppid != getpid() || state == 'Z') continue;
    if (ReadFile(entry.path().string() + "/cmdline").find(kLauncherArgument) != std::string::npos) {
      pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// Collects what an executor delivers, from its watcher thread.
class Records {
 public:
  void Add(ExitRecord r) {
    std::lock_guard lock(mu_);
    ++count_[{r.job_id, r.attempt}];
    records_.push_back(std::move(r));
    cv_.notify_all();
  }
  std::optional<ExitRecord> WaitFor(int64_t job_id, int attempt = 1, milliseconds timeout = seconds(20)) {
    std::unique_lock lock(mu_);
    std::optional<ExitRecord> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& r : records_) {
        if (r.job_id == job_id && r.attempt == attempt) found = r;
      }
      return found.has_value();
    });
    return found;
  }
  bool WaitForCount(size_t n, milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return records_.size() >= n; });
  }
  std::map<std::pair<int64_t, int>, int> counts() {
    std::lock_guard lock(mu_);
    return count_;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return records_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ExitRecord> records_;
  std::map<std::pair<int64_t, int>, int> count_;
};

class ExecutorTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-exec-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    chmod(home_.c_str(), 0755);  // a job running as nobody enters its attempt directory
    // The private tree of the records (job_trees.h) and the jobs' tree.
    std::filesystem::create_directories(home_ + "/run/jobs");
    chmod((home_ + "/run").c_str(), 0700);
    std::filesystem::create_directories(home_ + "/jobs");
    // Must not reach any job: a job's environment is exactly what it is given.
    setenv("GPUHERD_LEAK_CHECK", "leaked", 1);
    executor_ = StartExecutor(&records_);
  }
  void TearDown() override {
    if (executor_) executor_->Shutdown();
    std::filesystem::remove_all(home_);
  }

  std::unique_ptr<Executor> StartExecutor(Records* records) {
    auto executor = Executor::Start(ExecutorOptions{}, [records](ExitRecord r) { records->Add(std::move(r)); });
    EXPECT_TRUE(executor.ok()) << executor.status().ToString();
    return executor.ok() ? std::move(executor).value() : nullptr;
  }

  // The attempt's output folder, in the job's tree.
  std::string AttemptDir(int64_t job_id, int attempt = 1) {
    return home_ + "/jobs/" + std::to_string(job_id) + "/" + std::to_string(attempt);
  }
  // The attempt's record folder, in the daemon's private tree.
  std::string RecordDir(int64_t job_id, int attempt = 1) {
    return home_ + "/run/jobs/" + std::to_string(job_id) + "/" + std::to_string(attempt);
  }

  LaunchSpec Spec(int64_t job_id, std::vector<std::string> argv) {
    LaunchSpec spec;
    spec.job_id = job_id;
    spec.attempt = 1;
    spec.argv = std::move(argv);
    spec.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}};
    spec.record_dir = RecordDir(job_id);
    spec.output_dir = AttemptDir(job_id);
    // The job's folder is made (and handed to its user) before the launch.
    std::filesystem::create_directories(home_ + "/jobs/" + std::to_string(job_id));
    return spec;
  }

  std::string home_;
  Records records_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorTest, ExitCodeAndOutputAreRecorded) {
  auto launched = executor_->Launch(Spec(1, {kTestdata + "/exit_with.sh", "3"}));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  auto r = records_.WaitFor(1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kExited);
  EXPECT_EQ(r->code, 3);
  EXPECT_EQ(r->signal, 0);
  EXPECT_EQ(r->message, "exited with code 3");
  EXPECT_GT(r->started, 0);
  EXPECT_GE(r->ended, r->started);
  EXPECT_EQ(ReadFile(StdoutPath(AttemptDir(1))), "out 3\n");
  EXPECT_EQ(ReadFile(StderrPath(AttemptDir(1))), "err 3\n");
}

TEST_F(ExecutorTest, SignalDeathIsRecorded) {
  ASSERT_TRUE(executor_->Launch(Spec(2, {"sh", "-c", "kill -SEGV $$"})).ok());
  auto r = records_.WaitFor(2);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kSignaled);
  EXPECT_EQ(r->signal, SIGSEGV);
  EXPECT_EQ(r->message, "killed by SIGSEGV");
}

TEST_F(ExecutorTest, EnvironmentDirectoryAndAffinityAreAsGiven) {
  LaunchSpec spec = Spec(3, {kTestdata + "/report.sh"});
  spec.env["FOO"] = "bar baz";
  spec.cwd = home_;
  spec.cpus = {0};
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto r = records_.WaitFor(3);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->code, 0) << r->message << ReadFile(StderrPath(AttemptDir(3)));
  std::string out = ReadFile(StdoutPath(AttemptDir(3)));
  EXPECT_NE(out.find("foo=bar baz\n"), std::string::npos) << out;
  EXPECT_NE(out.find("leak=\n"), std::string::npos) << out;
  EXPECT_NE(out.find("cwd=" + home_ + "\n"), std::string::npos) << out;
  EXPECT_NE(out.find("cpus=0\n"), std::string::npos) << out;
}

TEST_F(ExecutorTest, DefaultDirectoryIsTheAttemptDirectory) {
  ASSERT_TRUE(executor_->Launch(Spec(4, {"sh", "-c", "pwd"})).ok());
  ASSERT_TRUE(records_.WaitFor(4));
  EXPECT_EQ(ReadFile(StdoutPath(AttemptDir(4))), AttemptDir(4) + "\n");
}

TEST_F(ExecutorTest, MissingCommandIsALaunchFailureWithTheReason) {
  ASSERT_TRUE(executor_->Launch(Spec(5, {"trian.py", "--lr", "3"})).ok());
  auto r = records_.WaitFor(5);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kLaunchFailed);
  EXPECT_EQ(r->message, "cannot run 'trian.py': No such file or directory");
}

TEST_F(ExecutorTest, UnusableDirectoryOrCpuIsALaunchFailure) {
  LaunchSpec no_dir = Spec(6, {"true"});
  no_dir.cwd = home_ + "/nowhere";
  LaunchSpec no_cpu = Spec(7, {"true"});
  no_cpu.cpus = {4000};
  ASSERT_TRUE(executor_->Launch(no_dir).ok());
  ASSERT_TRUE(executor_->Launch(no_cpu).ok());
  auto r6 = records_.WaitFor(6);
  auto r7 = records_.WaitFor(7);
  ASSERT_TRUE(r6 && r7);
  EXPECT_EQ(r6->how, ExitRecord::How::kLaunchFailed);
  EXPECT_EQ(r6->message, "cannot change to directory '" + home_ + "/nowhere': No such file or directory");
  EXPECT_EQ(r7->how, ExitRecord::How::kLaunchFailed);
  EXPECT_NE(r7->message.find("4000"), std::string::npos) << r7->message;
}

TEST_F(ExecutorTest, NonExecutableFileIsALaunchFailure) {
  std::string script = home_ + "/not-executable.sh";
  std::ofstream(script) << "#!/bin/sh\nexit 0\n";
  ASSERT_TRUE(executor_->Launch(Spec(8, {script})).ok());
  auto r = records_.WaitFor(8);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kLaunchFailed);
  EXPECT_EQ(r->message, "cannot run '" + script + "': Permission denied");
}

TEST_F(ExecutorTest, TimeLimitSendsTermThenKillAfterGrace) {
  LaunchSpec spec = Spec(10, {kTestdata + "/ignore_term.sh", AttemptDir(10)});
  spec.time_limit = 300;
  spec.grace = 400;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto r = records_.WaitFor(10);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kTimeLimit);
  EXPECT_EQ(r->signal, SIGKILL);
  EXPECT_GE(r->ended - r->started, 700);
  EXPECT_LT(r->ended - r->started, 5000);
  EXPECT_EQ(r->message, "stopped at its time limit of 300ms (SIGTERM, then SIGKILL after 400 ms)");
}

TEST_F(ExecutorTest, TimeLimitLetsAJobThatHonoursTermExitCleanly) {
  LaunchSpec spec = Spec(11, {kTestdata + "/checkpointer.sh", AttemptDir(11)});
  spec.time_limit = 300;
  spec.grace = 10000;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto r = records_.WaitFor(11);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kTimeLimit);
  EXPECT_EQ(r->code, 0);
  EXPECT_EQ(r->signal, 0);
  EXPECT_LT(r->ended - r->started, 5000);  // well before the grace ran out
  EXPECT_EQ(ReadFile(AttemptDir(11) + "/events"), "stopping\n");
}

TEST_F(ExecutorTest, Usr1ReachesTheJobAndTermStopsItGracefully) {
  LaunchSpec spec = Spec(12, {kTestdata + "/checkpointer.sh", AttemptDir(12)});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(AttemptDir(12) + "/ready"); }));
  ASSERT_TRUE(executor_->Signal(12, 1, SIGUSR1).ok());
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(AttemptDir(12) + "/events") == "checkpoint\n"; }));
  ASSERT_TRUE(executor_->Signal(12, 1, SIGTERM).ok());
  auto r = records_.WaitFor(12);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kStopped);
  EXPECT_EQ(r->code, 0);
  EXPECT_EQ(r->message, "stopped on request (SIGTERM; it exited with code 0)");
  EXPECT_EQ(ReadFile(AttemptDir(12) + "/events"), "checkpoint\nstopping\n");
}

TEST_F(ExecutorTest, StopEscalatesToKillAfterGrace) {
  LaunchSpec spec = Spec(13, {kTestdata + "/ignore_term.sh", AttemptDir(13)});
  spec.grace = 300;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(AttemptDir(13) + "/ready"); }));
  auto asked = std::chrono::steady_clock::now();
  ASSERT_TRUE(executor_->Signal(13, 1, SIGTERM).ok());
  auto r = records_.WaitFor(13);
  ASSERT_TRUE(r);
  EXPECT_GE(std::chrono::steady_clock::now() - asked, milliseconds(300));
  EXPECT_EQ(r->how, ExitRecord::How::kStopped);
  EXPECT_EQ(r->signal, SIGKILL);
}

TEST_F(ExecutorTest, OnlyCheckpointAndStopSignalsAreAccepted) {
  EXPECT_EQ(executor_->Signal(14, 1, SIGKILL).code(), Code::kInvalidArgument);
  EXPECT_EQ(executor_->Signal(14, 1, SIGTERM).code(), Code::kNotFound);
}

TEST_F(ExecutorTest, BadSpecsAreRefusedBeforeAnythingRuns) {
  EXPECT_EQ(executor_->Launch(Spec(15, {})).status().code(), Code::kInvalidArgument);
  LaunchSpec relative = Spec(15, {"true"});
  relative.record_dir = "run/jobs/15/1";
  EXPECT_EQ(executor_->Launch(relative).status().code(), Code::kInvalidArgument);
  LaunchSpec negative = Spec(15, {"true"});
  negative.time_limit = -1;
  EXPECT_EQ(executor_->Launch(negative).status().code(), Code::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(AttemptDir(15)));
}

TEST_F(ExecutorTest, TheWholeProcessGroupEndsWithTheJob) {
  ASSERT_TRUE(executor_->Launch(Spec(16, {kTestdata + "/spawn_children.sh", AttemptDir(16)})).ok());
  auto r = records_.WaitFor(16);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->code, 3);
  std::istringstream children(ReadFile(AttemptDir(16) + "/children"));
  int pid, n = 0;
  while (children >> pid) {
    ++n;
    EXPECT_TRUE(WaitUntil([&] { return Gone(pid); }, seconds(2))) << "child " << pid << " outlived its job";
  }
  EXPECT_EQ(n, 2);
}

TEST_F(ExecutorTest, StoppedJobTakesItsChildrenAlong) {
  LaunchSpec spec = Spec(17, {"sh", "-c", "sleep 1000 & echo $! > children; touch ready; wait"});
  spec.cwd = home_;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(home_ + "/ready"); }));
  int child = std::stoi(ReadFile(home_ + "/children"));
  ASSERT_TRUE(executor_->Signal(17, 1, SIGTERM).ok());
  auto r = records_.WaitFor(17);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kStopped);
  EXPECT_TRUE(WaitUntil([&] { return Gone(child); }, seconds(2)));
}

TEST_F(ExecutorTest, RunningJobIsReadoptedAfterTheExecutorGoesAway) {
  ASSERT_TRUE(executor_->Launch(Spec(20, {kTestdata + "/wait_for_go.sh", AttemptDir(20)})).ok());
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(AttemptDir(20) + "/pid"); }));
  int job_pid = std::stoi(ReadFile(AttemptDir(20) + "/pid"));
  // What a daemon crash leaves behind: no watcher, no launcher.
  executor_->Shutdown();
  executor_.reset();
  EXPECT_FALSE(Gone(job_pid));

  Records second;
  auto executor = StartExecutor(&second);
  ASSERT_TRUE(executor);
  ASSERT_TRUE(executor->Adopt(20, 1, RecordDir(20)).ok());
  EXPECT_TRUE(executor->Adopt(20, 1, RecordDir(20)).ok());  // again: nothing new
  // The re-adopted shim still forwards signals to its job.
  ASSERT_TRUE(executor->Signal(20, 1, SIGUSR1).ok());
  EXPECT_TRUE(WaitUntil([&] { return ReadFile(AttemptDir(20) + "/events") == "usr1\n"; }));
  std::ofstream(AttemptDir(20) + "/go") << "";
  auto r = second.WaitFor(20);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kExited);
  EXPECT_EQ(r->code, 7);
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(second.size(), 1u);
  EXPECT_EQ(records_.size(), 0u);  // the first executor delivered nothing after its shutdown
  executor->Shutdown();
}

TEST_F(ExecutorTest, FinishedJobsRecordIsDeliveredOnAdopt) {
  ASSERT_TRUE(executor_->Launch(Spec(21, {kTestdata + "/exit_with.sh", "4"})).ok());
  ASSERT_TRUE(records_.WaitFor(21));
  executor_->Shutdown();
  executor_.reset();
  Records second;
  auto executor = StartExecutor(&second);
  ASSERT_TRUE(executor);
  ASSERT_TRUE(executor->Adopt(21, 1, RecordDir(21)).ok());
  auto r = second.WaitFor(21);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kExited);
  EXPECT_EQ(r->code, 4);
}

TEST_F(ExecutorTest, AttemptThatNeverStartedIsLostOnAdopt) {
  std::filesystem::create_directories(RecordDir(22));
  ASSERT_TRUE(executor_->Adopt(22, 1, RecordDir(22)).ok());
  auto r = records_.WaitFor(22);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kShimLost);
}

TEST_F(ExecutorTest, KilledShimIsReportedLostAndItsJobDoesNotRunOn) {
  int shim = 0;
  {
    auto launched = executor_->Launch(Spec(23, {kTestdata + "/wait_for_go.sh", AttemptDir(23)}));
    ASSERT_TRUE(launched.ok());
    shim = *launched;
  }
  ASSERT_TRUE(WaitUntil([&] { return std::filesystem::exists(AttemptDir(23) + "/pid"); }));
  int job_pid = std::stoi(ReadFile(AttemptDir(23) + "/pid"));
  ASSERT_EQ(kill(shim, SIGKILL), 0);
  auto r = records_.WaitFor(23);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kShimLost);
  EXPECT_NE(r->message.find("leftover"), std::string::npos) << r->message;
  EXPECT_TRUE(WaitUntil([&] { return Gone(job_pid); }, seconds(2)));
}

// The job's user owns its folder and plants, where the next attempt's files
// go, a link to a root-only file and a FIFO. The job's process, already the
// user, refuses both: the root file keeps its bytes, mode and owner, and
// the launch fails saying what was in the way.
TEST_F(ExecutorTest, WhatAUserPlantsInTheOutputFolderLeadsNowhere) {
  if (geteuid() != 0) GTEST_SKIP() << "a job of another user needs root";
  const std::string victim = home_ + "/victim";
  std::ofstream(victim) << "root only\n";
  chmod(victim.c_str(), 0600);
  const std::string job = home_ + "/jobs/25";
  std::filesystem::create_directories(AttemptDir(25));
  std::filesystem::create_symlink(victim, AttemptDir(25) + "/stdout");
  ASSERT_EQ(mkfifo((AttemptDir(25) + "/stderr").c_str(), 0666), 0);
  ASSERT_EQ(chmod((AttemptDir(25) + "/stderr").c_str(), 0666), 0);  // the user may open it
  for (const std::string& d : {job, AttemptDir(25)}) ASSERT_EQ(chown(d.c_str(), 65534, 65534), 0);
  LaunchSpec spec = Spec(25, {"sh", "-c", "echo ran"});
  spec.uid = 65534;
  spec.gid = 65534;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto r = records_.WaitFor(25);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->how, ExitRecord::How::kLaunchFailed);
  EXPECT_NE(r->message.find("a symbolic link is in the way"), std::string::npos) << r->message;
  EXPECT_EQ(ReadFile(victim), "root only\n");
  struct stat st {};
  ASSERT_EQ(stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The FIFO is not waited on either: stdout is fixed, stderr is in the way.
  std::filesystem::remove(AttemptDir(25) + "/stdout");
  spec.attempt = 2;
  spec.record_dir = RecordDir(25, 2);
  spec.output_dir = AttemptDir(25);  // the same folder, as a user could arrange
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto second = records_.WaitFor(25, 2);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->how, ExitRecord::How::kLaunchFailed);
  EXPECT_NE(second->message.find("not a regular file"), std::string::npos) << second->message;
}

// The daemon raises its own open-files limit for connections; the job gets
// the one it asked for back, never above the hard limit.
TEST_F(ExecutorTest, TheJobGetsItsOwnOpenFilesLimit) {
  LaunchSpec spec = Spec(26, {"sh", "-c", "ulimit -Sn"});
  spec.open_files = 512;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto r = records_.WaitFor(26);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->code, 0) << r->message;
  EXPECT_EQ(ReadFile(StdoutPath(AttemptDir(26))), "512\n");
}

TEST_F(ExecutorTest, RunsAsTheGivenUserWhenRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  LaunchSpec spec = Spec(24, {kTestdata + "/report.sh"});
  spec.uid = 65534;
  spec.gid = 65534;
  spec.cwd = "/";
  ASSERT_EQ(chown((home_ + "/jobs/24").c_str(), 65534, 65534), 0);  // as the daemon hands it over
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto r = records_.WaitFor(24);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->code, 0) << r->message << ReadFile(StderrPath(AttemptDir(24)));
  EXPECT_NE(ReadFile(StdoutPath(AttemptDir(24))).find("uid=65534 gid=65534\n"), std::string::npos);
  struct stat st;
  ASSERT_EQ(stat(StdoutPath(AttemptDir(24)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);  // the user can read their own logs
}

TEST_F(ExecutorTest, LauncherKilledMidRunLosesNoJobAndRunsNoneTwice) {
  constexpr int kJobs = 300;
  constexpr int kKillEvery = 20;  // launches between two SIGKILLs of the launcher
  std::atomic<int> launched{0};
  std::atomic<bool> done{false};
  std::atomic<int> kills{0};
  // Kills whichever launcher is current after every kKillEvery launches, so
  // the kill lands at a random point of a launch (or between two). Counted
  // from the kill, not from the last mark: a killer woken late (a loaded
  // machine) must not kill twice in a row, and so the replacement during its
  // own start or its first launch, which no single fault does.
  std::thread killer([&] {
    int next = kKillEvery;
    while (!done) {
      if (launched >= next) {
        for (int pid : LauncherPids()) kills += kill(pid, SIGKILL) == 0;
        next = launched + kKillEvery;
      }
      std::this_thread::sleep_for(milliseconds(1));
    }
  });
  std::vector<std::string> errors;
  for (int i = 0; i < kJobs; ++i) {
    // Each run of the job leaves one line, so a second run would show.
    auto pid = executor_->Launch(Spec(3000 + i, {"sh", "-c", "echo ran >> ../ran"}));
    if (!pid.ok()) errors.push_back(pid.status().ToString());
    ++launched;
  }
  done = true;
  killer.join();
  EXPECT_TRUE(errors.empty()) << errors.size() << " launches failed, the first: " << errors.front();
  EXPECT_GE(kills, kJobs / kKillEvery / 3);  // fewer when the killer wakes late
  EXPECT_GE(executor_->launcher_restarts(), kills - 1);  // the last kill may come after the last launch
  ASSERT_TRUE(records_.WaitForCount(kJobs, seconds(120)));
  std::this_thread::sleep_for(milliseconds(200));
  for (const auto& [key, count] : records_.counts()) EXPECT_EQ(count, 1) << "job " << key.first;
  int lost = 0;
  for (int i = 0; i < kJobs; ++i) {
    auto r = records_.WaitFor(3000 + i);
    ASSERT_TRUE(r);
    std::string ran = ReadFile(home_ + "/jobs/" + std::to_string(3000 + i) + "/ran");
    if (r->how == ExitRecord::How::kShimLost) {
      // Killed in the instant between recording the shim and letting it
      // start: reported lost (the daemon requeues it), and it never ran.
      ++lost;
      EXPECT_EQ(ran, "") << "job " << 3000 + i;
      continue;
    }
    EXPECT_EQ(r->how, ExitRecord::How::kExited) << "job " << 3000 + i << ": " << r->message;
    EXPECT_EQ(r->code, 0) << "job " << 3000 + i << ": " << r->message;
    EXPECT_EQ(ran, "ran\n") << "job " << 3000 + i;
  }
  EXPECT_LE(lost, kills.load());
}

TEST_F(ExecutorTest, ThousandTrueJobsAreEachDeliveredExactlyOnce) {
  constexpr int kJobs = 1000;
  auto begin = std::chrono::steady_clock::now();
  for (int i = 0; i < kJobs; ++i) {
    auto pid = executor_->Launch(Spec(1000 + i, {"true"}));
    ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  }
  auto launched = std::chrono::steady_clock::now();
  ASSERT_TRUE(records_.WaitForCount(kJobs, seconds(120)));
  auto done = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(200));
  auto counts = records_.counts();
  ASSERT_EQ(counts.size(), static_cast<size_t>(kJobs));
  for (const auto& [key, count] : counts) EXPECT_EQ(count, 1) << "job " << key.first;
  for (int i = 0; i < kJobs; i += 97) {
    auto r = records_.WaitFor(1000 + i);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->how, ExitRecord::How::kExited);
    EXPECT_EQ(r->code, 0);
  }
  double launch_us = std::chrono::duration<double, std::micro>(launched - begin).count() / kJobs;
  double total_s = std::chrono::duration<double>(done - begin).count();
  std::printf("[ rate     ] %d true jobs: %.0f us per Launch call, all exits delivered in %.2f s (%.0f jobs/s)\n",
              kJobs, launch_us, total_s, kJobs / total_s);
}

}  // namespace
}  // namespace gpuherd::exec
