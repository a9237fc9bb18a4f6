// Containment with real processes: a job that escapes its process group
// (setsid) is still ended on a stop and at its time limit, in its control
// group (cgroup v1 here; root only) and through the shim's subreaper where
// no control group can be written; --mem and --cpus are enforced.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "exec/executor.h"
#include "host/cgroups.h"

namespace gpuherd::exec {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

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
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// Live (not zombie) processes whose environment holds `marker`.
std::vector<int> ProcessesWithMarker(const std::string& marker) {
  std::vector<int> pids;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadFile(entry.path().string() + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] == 'Z') continue;
    std::string environ = ReadFile(entry.path().string() + "/environ");
    if (environ.find(marker) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

// The session of a process (field 6 of /proc/<pid>/stat).
int SessionOf(int pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(stat.substr(paren + 2));
  std::string state;
  int ppid = 0, pgrp = 0, session = -1;
  rest >> state >> ppid >> pgrp >> session;
  return session;
}

class Records {
 public:
  void Add(ExitRecord r) {
    std::lock_guard lock(mu_);
    records_.push_back(std::move(r));
    cv_.notify_all();
  }
  std::optional<ExitRecord> WaitFor(int64_t job_id, milliseconds timeout = seconds(30)) {
    std::unique_lock lock(mu_);
    std::optional<ExitRecord> found;
    cv_.wait_for(lock, timeout, [&] {
      for (const auto& r : records_) {
        if (r.job_id == job_id) found = r;
      }
      return found.has_value();
    });
    return found;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<ExitRecord> records_;
};

// Which containment a test asks for.
enum class Mode { kCgroupV1, kSubreaper };

class ContainmentTest : public testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-contain-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    home_ = tmpl;
    parent_ = "gpuherd/test-exec-" + std::to_string(getpid());
    ExecutorOptions options;
    if (GetParam() == Mode::kCgroupV1) {
      if (geteuid() != 0) GTEST_SKIP() << "needs root to create control groups under /sys/fs/cgroup";
      options.cgroup_mount = "/sys/fs/cgroup";
    } else {
      options.cgroup_mount = home_ + "/no-cgroup-fs";  // absent: the fallback
    }
    options.cgroup_parent = parent_;
    auto executor = Executor::Start(options, [this](ExitRecord r) { records_.Add(std::move(r)); });
    ASSERT_TRUE(executor.ok()) << executor.status().ToString();
    executor_ = std::move(executor).value();
    if (GetParam() == Mode::kCgroupV1 && executor_->cgroups().version() != host::CgroupVersion::kV1) {
      GTEST_SKIP() << "this machine has no writable cgroup v1 hierarchies: " << executor_->containment();
    }
    marker_ = "GPUHERD_CONTAINMENT_MARK=" + std::to_string(getpid()) + "-" +
              testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : marker_) {
      if (c == '/') c = '_';
    }
  }
  void TearDown() override {
    for (int pid : ProcessesWithMarker(marker_)) kill(pid, SIGKILL);  // a failed test leaves none behind
    if (executor_) executor_->Shutdown();
    // Every job group is gone, so the executor removed its parent group too.
    if (executor_ && executor_->cgroups().version() == host::CgroupVersion::kV1) {
      EXPECT_FALSE(fs::exists("/sys/fs/cgroup/freezer/" + parent_));
    }
    fs::remove_all(home_);
    for (const char* c : {"memory", "cpu", "pids", "freezer"}) {
      rmdir(("/sys/fs/cgroup/" + std::string(c) + "/" + parent_).c_str());
    }
  }

  LaunchSpec Spec(int64_t id, std::vector<std::string> argv) {
    LaunchSpec spec;
    spec.job_id = id;
    spec.attempt = 1;
    spec.argv = std::move(argv);
    spec.record_dir = home_ + "/run/jobs/" + std::to_string(id) + "/1";
    spec.output_dir = home_ + "/jobs/" + std::to_string(id) + "/1";
    fs::create_directories(home_ + "/jobs/" + std::to_string(id));
    fs::create_directories(home_ + "/run/jobs");
    chmod((home_ + "/run").c_str(), 0700);
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    size_t eq = marker_.find('=');
    spec.env[marker_.substr(0, eq)] = marker_.substr(eq + 1);
    spec.grace = 200;
    return spec;
  }

