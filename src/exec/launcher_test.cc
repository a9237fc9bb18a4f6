#include "exec/launcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "core/state_dir.h"
#include "exec/job_files.h"

namespace gpuherd::exec {
namespace {

class LauncherTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-launcher-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    chmod(dir_.c_str(), 0755);
    std::filesystem::create_directories(dir_ + "/run/jobs");
    chmod((dir_ + "/run").c_str(), 0700);
  }
  // A shim started by a test may still be writing its exit record: retry
  // rather than throw from TearDown when a file vanishes under remove_all.
  void TearDown() override {
    std::error_code error;
    for (int i = 0; i < 50; ++i) {
      std::filesystem::remove_all(dir_, error);
      if (!error) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "could not remove " << dir_ << ": " << error.message();
  }

  // The record folder of job `id`'s first attempt, in the private tree.
  std::string RecordDir(int id) const { return dir_ + "/run/jobs/" + std::to_string(id) + "/1"; }

  LaunchSpec TrueSpec(int id) {
    LaunchSpec spec;
    spec.job_id = id;
    spec.attempt = 1;
    spec.argv = {"true"};
    spec.env = {{"PATH", "/usr/bin:/bin"}};
    spec.record_dir = RecordDir(id);
    spec.output_dir = dir_ + "/jobs/" + std::to_string(id) + "/1";
    std::filesystem::create_directories(dir_ + "/jobs/" + std::to_string(id));
    return spec;
  }

  static bool WaitForFile(const std::string& path) {
    for (int i = 0; i < 500; ++i) {
      if (std::filesystem::exists(path)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // CTest names the built gpuherd-shim in $GPUHERD_SHIM.
  static std::string Shim() { return DefaultShimProgram("/proc/self/exe"); }

  std::string dir_;
};

TEST_F(LauncherTest, MissingShimIsRefusedBeforeAnythingStarts) {
  auto client = LauncherClient::Spawn("/proc/self/exe", dir_ + "/no-such-shim");
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(client.status().message().find("no-such-shim"), std::string::npos) << client.status().ToString();
  EXPECT_NE(client.status().message().find("GPUHERD_SHIM"), std::string::npos) << client.status().ToString();
}

TEST_F(LauncherTest, DefaultShimIsBesideTheProgramUnlessOverridden) {
  std::string saved = std::getenv("GPUHERD_SHIM") ? std::getenv("GPUHERD_SHIM") : "";
  unsetenv("GPUHERD_SHIM");
  EXPECT_EQ(DefaultShimProgram("/usr/local/bin/gpuherd-daemon"), "/usr/local/bin/gpuherd-shim");
  setenv("GPUHERD_SHIM", "/opt/x/shim", 1);
  EXPECT_EQ(DefaultShimProgram("/usr/local/bin/gpuherd-daemon"), "/opt/x/shim");
  if (saved.empty()) unsetenv("GPUHERD_SHIM");
  else setenv("GPUHERD_SHIM", saved.c_str(), 1);
}

TEST_F(LauncherTest, ProgramWithoutLauncherEntryIsRefused) {
  auto client = LauncherClient::Spawn("/bin/true", Shim());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
  EXPECT_NE(client.status().message().find("MaybeRunLauncher"), std::string::npos);
}

TEST_F(LauncherTest, MaybeRunLauncherIgnoresOrdinaryArguments) {
  char prog[] = "gpuherd", cmd[] = "gpus";
  char* argv[] = {prog, cmd, nullptr};
  EXPECT_EQ(MaybeRunLauncher(2, argv), -1);
}

TEST_F(LauncherTest, LaunchWritesShimFileAndHandsOverPidfd) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::string attempt_dir = RecordDir(1);
  auto launched = (*client)->Launch(TrueSpec(1));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  EXPECT_GE(launched->pidfd, 0);
  // The shim file exists when Launch returns, not later.
  auto shim = ReadShimFile(attempt_dir);
  ASSERT_TRUE(shim.ok() && shim->has_value());
  EXPECT_EQ((*shim)->pid, launched->shim.pid);
  EXPECT_EQ((*shim)->start_time, launched->shim.start_time);
  ASSERT_TRUE(WaitForFile(ExitFilePath(attempt_dir)));
  auto record = ReadExitRecord(attempt_dir);
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_EQ((*record)->how, ExitRecord::How::kExited);
  EXPECT_EQ((*record)->code, 0);
  close(launched->pidfd);
}

TEST_F(LauncherTest, UncreatableRecordFolderIsAnErrorAndNothingRuns) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::string file = dir_ + "/run/jobs/3";
  ASSERT_TRUE(WriteFileAtomically(file, "x", 0644).ok());
  auto launched = (*client)->Launch(TrueSpec(3));
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find(file), std::string::npos) << launched.status().message();
  // The launcher is still usable after a refused launch.
  auto next = (*client)->Launch(TrueSpec(4));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(WaitForFile(ExitFilePath(RecordDir(4))));
  close(next->pidfd);
}

// A record folder must be <private base>/<job id>/<attempt>.
TEST_F(LauncherTest, ARecordFolderOutsideThePrivateTreeShapeIsRefused) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  LaunchSpec spec = TrueSpec(5);
  spec.record_dir = dir_ + "/run/jobs/5/../6";
  auto launched = (*client)->Launch(spec);
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find("<base>/<job id>/<attempt>"), std::string::npos)
      << launched.status().message();
}

