// Watches shims and reports each one's end exactly once. One thread waits in
// epoll on a pidfd per shim (pidfds work for processes that are not our
// children, such as shims re-adopted after a daemon restart); when a shim
// exits, its exit record is read from its record folder and handed to the
// callback. A shim that died without a record (SIGKILL, OOM killer) is
// reported as kShimLost, after the job processes it left behind are killed so
// that a requeued job never runs twice at once.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/status.h"
#include "exec/job_files.h"
#include "exec/launch_spec.h"

namespace gpuherd::exec {

// Kills what is left of a dead shim's job: every process still in the
// session the shim led (read from `proc_root`, "/proc" but for tests).
// Returns how many processes were killed. Never throws: a process that ends
// while it is looked at is skipped.
int KillLeftovers(const ShimIdentity& shim, const std::string& proc_root = "/proc");

class ExitWatcher {
 public:
  // Called on the watcher thread, one record at a time; must not block long.
  using Callback = std::function<void(ExitRecord)>;

  static Result<std::unique_ptr<ExitWatcher>> Start(Callback on_exit);
  ~ExitWatcher();
  ExitWatcher(const ExitWatcher&) = delete;
  ExitWatcher& operator=(const ExitWatcher&) = delete;

  // Watches the shim of (job_id, attempt), taking ownership of `pidfd`. With
  // pidfd < 0 the shim is known to be gone: its record (or its loss) is
  // delivered at once from the watcher thread. AlreadyExists when that attempt
  // is already watched.
  Status Watch(int64_t job_id, int attempt, const ShimIdentity& shim, int pidfd, const std::string& dir);
  // Sends `signal` to a watched shim through its pidfd, never to a recycled
  // pid. NotFound when the attempt is not (or no longer) watched.
  Status Signal(int64_t job_id, int attempt, int signal);
  bool IsWatching(int64_t job_id, int attempt) const;
  // How many attempts are watched now.
  size_t WatchedCount() const;
  // Stops the thread without delivering what is still watched; the shims go on.
  void Stop();

 private:
  using Key = std::pair<int64_t, int>;
  struct Entry {
    Key key;
    ShimIdentity shim;
    int pidfd = -1;
    std::string dir;
  };

  ExitWatcher(int epoll_fd, int wake_fd, Callback on_exit)
      : epoll_fd_(epoll_fd), wake_fd_(wake_fd), on_exit_(std::move(on_exit)) {}
  void Loop();
  void Wake();

  const int epoll_fd_;
  const int wake_fd_;
  const Callback on_exit_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::map<Key, Entry> watched_;   // guarded by mu_
  std::map<int, Key> by_pidfd_;    // guarded by mu_
  std::vector<Entry> gone_;        // shims known dead, to resolve; guarded by mu_
  std::vector<Entry> retry_;       // ended, record unreadable for now; watcher thread only
  bool stopping_ = false;          // guarded by mu_
};

// What a shim left behind, as the watcher reports it: its exit record, or
// kShimLost (after killing the job's leftover processes) when it has none.
// nullopt when the record cannot be read for now (the process is out of
// descriptors): that is no loss, the watcher tries again.
std::optional<ExitRecord> ResolveEndedShim(int64_t job_id, int attempt, const ShimIdentity& shim,
                                           const std::string& record_dir);

}  // namespace gpuherd::exec
