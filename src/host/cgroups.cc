#include "host/cgroups.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>
#include <thread>

namespace gpuherd::host {
namespace {

using Clock = std::chrono::steady_clock;

// The v1 controllers a job group joins, in the order Describe lists them.
constexpr const char* kV1Controllers[] = {"memory", "cpu", "pids", "freezer"};
// The v2 controllers delegated to the parent group.
constexpr const char* kV2Controllers[] = {"memory", "cpu", "pids"};
// Files under cgroupfs are small; this bounds a read of a fixture file too.
constexpr size_t kMaxCgroupFile = 1 << 20;

std::string Errno(int err) { return std::strerror(err); }

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// O_APPEND: cgroupfs ignores the offset, and a fixture file keeps every
// value written to it, in order, for a test to check.
Status WriteCgroupFile(const std::string& path, const std::string& value) {
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return IoError("cannot write " + path + ": " + Errno(errno));
  ssize_t n = write(fd, value.data(), value.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(value.size())) {
    return IoError("cannot write '" + value + "' to " + path + ": " + Errno(n < 0 ? err : EIO));
  }
  return Status::Ok();
}

Result<std::string> ReadCgroupFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return IoError("cannot read " + path + ": " + Errno(errno));
  std::string text;
  char buf[4096];
  while (text.size() < kMaxCgroupFile) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// mkdir that accepts an existing directory.
Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || (errno == EEXIST && IsDir(path))) return Status::Ok();
  return IoError("cannot create " + path + ": " + Errno(errno));
}

// Makes each component of `relative` below `base`.
Status MakeDirs(const std::string& base, const std::string& relative) {
  std::string path = base;
  size_t begin = 0;
  while (begin < relative.size()) {
    size_t end = relative.find('/', begin);
    if (end == std::string::npos) end = relative.size();
    if (end > begin) {
      path += "/" + relative.substr(begin, end - begin);
      Status s = MakeDir(path);
      if (!s.ok()) return s;
    }
    begin = end + 1;
  }
  return Status::Ok();
}

// The value of `key` in a flat keyed file ("populated 0\nfrozen 1\n"); -1 when absent.
int64_t KeyedValue(const std::string& text, const std::string& key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 && line[key.size()] == ' ') {
      return std::strtoll(line.c_str() + key.size() + 1, nullptr, 10);
    }
    at = end + 1;
  }
  return -1;
}

std::vector<pid_t> ParsePids(const std::string& text) {
  std::vector<pid_t> pids;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    long pid = std::strtol(text.c_str() + at, nullptr, 10);
    if (pid > 0) pids.push_back(static_cast<pid_t>(pid));
    at = end + 1;
  }
  return pids;
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Waits until `done` or the deadline, polling with a growing pause.
template <typename Done>
bool WaitUntil(Clock::time_point deadline, Done done) {
  int pause = 1;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    SleepMs(pause);
    pause = std::min(pause * 2, 20);
  }
  return true;
}

std::string Join(const std::vector<pid_t>& pids) {
  std::string out;
  for (size_t i = 0; i < pids.size() && i < 10; ++i) out += (out.empty() ? "" : ", ") + std::to_string(pids[i]);
  if (pids.size() > 10) out += ", ...";
  return out;
}

}  // namespace

std::vector<std::string> Cgroup::Dirs() const {
  if (version == CgroupVersion::kV2) return {unified};
  std::vector<std::string> dirs;
  for (const auto& [controller, dir] : v1) dirs.push_back(dir);
  return dirs;
}

