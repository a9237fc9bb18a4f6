#include "exec/shim_input.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "exec/job_files.h"
#include "exec/launcher.h"

namespace gpuherd::exec {
namespace {

LaunchSpec Spec() {
  LaunchSpec spec;
  spec.job_id = 7;
  spec.attempt = 2;
  spec.argv = {"python3", "train.py", "--lr", "0.1"};
  spec.cwd = "/work";
  spec.env = {{"PATH", "/usr/bin"}, {"GPUHERD_RESUME", "1"}};
  spec.record_dir = "/var/lib/gpuherd/run/jobs/7/2";
  spec.output_dir = "/var/lib/gpuherd/jobs/7/2";
  spec.cpus = {0, 2};
  spec.time_limit = 3600000;
  spec.grace = 5000;
  spec.uid = 1000;
  spec.gid = 1000;
  spec.open_files = 1024;
  return spec;
}

TEST(ShimInputTest, RoundTripsSpecAndUser) {
  UserSwitch user;
  user.needed = true;
  user.gid = 1000;
  user.uid = 1000;
  user.groups = {1000, 27, 44};
  auto decoded = DecodeShimInput(EncodeShimInput(Spec(), user));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  const LaunchSpec& s = decoded->spec;
  EXPECT_EQ(s.job_id, 7);
  EXPECT_EQ(s.attempt, 2);
  EXPECT_EQ(s.argv, Spec().argv);
  EXPECT_EQ(s.env, Spec().env);
  EXPECT_EQ(s.record_dir, Spec().record_dir);
  EXPECT_EQ(s.open_files, 1024u);
  EXPECT_EQ(s.output_dir, Spec().output_dir);
  EXPECT_EQ(s.cpus, (std::vector<int>{0, 2}));
  EXPECT_EQ(s.time_limit, 3600000);
  EXPECT_EQ(s.grace, 5000);
  EXPECT_EQ(s.uid, 1000u);
  EXPECT_TRUE(decoded->user.needed);
  EXPECT_EQ(decoded->user.uid, 1000u);
  EXPECT_EQ(decoded->user.groups, (std::vector<gid_t>{1000, 27, 44}));
  EXPECT_TRUE(decoded->user.error.empty());

  user = {};
  user.error = "cannot run as uid 5 gid -: no group given";
  decoded = DecodeShimInput(EncodeShimInput(Spec(), user));
  ASSERT_TRUE(decoded.ok());
  EXPECT_FALSE(decoded->user.needed);
  EXPECT_FALSE(decoded->user.uid.has_value());
  EXPECT_EQ(decoded->user.error, user.error);
}

TEST(ShimInputTest, RoundTripsTheControlGroupAndLimits) {
  LaunchSpec spec = Spec();
  EXPECT_TRUE(DecodeShimInput(EncodeShimInput(spec, {}))->spec.cgroup.empty());
  spec.cgroup.version = host::CgroupVersion::kV1;
  spec.cgroup.v1 = {{"memory", "/sys/fs/cgroup/memory/gpuherd/h/job-7-2"},
                    {"freezer", "/sys/fs/cgroup/freezer/gpuherd/h/job-7-2"}};
  spec.limits = {64 << 20, 2};
  auto decoded = DecodeShimInput(EncodeShimInput(spec, {}));
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(decoded->spec.cgroup.version, host::CgroupVersion::kV1);
  EXPECT_EQ(decoded->spec.cgroup.v1, spec.cgroup.v1);
  EXPECT_EQ(decoded->spec.limits.memory_bytes, uint64_t{64 << 20});
  EXPECT_EQ(decoded->spec.limits.cpus, 2);

  spec.cgroup = {};
  spec.cgroup.version = host::CgroupVersion::kV2;
  spec.cgroup.unified = "/sys/fs/cgroup/gpuherd/h/job-7-2";
  decoded = DecodeShimInput(EncodeShimInput(spec, {}));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->spec.cgroup.unified, spec.cgroup.unified);
  EXPECT_EQ(decoded->spec.cgroup.Dirs(), std::vector<std::string>{spec.cgroup.unified});

