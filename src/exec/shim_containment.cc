#include "exec/shim_containment.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "host/process_tree.h"

namespace gpuherd::exec {
namespace {

// How long the shim waits for a job's processes to die after SIGKILL; only a
// process stuck in the kernel (uninterruptible I/O) takes longer.
constexpr std::chrono::seconds kKillTimeout{10};

// True when the shim's only child is `main`, read from the kernel's list of
// its children (one thread: the shim starts none). Every orphan of the job is
// reparented to the shim, so then the job has no other process left, and the
// walk through all of /proc (about 1 ms on a busy machine) is spared. False
// when the list cannot be read.
bool HasNoChildBut(pid_t self, pid_t main) {
  std::string path = "/proc/" + std::to_string(self) + "/task/" + std::to_string(self) + "/children";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n < 0 || n == sizeof(buf) - 1) return false;
  buf[n] = '\0';
  char* end = nullptr;
  long first = std::strtol(buf, &end, 10);
  while (*end == ' ' || *end == '\n') ++end;
  return *end == '\0' && (first == 0 || first == main);
}

}  // namespace

std::string ShimContainment::Prepare() {
  // Orphans become the shim's children (reaped in ReapOrphans), whatever the
  // control group: with none it is how they are found.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 && spec_.cgroup.empty()) {
    return std::string("cannot become a child subreaper: ") + std::strerror(errno);
  }
  if (spec_.cgroup.empty()) return "";
  Status made = host::CreateCgroup(spec_.cgroup, spec_.limits);
  created_ = true;
  if (!made.ok()) return "cannot create the job's control group: " + made.message();
  auto fds = host::OpenJoinFiles(spec_.cgroup);
  if (!fds.ok()) return "cannot join the job's control group: " + fds.status().message();
  join_fds_ = std::move(fds).value();
  return "";
}

void ShimContainment::CloseJoinFiles() {
  for (int fd : join_fds_) close(fd);
  join_fds_.clear();
}

void ShimContainment::SignalEscaped(pid_t job_group, int sig) const {
  if (spec_.cgroup.empty()) return;
  for (pid_t pid : host::CgroupPids(spec_.cgroup)) {
    if (getpgid(pid) != job_group) kill(pid, sig);
  }
}

std::string ShimContainment::KillAll(pid_t main) {
  if (!spec_.cgroup.empty()) {
    Status killed;
    if (!host::CgroupIsEmpty(spec_.cgroup)) killed = host::KillCgroup(spec_.cgroup, kKillTimeout);
    ReapOrphans(main);
    return killed.message();
  }
  // Walk down from the shim until no live descendant is left: a process
  // forked during one pass is found, and killed, by the next.
  const pid_t self = getpid();
  if (HasNoChildBut(self, main)) return "";
  const auto deadline = std::chrono::steady_clock::now() + kKillTimeout;
  while (true) {
    std::vector<host::ProcessEntry> processes = host::ListProcesses();
    std::vector<pid_t> live = host::LiveDescendants(processes, self);
    for (const auto& p : processes) {
      if (p.ppid == self && p.state == 'Z' && p.pid != main) waitpid(p.pid, nullptr, WNOHANG);
    }
    if (live.empty()) return "";
    if (std::chrono::steady_clock::now() >= deadline) {
      return std::to_string(live.size()) + " descendant processes survived SIGKILL for " +
             std::to_string(kKillTimeout.count()) + " s";
    }
    for (pid_t pid : live) kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void ShimContainment::ReapOrphans(pid_t main) {
  while (true) {
    siginfo_t info{};
    if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (info.si_pid == main) return;  // the main process is reaped by the shim itself
    waitpid(info.si_pid, nullptr, 0);
  }
}

int64_t ShimContainment::OomKills() const {
  return spec_.cgroup.empty() ? 0 : host::CgroupOomKills(spec_.cgroup);
}

std::string ShimContainment::Remove() {
  if (!created_) return "";
  // Left behind, it is removed when the daemon next starts (Executor).
  return host::RemoveCgroup(spec_.cgroup).message();
}

int JoinPreparedCgroup(const std::vector<int>& fds) {
  for (int fd : fds) {
    if (write(fd, "0", 1) != 1) return errno;
  }
  return 0;
}

}  // namespace gpuherd::exec