Cgroups Cgroups::Open(const std::string& mount_in, const std::string& parent) {
  Cgroups c;
  std::string mount = mount_in;
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  c.mount_ = mount;
  c.parent_ = parent;
  if (mount.empty()) {
    c.reason_ = "not asked for";
    return c;
  }
  if (parent.empty() || parent[0] == '/' || parent.find("..") != std::string::npos) {
    c.reason_ = "bad parent group name '" + parent + "'";
    return c;
  }
  if (!IsDir(mount)) {
    c.reason_ = "no cgroup file system at " + mount;
    return c;
  }
  if (IsFile(mount + "/cgroup.controllers")) {
    auto available = ReadCgroupFile(mount + "/cgroup.controllers");
    std::string words = available.ok() ? " " + *available + " " : "";
    for (char& ch : words) {
      if (ch == '\n' || ch == '\t') ch = ' ';
    }
    std::vector<std::string> use;
    for (const char* ctl : kV2Controllers) {
      if (words.find(std::string(" ") + ctl + " ") != std::string::npos) use.push_back(ctl);
    }
    // Delegate the controllers down to the parent: each level's
    // subtree_control enables them for its children. One write per
    // controller, so that one already enabled or missing does not stop others.
    auto delegate = [&use](const std::string& dir) {
      for (const auto& ctl : use) (void)WriteCgroupFile(dir + "/cgroup.subtree_control", "+" + ctl);
    };
    delegate(mount);
    std::string dir = mount;
    size_t begin = 0;
    while (begin < parent.size()) {
      size_t end = parent.find('/', begin);
      if (end == std::string::npos) end = parent.size();
      if (end > begin) {
        dir += "/" + parent.substr(begin, end - begin);
        Status made = MakeDir(dir);
        if (!made.ok()) {
          c.reason_ = made.message();
          return c;
        }
        delegate(dir);
      }
      begin = end + 1;
    }
    // The controllers the parent's children will really get.
    auto enabled = ReadCgroupFile(dir + "/cgroup.subtree_control");
    std::string on = enabled.ok() ? " " + *enabled + " " : " ";
    for (char& ch : on) {
      if (ch == '\n' || ch == '\t') ch = ' ';
    }
    for (const auto& ctl : use) {
      if (on.find(" " + ctl + " ") != std::string::npos) c.controllers_.push_back(ctl);
    }
    if (!IsFile(dir + "/cgroup.procs")) {
      c.reason_ = dir + " is not a control group (no cgroup.procs)";
      return c;
    }
    c.version_ = CgroupVersion::kV2;
    c.unified_parent_ = dir;
    c.has_kill_ = IsFile(dir + "/cgroup.kill");
    return c;
  }
  std::string first_error;
  for (const char* ctl : kV1Controllers) {
    std::string hierarchy = mount + "/" + ctl;
    if (!IsFile(hierarchy + "/cgroup.procs")) continue;
    Status made = MakeDirs(hierarchy, parent);
    if (!made.ok()) {
      if (first_error.empty()) first_error = made.message();
      continue;
    }
    c.controllers_.push_back(ctl);
    c.v1_parent_[ctl] = hierarchy + "/" + parent;
  }
  if (c.controllers_.empty()) {
    c.reason_ = first_error.empty() ? "no cgroup v1 hierarchy (memory, cpu, pids, freezer) or v2 under " + mount
                                    : first_error;
    return c;
  }
  c.version_ = CgroupVersion::kV1;
  return c;
}

std::string Cgroups::Describe() const {
  if (version_ == CgroupVersion::kNone) return "none (" + reason_ + "), subreaper only";
  std::string list;
  for (const auto& ctl : controllers_) list += (list.empty() ? "" : ", ") + ctl;
  std::string where = version_ == CgroupVersion::kV2 ? mount_ + "/" + parent_ : mount_ + "/*/" + parent_;
  return std::string("cgroup ") + (version_ == CgroupVersion::kV2 ? "v2" : "v1") + " (" + list + ") under " + where;
}

Cgroup Cgroups::Child(const std::string& name) const {
  Cgroup g;
  g.version = version_;
  if (version_ == CgroupVersion::kV2) g.unified = unified_parent_ + "/" + name;
  if (version_ == CgroupVersion::kV1) {
    for (const auto& [ctl, dir] : v1_parent_) g.v1[ctl] = dir + "/" + name;
  }
  return g;
}

std::vector<std::string> Cgroups::ListChildren() const {
  std::set<std::string> names;
  std::vector<std::string> parents;
  if (version_ == CgroupVersion::kV2) parents.push_back(unified_parent_);
  for (const auto& [ctl, dir] : v1_parent_) parents.push_back(dir);
  for (const auto& parent : parents) {
    DIR* d = opendir(parent.c_str());
    if (d == nullptr) continue;
    while (dirent* entry = readdir(d)) {
      std::string name = entry->d_name;
      if (name == "." || name == ".." || !IsDir(parent + "/" + name)) continue;
      names.insert(name);
    }
    closedir(d);
  }
  return {names.begin(), names.end()};
}