  nlohmann::json j = LaunchSpecToJson(spec);
  j["cgroup"]["version"] = 3;
  EXPECT_FALSE(LaunchSpecFromJson(j).ok());
}

TEST(ShimInputTest, MalformedInputIsAnError) {
  EXPECT_FALSE(DecodeShimInput("").ok());
  EXPECT_FALSE(DecodeShimInput("[1, 2]").ok());
  EXPECT_FALSE(DecodeShimInput(R"({"spec": {"job_id": 1}, "user": {}})").ok());
  nlohmann::json j = nlohmann::json::parse(EncodeShimInput(Spec(), {}));
  j["user"]["groups"] = "wheel";
  auto bad = DecodeShimInput(j.dump());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

TEST(ShimInputTest, NoUserAskedForMeansNoSwitch) {
  LaunchSpec spec = Spec();
  spec.uid.reset();
  spec.gid.reset();
  UserSwitch user = ResolveUser(spec);
  EXPECT_FALSE(user.needed);
  EXPECT_TRUE(user.error.empty());
}

TEST(ShimInputTest, UserResolution) {
  LaunchSpec spec = Spec();
  if (geteuid() != 0) {
    // Not root: only our own ids are possible, and nothing is switched.
    spec.uid = geteuid();
    spec.gid = getegid();
    EXPECT_FALSE(ResolveUser(spec).needed);
    EXPECT_TRUE(ResolveUser(spec).error.empty());
    spec.uid = geteuid() + 1;
    EXPECT_NE(ResolveUser(spec).error.find("only a launcher running as root"), std::string::npos);
    return;
  }
  spec.uid = 0;
  spec.gid.reset();
  UserSwitch root = ResolveUser(spec);
  EXPECT_TRUE(root.error.empty()) << root.error;
  EXPECT_TRUE(root.needed);
  EXPECT_EQ(root.gid, 0u);  // root's primary group, from passwd
  EXPECT_NE(std::find(root.groups.begin(), root.groups.end(), 0u), root.groups.end());
  // A uid without a passwd entry needs a group to be given.
  spec.uid = 4000123;
  EXPECT_NE(ResolveUser(spec).error.find("no passwd entry"), std::string::npos);
  spec.gid = 4000123;
  UserSwitch nobody = ResolveUser(spec);
  EXPECT_TRUE(nobody.error.empty()) << nobody.error;
  EXPECT_EQ(nobody.groups, (std::vector<gid_t>{4000123}));
}

// Starts gpuherd-shim with a control pipe; returns its exit status.
int RunShim(const std::string& frame, bool go, std::vector<std::string> args = {"3"}) {
  int control[2];
  EXPECT_EQ(pipe2(control, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, control[0], kShimControlFd);
  std::string shim = DefaultShimProgram("/proc/self/exe");
  std::vector<char*> argv = {shim.data()};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  pid_t pid = -1;
  EXPECT_EQ(posix_spawn(&pid, shim.c_str(), &actions, nullptr, argv.data(), envp), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(control[0]);
  // A shim that refuses its arguments never reads: no SIGPIPE for the test.
  signal(SIGPIPE, SIG_IGN);
  auto length = static_cast<uint32_t>(frame.size());
  bool written = write(control[1], &length, sizeof(length)) == ssize_t(sizeof(length)) &&
                 write(control[1], frame.data(), frame.size()) == ssize_t(frame.size());
  if (go && written) {
    EXPECT_EQ(write(control[1], &kShimGoByte, 1), 1);
  }
  close(control[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ShimBinaryTest, RunsTheJobOnlyAfterTheGoByte) {
  char tmpl[] = "/tmp/gpuherd-shim-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  LaunchSpec spec;
  spec.job_id = 1;
  spec.attempt = 1;
  spec.argv = {"sh", "-c", "echo ran > " + dir + "/marker"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.record_dir = dir;
  spec.output_dir = dir + "/out";
  // End-of-file instead of the go byte: cancelled, nothing runs, no record.
  EXPECT_EQ(RunShim(EncodeShimInput(spec, {}), /*go=*/false), 1);
  EXPECT_FALSE(std::filesystem::exists(dir + "/marker"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/exit"));
  // With it, the job runs and the exit record is written before the shim ends.
  EXPECT_EQ(RunShim(EncodeShimInput(spec, {}), /*go=*/true), 0);
  EXPECT_TRUE(std::filesystem::exists(dir + "/marker"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/exit"));
  // A user that cannot be switched to: recorded as a failed launch, not run.
  std::filesystem::remove(dir + "/marker");
  UserSwitch refused;
  refused.error = "cannot run as uid 9: test";
  EXPECT_EQ(RunShim(EncodeShimInput(spec, refused), true), 0);
  EXPECT_FALSE(std::filesystem::exists(dir + "/marker"));
  auto record = ReadExitRecord(dir);
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_EQ((*record)->how, ExitRecord::How::kLaunchFailed);
  EXPECT_EQ((*record)->message, refused.error);
  // Garbage input and bad usage.
  EXPECT_EQ(RunShim("not json", true), 1);
  EXPECT_EQ(RunShim(EncodeShimInput(spec, {}), true, {}), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuherd::exec
