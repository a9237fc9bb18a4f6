#include "exec/shim_fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "exec/job_files.h"
#include "exec/launcher.h"
#include "exec/pidfd.h"

namespace gpuherd::exec {
namespace {

std::string ReadProc(pid_t pid, const char* name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + name, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

pid_t ParentOf(pid_t pid) {
  std::string stat = ReadProc(pid, "stat");
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string state;
  pid_t parent = -1;
  rest >> state >> parent;
  return parent;
}

bool ExitsWithin(int pidfd, int ms) {
  pollfd pfd{pidfd, POLLIN, 0};
  return poll(&pfd, 1, ms) == 1;
}

// CTest names the built gpuherd-shim in $GPUHERD_SHIM.
std::string Shim() { return DefaultShimProgram("/proc/self/exe"); }

TEST(ShimForkServerTest, AForkedShimIsTheServersChildLookingAsAnExecdShimDoes) {
  auto server = ShimForkServer::Start(Shim());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  int control[2];
  ASSERT_EQ(pipe2(control, O_CLOEXEC), 0);
  auto forked = (*server)->Fork(control[0]);
  close(control[0]);
  ASSERT_TRUE(forked.ok()) << forked.status().ToString();
  EXPECT_EQ(ParentOf(forked->pid), (*server)->pid());
  // The pid, start time and pidfd name the same live process.
  auto start_time = ProcessStartTime(forked->pid);
  ASSERT_TRUE(start_time.ok());
  EXPECT_EQ(*start_time, forked->start_time);
  EXPECT_EQ(PidfdSendSignal(forked->pidfd, 0), 0);
  // ps shows "gpuherd-shim 3", and the job's environment is the spec's alone.
  // (The child retitles itself once it runs, which may be after the reply.)
  const std::string shim_title("gpuherd-shim\0003", 14);
  std::string cmdline;
  for (int i = 0; i < 400 && cmdline != shim_title; ++i) {
    if (i > 0) usleep(5000);
    cmdline = ReadProc(forked->pid, "cmdline");
    cmdline.erase(cmdline.find_last_not_of('\0') + 1);
  }
  EXPECT_EQ(cmdline, shim_title);
  EXPECT_EQ(ReadProc(forked->pid, "environ"), "");
  // It waits for its input on the pipe; end-of-file cancels it.
  EXPECT_FALSE(ExitsWithin(forked->pidfd, 50));
  close(control[1]);
  EXPECT_TRUE(ExitsWithin(forked->pidfd, 5000));
  close(forked->pidfd);
  pid_t pid = (*server)->pid();
  server->reset();
  EXPECT_EQ(waitpid(pid, nullptr, 0), pid);
}

TEST(ShimForkServerTest, ABinaryWithoutTheServerIsRefused) {
  auto server = ShimForkServer::Start("/bin/true");
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), Code::kUnavailable);
  EXPECT_FALSE(ShimForkServer::Start("/no/such/gpuherd-shim").ok());
}

TEST(ShimForkServerTest, AServerThatDiedIsUnavailableAndOneWhoseLauncherClosesExits) {
  auto dead = ShimForkServer::Start(Shim());
  ASSERT_TRUE(dead.ok()) << dead.status().ToString();
  ASSERT_EQ(kill((*dead)->pid(), SIGKILL), 0);
  ASSERT_EQ(waitpid((*dead)->pid(), nullptr, 0), (*dead)->pid());
  int control[2];
  ASSERT_EQ(pipe2(control, O_CLOEXEC), 0);
  auto forked = (*dead)->Fork(control[0]);
  EXPECT_EQ(forked.status().code(), Code::kUnavailable);
  close(control[0]);
  close(control[1]);

  auto server = ShimForkServer::Start(Shim());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  pid_t pid = (*server)->pid();
  server->reset();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace gpuherd::exec
