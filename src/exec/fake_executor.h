// A JobExecutor for tests: records every launch, signal and adoption and runs
// nothing. The test decides when and how each attempt ends (Exit), which is
// delivered through the callback like a real exit. Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "exec/job_executor.h"

namespace gpuherd::exec {

class FakeExecutor : public JobExecutor {
 public:
  struct SignalCall {
    int64_t job_id = 0;
    int attempt = 0;
    int signal = 0;
  };
  using Key = std::pair<int64_t, int>;  // (job id, attempt)

  explicit FakeExecutor(ExitCallback on_exit) : on_exit_(std::move(on_exit)) {}

  Result<int> Launch(const LaunchSpec& spec) override;
  Status Signal(int64_t job_id, int attempt, int signal) override;
  Status Adopt(int64_t job_id, int attempt, const std::string& record_dir) override;

  // Ends a running attempt through the callback (on the calling thread).
  // False when that attempt is not running here.
  bool Exit(int64_t job_id, int attempt, ExitRecord::How how, int code = 0, int signal = 0);
  // The next Launch fails with this status (once).
  void FailNextLaunch(Status status);
  // What GroupProcesses answers for an attempt (nullopt by default: no
  // control groups).
  void SetGroupProcesses(int64_t job_id, int attempt, std::vector<int> pids);
  std::optional<std::vector<int>> GroupProcesses(int64_t job_id, int attempt) const override;

  std::vector<LaunchSpec> launches() const;
  std::vector<SignalCall> signals() const;
  std::set<Key> running() const;
  std::vector<Key> adopted() const;

 private:
  ExitCallback on_exit_;
  mutable std::mutex mu_;
  std::vector<LaunchSpec> launches_;
  std::vector<SignalCall> signals_;
  std::set<Key> running_;
  std::vector<Key> adopted_;
  std::optional<Status> fail_next_;
  std::map<Key, std::vector<int>> groups_;
  int next_pid_ = 1000;
};

}  // namespace gpuherd::exec
