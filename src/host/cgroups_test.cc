#include "host/cgroups.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "host/process_tree.h"

namespace gpuherd::host {
namespace {

namespace fs = std::filesystem;

std::string Read(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A child that sleeps until killed; the caller reaps it.
pid_t SleepingChild() {
  pid_t pid = fork();
  if (pid == 0) {
    while (true) pause();
  }
  return pid;
}

class CgroupFixtureTest : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpuherd_cgroups_test_" + std::to_string(getpid()));
    mount_ = root_ / "sys/fs/cgroup";
    fs::create_directories(mount_);
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_, mount_;
};

// A v2 tree as the kernel shows it, with the parent's files in place (mkdir
// in a fixture creates no files).
void MakeV2Tree(const fs::path& mount) {
  Write(mount / "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  Write(mount / "cgroup.subtree_control", "cpu memory pids\n");
  Write(mount / "cgroup.procs", "1\n");
  for (const fs::path& dir : {mount / "gpuherd", mount / "gpuherd/home-x"}) {
    Write(dir / "cgroup.subtree_control", "cpu memory pids\n");
    Write(dir / "cgroup.procs", "");
    Write(dir / "cgroup.kill", "");
  }
}

TEST_F(CgroupFixtureTest, DetectsV2AndDelegatesControllers) {
  MakeV2Tree(mount_);
  Cgroups cgroups = Cgroups::Open(mount_.string(), "gpuherd/home-x");
  ASSERT_EQ(cgroups.version(), CgroupVersion::kV2) << cgroups.Describe();
  EXPECT_EQ(cgroups.controllers(), (std::vector<std::string>{"memory", "cpu", "pids"}));
  EXPECT_EQ(cgroups.Describe(), "cgroup v2 (memory, cpu, pids) under " + (mount_ / "gpuherd/home-x").string());
  // Each level enables the controllers for the next, one write per controller.
  EXPECT_EQ(Read(mount_ / "gpuherd/cgroup.subtree_control"), "cpu memory pids\n+memory+cpu+pids");
  EXPECT_NE(Read(mount_ / "cgroup.subtree_control").find("+memory"), std::string::npos);
  Cgroup job = cgroups.Child(JobCgroupName(7, 2));
  EXPECT_EQ(job.unified, (mount_ / "gpuherd/home-x/job-7-2").string());
  EXPECT_TRUE(job.v1.empty());
}

TEST_F(CgroupFixtureTest, WritesV2LimitsKillsAndCountsOomKills) {
  MakeV2Tree(mount_);
  Cgroups cgroups = Cgroups::Open(mount_.string(), "gpuherd/home-x");
  Cgroup job = cgroups.Child("job-1-1");
  fs::path dir = job.unified;
  for (const char* file : {"memory.max", "memory.swap.max", "cpu.max", "cgroup.procs", "cgroup.kill"}) {
    Write(dir / file, "");
  }
  Write(dir / "cgroup.events", "populated 0\nfrozen 0\n");
  Write(dir / "memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n");
  ASSERT_TRUE(CreateCgroup(job, {64 << 20, 2}).ok());
  EXPECT_EQ(Read(dir / "memory.max"), "67108864");
  EXPECT_EQ(Read(dir / "memory.swap.max"), "0");
  EXPECT_EQ(Read(dir / "cpu.max"), "200000 100000");
  EXPECT_TRUE(CgroupIsEmpty(job));
  ASSERT_TRUE(KillCgroup(job, std::chrono::seconds(1)).ok());
  EXPECT_EQ(Read(dir / "cgroup.kill"), "1");
  EXPECT_EQ(CgroupOomKills(job), 2);
  Write(dir / "cgroup.events", "populated 1\nfrozen 0\n");
  EXPECT_FALSE(CgroupIsEmpty(job));
}

TEST_F(CgroupFixtureTest, V2WithoutCgroupKillFreezesKillsEachAndThaws) {
  MakeV2Tree(mount_);
  Cgroups cgroups = Cgroups::Open(mount_.string(), "gpuherd/home-x");
  Cgroup job = cgroups.Child("job-1-1");
  fs::path dir = job.unified;
  pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  Write(dir / "cgroup.procs", std::to_string(child) + "\n");
  Write(dir / "cgroup.freeze", "");
  Write(dir / "cgroup.events", "populated 0\nfrozen 1\n");  // a fixture cannot change as the kernel's does
  ASSERT_TRUE(KillCgroup(job, std::chrono::seconds(2)).ok());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(Read(dir / "cgroup.freeze"), "10");  // frozen, then thawed
}

TEST_F(CgroupFixtureTest, DetectsV1HierarchiesAndWritesV1Limits) {
  for (const char* c : {"memory", "cpu", "pids", "freezer", "cpuset"}) Write(mount_ / c / "cgroup.procs", "");
  Write(mount_ / "unified/cgroup.procs", "");  // a hybrid layout's empty v2 is not used
  Cgroups cgroups = Cgroups::Open(mount_.string(), "gpuherd/home-y");
  ASSERT_EQ(cgroups.version(), CgroupVersion::kV1) << cgroups.Describe();
  EXPECT_EQ(cgroups.Describe(),
            "cgroup v1 (memory, cpu, pids, freezer) under " + (mount_ / "*/gpuherd/home-y").string());
  EXPECT_TRUE(fs::is_directory(mount_ / "freezer/gpuherd/home-y"));
  Cgroup job = cgroups.Child("job-3-1");
  ASSERT_EQ(job.v1.size(), 4u);
  EXPECT_EQ(job.v1.at("memory"), (mount_ / "memory/gpuherd/home-y/job-3-1").string());
  for (const char* f : {"memory/gpuherd/home-y/job-3-1/memory.limit_in_bytes",
                        "memory/gpuherd/home-y/job-3-1/memory.memsw.limit_in_bytes",
                        "cpu/gpuherd/home-y/job-3-1/cpu.cfs_period_us", "cpu/gpuherd/home-y/job-3-1/cpu.cfs_quota_us"}) {
    Write(mount_ / f, "");
  }
  Write(mount_ / "memory/gpuherd/home-y/job-3-1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
  ASSERT_TRUE(CreateCgroup(job, {256 << 20, 3}).ok());
  EXPECT_EQ(Read(mount_ / "memory/gpuherd/home-y/job-3-1/memory.limit_in_bytes"), "268435456");
  EXPECT_EQ(Read(mount_ / "memory/gpuherd/home-y/job-3-1/memory.memsw.limit_in_bytes"), "268435456");
  EXPECT_EQ(Read(mount_ / "cpu/gpuherd/home-y/job-3-1/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read(mount_ / "cpu/gpuherd/home-y/job-3-1/cpu.cfs_quota_us"), "300000");
  EXPECT_EQ(CgroupOomKills(job), 1);
  EXPECT_EQ(cgroups.ListChildren(), (std::vector<std::string>{"job-3-1"}));
}

TEST_F(CgroupFixtureTest, SaysWhyThereIsNoContainment) {
  Cgroups absent = Cgroups::Open((root_ / "nowhere").string(), "gpuherd/h");
  EXPECT_EQ(absent.version(), CgroupVersion::kNone);
  EXPECT_EQ(absent.Describe(), "none (no cgroup file system at " + (root_ / "nowhere").string() + "), subreaper only");
  Cgroups empty = Cgroups::Open(mount_.string(), "gpuherd/h");
  EXPECT_EQ(empty.version(), CgroupVersion::kNone);
  EXPECT_NE(empty.Describe().find("no cgroup v1 hierarchy"), std::string::npos) << empty.Describe();
  // A hierarchy where the parent cannot be made: a file stands in its way.
  Write(mount_ / "memory/cgroup.procs", "");
  Write(mount_ / "memory/gpuherd", "not a directory");
  Cgroups blocked = Cgroups::Open(mount_.string(), "gpuherd/h");
  EXPECT_EQ(blocked.version(), CgroupVersion::kNone);
  EXPECT_NE(blocked.Describe().find("cannot create " + (mount_ / "memory/gpuherd").string()), std::string::npos)
      << blocked.Describe();
  EXPECT_EQ(Cgroups::Open("", "gpuherd").Describe(), "none (not asked for), subreaper only");
  EXPECT_EQ(Cgroups::Open(mount_.string(), "../etc").version(), CgroupVersion::kNone);
  EXPECT_TRUE(absent.Child("job-1-1").empty());
}

TEST(CgroupNameTest, RoundTripsAndRefusesOthers) {
  int64_t job = 0;
  int attempt = 0;
  EXPECT_EQ(JobCgroupName(42, 3), "job-42-3");
  ASSERT_TRUE(ParseJobCgroupName("job-42-3", &job, &attempt));
  EXPECT_EQ(job, 42);
  EXPECT_EQ(attempt, 3);
  for (const char* bad : {"job-42", "job--3", "job-4x-3", "jobs-1-1", "job-1-", "job-1-99999999999", "home-1"}) {
    EXPECT_FALSE(ParseJobCgroupName(bad, &job, &attempt)) << bad;
  }
}

TEST(ProcessTreeTest, FindsLiveDescendantsOnly) {
  std::vector<ProcessEntry> processes = {
      {1, 0, 'S'}, {10, 1, 'S'}, {11, 10, 'S'}, {12, 11, 'R'}, {13, 10, 'Z'}, {14, 13, 'S'}, {20, 1, 'S'}};
  std::vector<pid_t> found = LiveDescendants(processes, 10);
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, (std::vector<pid_t>{11, 12, 14}));
  EXPECT_TRUE(LiveDescendants(processes, 20).empty());
}

TEST(ProcessTreeTest, ReadsThisProcessesChildren) {
  pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  std::vector<pid_t> found = LiveDescendants(ListProcesses(), getpid());
  EXPECT_NE(std::find(found.begin(), found.end(), child), found.end());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// The real v1 hierarchies of this machine: root only.
TEST(CgroupV1Test, RealProcessJoinsIsKilledAndGroupRemoved) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create control groups under /sys/fs/cgroup";
  const std::string parent = "gpuherd/test-host-" + std::to_string(getpid());
  Cgroups cgroups = Cgroups::Open("/sys/fs/cgroup", parent);
  if (cgroups.version() != CgroupVersion::kV1) {
    GTEST_SKIP() << "this test exercises cgroup v1; here: " << cgroups.Describe();
  }
  Cgroup job = cgroups.Child("job-1-1");
  ASSERT_TRUE(CreateCgroup(job, {128 << 20, 1}).ok());
  pid_t child = SleepingChild();
  ASSERT_GT(child, 0);
  ASSERT_TRUE(JoinCgroup(job, child).ok());
  EXPECT_EQ(CgroupPids(job), (std::vector<pid_t>{child}));
  EXPECT_FALSE(CgroupIsEmpty(job));
  EXPECT_EQ(Read(job.v1.at("cpu") + "/cpu.cfs_quota_us"), "100000\n");
  EXPECT_EQ(Read(job.v1.at("memory") + "/memory.limit_in_bytes"), std::to_string(128 << 20) + "\n");
  ASSERT_TRUE(KillCgroup(job, std::chrono::seconds(5)).ok());
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(CgroupIsEmpty(job));
  EXPECT_EQ(Read(job.v1.at("freezer") + "/freezer.state"), "THAWED\n");
  ASSERT_TRUE(RemoveCgroup(job).ok());
  for (const auto& dir : job.Dirs()) EXPECT_FALSE(fs::exists(dir)) << dir;
  EXPECT_TRUE(cgroups.RemoveParentIfEmpty());
  EXPECT_FALSE(fs::exists("/sys/fs/cgroup/freezer/" + parent));
}

}  // namespace
}  // namespace gpuherd::host

namespace gpuherd::host {
namespace {

// A daemon that stops cleanly leaves nothing: its home's group and, when it
// was the last daemon, the folder all homes' groups share.
TEST(CgroupV1Test, TheLastHomesGroupTakesTheSharedFolderWithIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to create control groups under /sys/fs/cgroup";
  const std::string shared = "gpuherd-test-" + std::to_string(getpid());
  Cgroups first = Cgroups::Open("/sys/fs/cgroup", shared + "/home-a");
  if (first.version() != CgroupVersion::kV1) GTEST_SKIP() << "exercises cgroup v1; here: " << first.Describe();
  Cgroups second = Cgroups::Open("/sys/fs/cgroup", shared + "/home-b");
  EXPECT_TRUE(first.RemoveParentIfEmpty());
  EXPECT_TRUE(fs::exists("/sys/fs/cgroup/freezer/" + shared)) << "another home's daemon still uses it";
  EXPECT_TRUE(second.RemoveParentIfEmpty());
  EXPECT_FALSE(fs::exists("/sys/fs/cgroup/freezer/" + shared));
  EXPECT_FALSE(fs::exists("/sys/fs/cgroup/memory/" + shared));
}

}  // namespace
}  // namespace gpuherd::host