  // Starts a job whose child leaves the session and sleeps, and waits until
  // the escaped process runs; returns its pid.
  int LaunchEscaping(LaunchSpec spec) {
    Result<int> shim = executor_->Launch(spec);
    EXPECT_TRUE(shim.ok()) << shim.status().ToString();
    int escaped = -1;
    EXPECT_TRUE(WaitUntil([&] {
      for (int pid : ProcessesWithMarker(marker_)) {
        if (ReadFile("/proc/" + std::to_string(pid) + "/cmdline").rfind("sleep", 0) == 0 &&
            SessionOf(pid) == pid) {
          escaped = pid;
        }
      }
      return escaped > 0;
    })) << "the job's setsid sleep never started; stderr: " << ReadFile(spec.output_dir + "/stderr");
    return escaped;
  }

  std::string home_, parent_, marker_;
  Records records_;
  std::unique_ptr<Executor> executor_;
};

const std::vector<std::string> kEscapes = {"/bin/sh", "-c", "setsid sleep 1000 & wait"};

TEST_P(ContainmentTest, StopEndsAProcessThatLeftTheSession) {
  int escaped = LaunchEscaping(Spec(1, kEscapes));
  ASSERT_GT(escaped, 0);
  ASSERT_TRUE(executor_->Signal(1, 1, SIGTERM).ok());
  auto record = records_.WaitFor(1);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->how, ExitRecord::How::kStopped) << record->message;
  EXPECT_EQ(record->message.find("containment:"), std::string::npos) << record->message;
  EXPECT_TRUE(WaitUntil([&] { return ProcessesWithMarker(marker_).empty(); }, seconds(2)))
      << "left running: " << testing::PrintToString(ProcessesWithMarker(marker_));
  if (GetParam() == Mode::kCgroupV1) {
    // The shim removed the group before it recorded the end.
    for (const auto& dir : executor_->cgroups().Child("job-1-1").Dirs()) EXPECT_FALSE(fs::exists(dir)) << dir;
  }
}

TEST_P(ContainmentTest, TimeLimitEndsAProcessThatLeftTheSession) {
  LaunchSpec spec = Spec(2, kEscapes);
  spec.time_limit = 700;
  int escaped = LaunchEscaping(spec);
  ASSERT_GT(escaped, 0);
  auto record = records_.WaitFor(2);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->how, ExitRecord::How::kTimeLimit) << record->message;
  EXPECT_TRUE(WaitUntil([&] { return ProcessesWithMarker(marker_).empty(); }, seconds(2)))
      << "left running: " << testing::PrintToString(ProcessesWithMarker(marker_));
}

TEST_P(ContainmentTest, MainProcessExitEndsWhatItLeftBehind) {
  // The main process exits at once; its double-forked child would outlive it.
  LaunchSpec spec = Spec(3, {"/bin/sh", "-c", "(setsid sleep 1000 &) ; sleep 0.3; exit 3"});
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto record = records_.WaitFor(3);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->how, ExitRecord::How::kExited);
  EXPECT_EQ(record->code, 3);
  EXPECT_TRUE(WaitUntil([&] { return ProcessesWithMarker(marker_).empty(); }, seconds(2)))
      << "left running: " << testing::PrintToString(ProcessesWithMarker(marker_));
}

INSTANTIATE_TEST_SUITE_P(Modes, ContainmentTest, testing::Values(Mode::kCgroupV1, Mode::kSubreaper),
                         [](const testing::TestParamInfo<Mode>& info) {
                           return info.param == Mode::kCgroupV1 ? "CgroupV1" : "Subreaper";
                         });

using CgroupLimitTest = ContainmentTest;

TEST_P(CgroupLimitTest, MemoryLimitOomKillsAndTheEndSaysSo) {
  LaunchSpec spec = Spec(4, {"/usr/bin/python3", "-c", "b = bytearray(b'x') * (200 << 20)\nprint('survived')"});
  spec.limits.memory_bytes = 64 << 20;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  auto record = records_.WaitFor(4);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->how, ExitRecord::How::kSignaled) << record->message;
  EXPECT_EQ(record->signal, SIGKILL);
  EXPECT_TRUE(record->out_of_memory);
  EXPECT_NE(record->message.find("out of memory"), std::string::npos) << record->message;
  EXPECT_NE(record->message.find("--mem 64 MiB"), std::string::npos) << record->message;
  EXPECT_EQ(ReadFile(spec.output_dir + "/stdout"), "");
}