// A link planted where a record folder goes (by anyone who could write
// there) is neither followed nor written through.
TEST_F(LauncherTest, PlantedLinkForTheRecordFolderIsRefused) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  std::filesystem::create_directories(dir_ + "/victim");
  std::filesystem::create_directories(dir_ + "/run/jobs/2");
  std::filesystem::create_directory_symlink(dir_ + "/victim", RecordDir(2));
  auto launched = (*client)->Launch(TrueSpec(2));
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find("symbolic link"), std::string::npos) << launched.status().message();
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/victim"));
}

// The records' base must be private at every level: a base any user may
// write (a job's folder, a shared one) is refused before anything is made.
TEST_F(LauncherTest, ARecordBaseOthersMayWriteIsRefused) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  chmod((dir_ + "/run/jobs").c_str(), 0777);
  auto launched = (*client)->Launch(TrueSpec(6));
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.status().message().find("may be written by other users"), std::string::npos)
      << launched.status().message();
  EXPECT_FALSE(std::filesystem::exists(RecordDir(6)));
}

TEST_F(LauncherTest, DeadLauncherIsNoticedBeforeLaunching) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*client)->alive());
  ASSERT_EQ(kill((*client)->pid(), SIGKILL), 0);
  for (int i = 0; i < 200 && (*client)->alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_FALSE((*client)->alive());
  auto launched = (*client)->Launch(TrueSpec(7));
  EXPECT_EQ(launched.status().code(), Code::kUnavailable);
}

pid_t ParentOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

// Shims come from the fork server, the launcher's child; one killed is
// replaced at the next launch, and the jobs run the same.
TEST_F(LauncherTest, ShimsAreForkedByAServerThatIsReplacedWhenItDies) {
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto first = (*client)->Launch(TrueSpec(1));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  pid_t server = ParentOf(first->shim.pid);
  EXPECT_NE(server, (*client)->pid());
  EXPECT_EQ(ParentOf(server), (*client)->pid());
  ASSERT_TRUE(WaitForFile(ExitFilePath(RecordDir(1))));
  ASSERT_EQ(kill(server, SIGKILL), 0);
  for (int i = 0; i < 200 && kill(server, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto second = (*client)->Launch(TrueSpec(2));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  pid_t replacement = ParentOf(second->shim.pid);
  EXPECT_NE(replacement, server);
  EXPECT_EQ(ParentOf(replacement), (*client)->pid());
  ASSERT_TRUE(WaitForFile(ExitFilePath(RecordDir(2))));
  auto record = ReadExitRecord(RecordDir(2));
  ASSERT_TRUE(record.ok() && record->has_value());
  EXPECT_EQ((*record)->code, 0);
  close(first->pidfd);
  close(second->pidfd);
}

TEST_F(LauncherTest, WithoutTheForkServerEachShimIsExecdByTheLauncher) {
  setenv("GPUHERD_SHIM_FORK_SERVER", "0", 1);  // read by the launcher at its start
  auto client = LauncherClient::Spawn("/proc/self/exe", Shim());
  unsetenv("GPUHERD_SHIM_FORK_SERVER");
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto launched = (*client)->Launch(TrueSpec(1));
  ASSERT_TRUE(launched.ok()) << launched.status().ToString();
  EXPECT_EQ(ParentOf(launched->shim.pid), (*client)->pid());
  ASSERT_TRUE(WaitForFile(ExitFilePath(RecordDir(1))));
  close(launched->pidfd);
}

}  // namespace
}  // namespace gpuherd::exec
