#include "exec/spawn.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

namespace gpuherd::exec {
namespace {

// Runs `script` under sh with the write end of a pipe as descriptor 7 (moved
// there first when `already_there`); returns what it wrote.
std::string RunSh(const std::string& script, bool already_there, bool own_group = false, pid_t* group = nullptr) {
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  int out = p[1];
  if (already_there) {
    EXPECT_EQ(dup3(p[1], 7, O_CLOEXEC), 7);
    close(p[1]);
    out = 7;
  }
  std::string sh = "sh", c = "-c", text = script;
  char* argv[] = {sh.data(), c.data(), text.data(), nullptr};
  pid_t pid = SpawnWithFd("/bin/sh", argv, nullptr, out, 7, own_group);
  EXPECT_GT(pid, 0);
  if (group != nullptr) *group = getpgid(pid) == pid ? pid : -1;
  close(out);
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return got;
}

TEST(SpawnTest, TheDescriptorArrivesWhereAskedEvenWhenItIsAlreadyThere) {
  EXPECT_EQ(RunSh("echo moved >&7", false), "moved\n");
  EXPECT_EQ(RunSh("echo kept >&7", true), "kept\n");
  EXPECT_EQ(fcntl(7, F_GETFD), -1);  // the caller's copy at 7 is its own to close
}

TEST(SpawnTest, NothingBlockedOrIgnoredAndAGroupOfItsOwnOnlyWhenAsked) {
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGUSR1);
  sigset_t saved;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &saved);
  auto old = signal(SIGUSR2, SIG_IGN);
  // SigBlk and SigIgn in /proc (hex masks, bit n-1 for signal n): no
  // standard signal blocked or ignored in the child. (glibc keeps its own
  // real-time signals 32 and 33 as they are.)
  std::string masks = RunSh("grep -E '^Sig(Blk|Ign)' /proc/self/status | cut -f2 >&7", false);
  ASSERT_EQ(masks.size(), 34u) << masks;
  EXPECT_EQ(std::stoull(masks.substr(0, 16), nullptr, 16) & 0xffffffffULL, 0u) << masks;
  EXPECT_EQ(std::stoull(masks.substr(17, 16), nullptr, 16) & 0x7fffffffULL, 0u) << masks;
  signal(SIGUSR2, old);
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  pid_t group = 0;
  RunSh("echo >&7", false, /*own_group=*/true, &group);
  EXPECT_GT(group, 0);
  RunSh("echo >&7", false, /*own_group=*/false, &group);
  EXPECT_EQ(group, -1);
}

}  // namespace
}  // namespace gpuherd::exec