bool Cgroups::RemoveParentIfEmpty() const {
  std::vector<std::string> parents;
  if (version_ == CgroupVersion::kV2) parents.push_back(unified_parent_);
  for (const auto& [ctl, dir] : v1_parent_) parents.push_back(dir);
  bool gone = !parents.empty();
  for (const auto& dir : parents) {
    gone = (rmdir(dir.c_str()) == 0 || errno == ENOENT) && gone;
    // And the folder above it ("gpuherd/"), shared by every home's daemon:
    // removed when this was the last one (rmdir refuses a folder in use).
    const size_t slash = dir.rfind('/');
    if (gone && slash != std::string::npos && dir.compare(slash + 1, 5, "home-") == 0) {
      (void)rmdir(dir.substr(0, slash).c_str());
    }
  }
  return gone;
}

Status CreateCgroup(const Cgroup& group, const CgroupLimits& limits) {
  if (group.empty()) return Status::Ok();
  for (const auto& dir : group.Dirs()) GPUHERD_RETURN_IF_ERROR(MakeDir(dir));
  if (group.version == CgroupVersion::kV2) {
    const std::string& dir = group.unified;
    if (limits.memory_bytes > 0) {
      GPUHERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/memory.max", std::to_string(limits.memory_bytes)));
      // Swap counts against the limit, as on v1 (memsw): no swap beyond RAM.
      if (IsFile(dir + "/memory.swap.max")) GPUHERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/memory.swap.max", "0"));
    }
    if (limits.cpus > 0) {
      GPUHERD_RETURN_IF_ERROR(WriteCgroupFile(
          dir + "/cpu.max", std::to_string(limits.cpus * kCpuPeriodUs) + " " + std::to_string(kCpuPeriodUs)));
    }
    return Status::Ok();
  }
  if (limits.memory_bytes > 0) {
    auto memory = group.v1.find("memory");
    if (memory == group.v1.end()) return FailedPrecondition("no cgroup v1 memory hierarchy to enforce the memory limit");
    GPUHERD_RETURN_IF_ERROR(
        WriteCgroupFile(memory->second + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes)));
    std::string memsw = memory->second + "/memory.memsw.limit_in_bytes";
    if (IsFile(memsw)) GPUHERD_RETURN_IF_ERROR(WriteCgroupFile(memsw, std::to_string(limits.memory_bytes)));
  }
  if (limits.cpus > 0) {
    auto cpu = group.v1.find("cpu");
    if (cpu == group.v1.end()) return FailedPrecondition("no cgroup v1 cpu hierarchy to enforce the CPU limit");
    GPUHERD_RETURN_IF_ERROR(WriteCgroupFile(cpu->second + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)));
    GPUHERD_RETURN_IF_ERROR(
        WriteCgroupFile(cpu->second + "/cpu.cfs_quota_us", std::to_string(limits.cpus * kCpuPeriodUs)));
  }
  return Status::Ok();
}

Result<std::vector<int>> OpenJoinFiles(const Cgroup& group) {
  std::vector<int> fds;
  for (const auto& dir : group.Dirs()) {
    std::string path = dir + "/cgroup.procs";
    int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
      Status error = IoError("cannot open " + path + ": " + Errno(errno));
      for (int open_fd : fds) close(open_fd);
      return error;
    }
    fds.push_back(fd);
  }
  return fds;
}

Status JoinCgroup(const Cgroup& group, pid_t pid) {
  for (const auto& dir : group.Dirs()) {
    GPUHERD_RETURN_IF_ERROR(WriteCgroupFile(dir + "/cgroup.procs", std::to_string(pid)));
  }
  return Status::Ok();
}

std::vector<pid_t> CgroupPids(const Cgroup& group) {
  std::set<pid_t> pids;
  for (const auto& dir : group.Dirs()) {
    auto text = ReadCgroupFile(dir + "/cgroup.procs");
    if (!text.ok()) continue;
    for (pid_t pid : ParsePids(*text)) pids.insert(pid);
  }
  return {pids.begin(), pids.end()};
}

