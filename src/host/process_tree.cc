#include "host/process_tree.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <map>

namespace gpuherd::host {

std::vector<ProcessEntry> ListProcesses(const std::string& proc_dir) {
  std::vector<ProcessEntry> out;
  DIR* d = opendir(proc_dir.c_str());
  if (d == nullptr) return out;
  while (dirent* entry = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid <= 0 || end == nullptr || *end != '\0') continue;
    std::string path = proc_dir + "/" + entry->d_name + "/stat";
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) continue;
    std::string stat(buf, static_cast<size_t>(n));
    // The command name, in parentheses, may itself hold spaces and parentheses.
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos || paren + 4 >= stat.size()) continue;
    ProcessEntry p;
    p.pid = static_cast<pid_t>(pid);
    p.state = stat[paren + 2];
    p.ppid = static_cast<pid_t>(std::strtol(stat.c_str() + paren + 4, nullptr, 10));
    out.push_back(p);
  }
  closedir(d);
  return out;
}

std::vector<pid_t> LiveDescendants(const std::vector<ProcessEntry>& processes, pid_t ancestor) {
  std::multimap<pid_t, const ProcessEntry*> children;
  for (const auto& p : processes) children.emplace(p.ppid, &p);
  std::vector<pid_t> out;
  std::vector<pid_t> todo{ancestor};
  while (!todo.empty()) {
    pid_t parent = todo.back();
    todo.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      const ProcessEntry& child = *it->second;
      if (child.pid == ancestor || child.pid == parent) continue;
      if (child.state != 'Z') out.push_back(child.pid);
      todo.push_back(child.pid);
      if (out.size() + todo.size() > processes.size()) return out;  // a cycle in a torn read
    }
  }
  return out;
}

}  // namespace gpuherd::host