TEST_P(CgroupLimitTest, CpuAndMemoryLimitsAreSetOnTheJobsGroup) {
  LaunchSpec spec = Spec(5, {"/bin/sh", "-c", "cat /proc/self/cgroup; exec sleep 1000"});
  spec.limits.cpus = 1;
  spec.limits.memory_bytes = 512 << 20;
  ASSERT_TRUE(executor_->Launch(spec).ok());
  host::Cgroup group = executor_->cgroups().Child("job-5-1");
  // Once the job has printed its groups it is in them (and sleeps on).
  ASSERT_TRUE(WaitUntil([&] { return ReadFile(spec.output_dir + "/stdout").find("freezer:") != std::string::npos; }))
      << ReadFile(spec.output_dir + "/stderr");
  EXPECT_FALSE(host::CgroupPids(group).empty());
  EXPECT_EQ(ReadFile(group.v1.at("cpu") + "/cpu.cfs_quota_us"), "100000\n");
  EXPECT_EQ(ReadFile(group.v1.at("cpu") + "/cpu.cfs_period_us"), "100000\n");
  EXPECT_EQ(ReadFile(group.v1.at("memory") + "/memory.limit_in_bytes"), std::to_string(512 << 20) + "\n");
  ASSERT_TRUE(executor_->Signal(5, 1, SIGTERM).ok());
  ASSERT_TRUE(records_.WaitFor(5).has_value());
  // The job saw itself in its group in every hierarchy.
  std::string seen = ReadFile(spec.output_dir + "/stdout");
  for (const char* c : {"memory", "cpu", "pids", "freezer"}) {
    EXPECT_NE(seen.find(std::string(c) + ":/" + parent_ + "/job-5-1"), std::string::npos) << c << " in\n" << seen;
  }
}

TEST_P(CgroupLimitTest, AJobRunAsAnotherUserJoinsBeforeItDropsRoot) {
  chmod(home_.c_str(), 0755);  // nobody enters its attempt directory
  LaunchSpec spec = Spec(6, kEscapes);
  spec.uid = 65534;
  spec.gid = 65534;
  ASSERT_EQ(chown((home_ + "/jobs/6").c_str(), 65534, 65534), 0);  // as the daemon hands it over
  int escaped = LaunchEscaping(spec);
  ASSERT_GT(escaped, 0);
  EXPECT_NE(ReadFile("/proc/" + std::to_string(escaped) + "/status").find("Uid:\t65534"), std::string::npos);
  std::vector<pid_t> in_group = host::CgroupPids(executor_->cgroups().Child("job-6-1"));
  EXPECT_NE(std::find(in_group.begin(), in_group.end(), escaped), in_group.end());
  ASSERT_TRUE(executor_->Signal(6, 1, SIGTERM).ok());
  auto record = records_.WaitFor(6);
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->how, ExitRecord::How::kStopped) << record->message;
  EXPECT_TRUE(WaitUntil([&] { return ProcessesWithMarker(marker_).empty(); }, seconds(2)));
}

TEST_P(CgroupLimitTest, StaleGroupsOfEndedJobsAreRemoved) {
  host::Cgroup stale = executor_->cgroups().Child("job-77-1");
  ASSERT_TRUE(host::CreateCgroup(stale, {}).ok());
  pid_t orphan = fork();
  if (orphan == 0) {
    while (true) pause();
  }
  ASSERT_TRUE(host::JoinCgroup(stale, orphan).ok());
  EXPECT_EQ(executor_->RemoveStaleCgroups(), 1);
  int status = 0;
  ASSERT_EQ(waitpid(orphan, &status, 0), orphan);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  for (const auto& dir : stale.Dirs()) EXPECT_FALSE(fs::exists(dir)) << dir;
}

INSTANTIATE_TEST_SUITE_P(Cgroup, CgroupLimitTest, testing::Values(Mode::kCgroupV1),
                         [](const testing::TestParamInfo<Mode>&) { return "CgroupV1"; });

TEST(ContainmentDescribeTest, SaysWhenThereIsNoControlGroup) {
  ExecutorOptions options;
  options.cgroup_mount = "/nonexistent-cgroup-root";
  auto executor = Executor::Start(options, [](ExitRecord) {});
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ((*executor)->containment(), "none (no cgroup file system at /nonexistent-cgroup-root), subreaper only");
  (*executor)->Shutdown();
}

TEST(ContainmentDescribeTest, ParentGroupIsPerHome) {
  EXPECT_EQ(CgroupParentFor("/var/lib/gpuherd"), CgroupParentFor("/var/lib/gpuherd"));
  EXPECT_NE(CgroupParentFor("/var/lib/gpuherd"), CgroupParentFor("/tmp/h"));
  EXPECT_EQ(CgroupParentFor("/tmp/h").rfind("gpuherd/home-", 0), 0u);
  EXPECT_EQ(CgroupParentFor("/tmp/h").size(), std::string("gpuherd/home-").size() + 8);
}

}  // namespace
}  // namespace gpuherd::exec
