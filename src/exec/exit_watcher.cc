#include "exec/exit_watcher.h"

#include <dirent.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <spdlog/spdlog.h>

#include "exec/pidfd.h"
#include "exec/proc_stat.h"

namespace gpuherd::exec {
namespace {

std::string Errno(int err) { return std::strerror(err); }

}  // namespace

int KillLeftovers(const ShimIdentity& shim, const std::string& proc_root) {
  if (shim.pid <= 0) return 0;
  auto start = ReadProcStat(shim.pid, proc_root);
  if (start.ok() && start->start_time != shim.start_time) return 0;
  DIR* proc = opendir(proc_root.c_str());
  if (proc == nullptr) return 0;
  int killed = 0;
  while (dirent* entry = readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    int pid = std::atoi(entry->d_name);
    // The shim itself may linger as a zombie until its parent reaps it. A
    // process that ended meanwhile (or an unreadable entry) is skipped.
    if (pid == shim.pid) continue;
    auto stat = ReadProcStat(pid, proc_root);
    if (stat.ok() && stat->session == shim.pid && kill(pid, SIGKILL) == 0) ++killed;
  }
  closedir(proc);
  return killed;
}

std::optional<ExitRecord> ResolveEndedShim(int64_t job_id, int attempt, const ShimIdentity& shim,
                                           const std::string& dir) {
  auto record = ReadExitRecord(dir);
  if (record.ok() && record->has_value()) return std::move(**record);
  if (!record.ok() && record.status().code() == Code::kUnavailable) return std::nullopt;
  ExitRecord lost;
  lost.job_id = job_id;
  lost.attempt = attempt;
  lost.how = ExitRecord::How::kShimLost;
  if (!record.ok()) {
    lost.message = "the supervisor's exit record is unreadable: " + record.status().message();
  } else if (shim.pid <= 0) {
    lost.message = "no supervisor was started for this attempt (no shim file in " + dir + ")";
  } else {
    lost.message = "the supervisor (pid " + std::to_string(shim.pid) +
                   ") ended without recording an exit status: it was killed or crashed";
  }
  int killed = KillLeftovers(shim);
  if (killed > 0) lost.message += "; killed " + std::to_string(killed) + " leftover job process(es)";
  return lost;
}

Result<std::unique_ptr<ExitWatcher>> ExitWatcher::Start(Callback on_exit) {
  int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return Internal("cannot create an epoll instance: " + Errno(errno));
  int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    close(epoll_fd);
    return Internal("cannot create an eventfd: " + Errno(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &ev);
  std::unique_ptr<ExitWatcher> watcher(new ExitWatcher(epoll_fd, wake_fd, std::move(on_exit)));
  watcher->thread_ = std::thread([w = watcher.get()] { w->Loop(); });
  return watcher;
}

ExitWatcher::~ExitWatcher() {
  Stop();
  close(epoll_fd_);
  close(wake_fd_);
}

void ExitWatcher::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mu_);
  for (auto& [key, entry] : watched_) close(entry.pidfd);
  watched_.clear();
  by_pidfd_.clear();
  gone_.clear();
}

void ExitWatcher::Wake() {
  uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

Status ExitWatcher::Watch(int64_t job_id, int attempt, const ShimIdentity& shim, int pidfd,
                          const std::string& dir) {
  Key key{job_id, attempt};
  std::lock_guard lock(mu_);
  auto refuse = [&](Status status) {
    if (pidfd >= 0) close(pidfd);
    return status;
  };
  if (stopping_) return refuse(FailedPrecondition("the exit watcher is stopped"));
  if (watched_.count(key) != 0) {
    return refuse(Status(Code::kAlreadyExists,
                         "job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) + " is already watched"));
  }
  Entry entry{key, shim, pidfd, dir};
  if (pidfd < 0) {
    gone_.push_back(std::move(entry));
    Wake();
    return Status::Ok();
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = pidfd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ev) != 0) {
    return refuse(Internal("cannot watch supervisor " + std::to_string(shim.pid) + ": " + Errno(errno)));
  }
  by_pidfd_[pidfd] = key;
  watched_.emplace(key, std::move(entry));
  return Status::Ok();
}

Status ExitWatcher::Signal(int64_t job_id, int attempt, int signal) {
  std::lock_guard lock(mu_);
  auto it = watched_.find({job_id, attempt});
  std::string what = "job " + std::to_string(job_id) + " attempt " + std::to_string(attempt);
  if (it == watched_.end()) return NotFound(what + " is not running");
  if (PidfdSendSignal(it->second.pidfd, signal) != 0) {
    if (errno == ESRCH) return NotFound(what + " has just ended");
    return Internal("cannot signal the supervisor of " + what + ": " + Errno(errno));
  }
  return Status::Ok();
}

size_t ExitWatcher::WatchedCount() const {
  std::lock_guard lock(mu_);
  return watched_.size();
}

bool ExitWatcher::IsWatching(int64_t job_id, int attempt) const {
  std::lock_guard lock(mu_);
  return watched_.count({job_id, attempt}) != 0;
}

void ExitWatcher::Loop() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  while (true) {
    // Records that could not be read for want of descriptors are read again soon.
    constexpr int kRetryMs = 200;
    int n = epoll_wait(epoll_fd_, events, kMaxEvents, retry_.empty() ? -1 : kRetryMs);
    if (n < 0 && errno != EINTR) {
      spdlog::error("exit watcher: epoll_wait failed: {}", Errno(errno));
      return;
    }
    std::vector<Entry> ended;
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      for (int i = 0; i < n; ++i) {
        int fd = events[i].data.fd;
        if (fd == wake_fd_) {
          uint64_t count;
          ssize_t ignored = read(wake_fd_, &count, sizeof(count));
          (void)ignored;
          continue;
        }
        auto key = by_pidfd_.find(fd);
        if (key == by_pidfd_.end()) continue;
        auto entry = watched_.find(key->second);
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        close(fd);
        entry->second.pidfd = -1;
        ended.push_back(std::move(entry->second));
        watched_.erase(entry);
        by_pidfd_.erase(key);
      }
      for (auto& entry : gone_) ended.push_back(std::move(entry));
      gone_.clear();
    }
    for (auto& entry : retry_) ended.push_back(std::move(entry));
    retry_.clear();
    // Nothing may leave the thread: an exception here would end the daemon.
    for (const Entry& entry : ended) {
      try {
        std::optional<ExitRecord> record = ResolveEndedShim(entry.key.first, entry.key.second, entry.shim, entry.dir);
        if (!record) {
          retry_.push_back(entry);
          continue;
        }
        on_exit_(std::move(*record));
      } catch (const std::exception& e) {
        spdlog::error("exit of job {} attempt {} not handled: {}", entry.key.first, entry.key.second, e.what());
      } catch (...) {
        spdlog::error("exit of job {} attempt {} not handled: unknown exception", entry.key.first,
                      entry.key.second);
      }
    }
  }
}

}  // namespace gpuherd::exec
