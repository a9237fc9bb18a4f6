// The processes of this machine as a tree (parent pids from /proc/<pid>/stat):
// how a job without a control group is ended, by walking down from its shim.
// Small on purpose: the static shim links it.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpuherd::host {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';  // 'Z' for a zombie
};

// Every process under `proc_dir` ("/proc", or a fixture tree's); processes
// that vanish while it reads are skipped.
std::vector<ProcessEntry> ListProcesses(const std::string& proc_dir = "/proc");

// The descendants of `ancestor` (children, their children, ...) that are not
// zombies, in no particular order; `ancestor` itself is not included.
std::vector<pid_t> LiveDescendants(const std::vector<ProcessEntry>& processes, pid_t ancestor);

}  // namespace gpuherd::host