bool CgroupIsEmpty(const Cgroup& group) {
  if (group.version == CgroupVersion::kV2) {
    auto events = ReadCgroupFile(group.unified + "/cgroup.events");
    if (events.ok()) {
      int64_t populated = KeyedValue(*events, "populated");
      if (populated >= 0) return populated == 0;
    }
  }
  return CgroupPids(group).empty();
}

Status KillCgroup(const Cgroup& group, std::chrono::milliseconds timeout) {
  if (group.empty()) return Status::Ok();
  const auto deadline = Clock::now() + timeout;
  auto kill_each = [&group] {
    for (pid_t pid : CgroupPids(group)) kill(pid, SIGKILL);
  };
  if (group.version == CgroupVersion::kV2) {
    const std::string& dir = group.unified;
    if (!IsDir(dir)) return Status::Ok();
    if (IsFile(dir + "/cgroup.kill") && WriteCgroupFile(dir + "/cgroup.kill", "1").ok()) {
      // The kernel kills every process, forks in flight included.
    } else if (IsFile(dir + "/cgroup.freeze") && WriteCgroupFile(dir + "/cgroup.freeze", "1").ok()) {
      WaitUntil(deadline, [&] {
        auto events = ReadCgroupFile(dir + "/cgroup.events");
        return events.ok() && KeyedValue(*events, "frozen") == 1;
      });
      kill_each();
      (void)WriteCgroupFile(dir + "/cgroup.freeze", "0");
    } else {
      kill_each();
    }
  } else {
    auto freezer = group.v1.find("freezer");
    std::string state_file = freezer == group.v1.end() ? "" : freezer->second + "/freezer.state";
    if (!state_file.empty() && !IsDir(freezer->second)) state_file.clear();
    if (!state_file.empty() && WriteCgroupFile(state_file, "FROZEN").ok()) {
      // FREEZING until every task stopped; a task in an uninterruptible
      // sleep may hold it there, so the kill goes ahead at the deadline.
      WaitUntil(std::min(deadline, Clock::now() + std::chrono::seconds(2)), [&] {
        auto state = ReadCgroupFile(state_file);
        return state.ok() && state->compare(0, 6, "FROZEN") == 0;
      });
      kill_each();
      (void)WriteCgroupFile(state_file, "THAWED");
    } else {
      kill_each();
    }
  }
  // Without a freezer a process may fork between the read and the kill:
  // kill again until none is left.
  bool empty = WaitUntil(deadline, [&] {
    if (CgroupIsEmpty(group)) return true;
    kill_each();
    return false;
  });
  if (empty) return Status::Ok();
  std::vector<pid_t> left = CgroupPids(group);
  return IoError("processes " + Join(left) + " are still in the job's control group after " +
                 std::to_string(timeout.count()) + " ms");
}

int64_t CgroupOomKills(const Cgroup& group) {
  std::string file;
  if (group.version == CgroupVersion::kV2) {
    file = group.unified + "/memory.events";
  } else if (auto memory = group.v1.find("memory"); memory != group.v1.end()) {
    file = memory->second + "/memory.oom_control";
  }
  if (file.empty()) return 0;
  auto text = ReadCgroupFile(file);
  if (!text.ok()) return 0;
  return std::max<int64_t>(0, KeyedValue(*text, "oom_kill"));
}

Status RemoveCgroup(const Cgroup& group) {
  Status result;
  for (const auto& dir : group.Dirs()) {
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT && result.ok()) {
      result = IoError("cannot remove " + dir + ": " + Errno(errno));
    }
  }
  return result;
}

std::string JobCgroupName(int64_t job_id, int attempt) {
  return "job-" + std::to_string(job_id) + "-" + std::to_string(attempt);
}

bool ParseJobCgroupName(const std::string& name, int64_t* job_id, int* attempt) {
  if (name.size() < 7 || name.compare(0, 4, "job-") != 0 || name.size() > 40) return false;
  size_t dash = name.find('-', 4);
  if (dash == std::string::npos || dash == 4 || dash + 1 >= name.size()) return false;
  for (size_t i = 4; i < name.size(); ++i) {
    if (i != dash && !std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  }
  if (dash - 4 > 18 || name.size() - dash - 1 > 9) return false;
  *job_id = std::stoll(name.substr(4, dash - 4));
  *attempt = std::stoi(name.substr(dash + 1));
  return true;
}

}  // namespace gpuherd::host
