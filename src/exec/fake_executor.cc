#include "exec/fake_executor.h"

#include <algorithm>

#include <filesystem>

namespace gpuherd::exec {

Result<int> FakeExecutor::Launch(const LaunchSpec& spec) {
  std::lock_guard lock(mu_);
  if (fail_next_) {
    Status s = *fail_next_;
    fail_next_.reset();
    return s;
  }
  // Like the real executor, the attempt's record folder exists once it launched:
  // a restarted queue tells launched attempts from unlaunched ones by it.
  std::error_code ec;
  if (!spec.record_dir.empty()) std::filesystem::create_directories(spec.record_dir, ec);
  launches_.push_back(spec);
  running_.insert({spec.job_id, spec.attempt});
  return next_pid_++;
}

Status FakeExecutor::Signal(int64_t job_id, int attempt, int signal) {
  std::lock_guard lock(mu_);
  if (!running_.count({job_id, attempt})) return NotFound("attempt not running");
  signals_.push_back({job_id, attempt, signal});
  return Status::Ok();
}

Status FakeExecutor::Adopt(int64_t job_id, int attempt, const std::string& /*dir*/) {
  std::lock_guard lock(mu_);
  adopted_.push_back({job_id, attempt});
  running_.insert({job_id, attempt});
  return Status::Ok();
}

void FakeExecutor::SetGroupProcesses(int64_t job_id, int attempt, std::vector<int> pids) {
  std::lock_guard lock(mu_);
  std::sort(pids.begin(), pids.end());
  groups_[{job_id, attempt}] = std::move(pids);
}

std::optional<std::vector<int>> FakeExecutor::GroupProcesses(int64_t job_id, int attempt) const {
  std::lock_guard lock(mu_);
  auto it = groups_.find({job_id, attempt});
  if (it == groups_.end()) return std::nullopt;
  return it->second;
}

bool FakeExecutor::Exit(int64_t job_id, int attempt, ExitRecord::How how, int code, int signal) {
  {
    std::lock_guard lock(mu_);
    if (!running_.erase({job_id, attempt})) return false;
  }
  ExitRecord r;
  r.job_id = job_id;
  r.attempt = attempt;
  r.how = how;
  r.code = code;
  r.signal = signal;
  on_exit_(r);
  return true;
}

void FakeExecutor::FailNextLaunch(Status status) {
  std::lock_guard lock(mu_);
  fail_next_ = std::move(status);
}

std::vector<LaunchSpec> FakeExecutor::launches() const {
  std::lock_guard lock(mu_);
  return launches_;
}
std::vector<FakeExecutor::SignalCall> FakeExecutor::signals() const {
  std::lock_guard lock(mu_);
  return signals_;
}
std::set<FakeExecutor::Key> FakeExecutor::running() const {
  std::lock_guard lock(mu_);
  return running_;
}
std::vector<FakeExecutor::Key> FakeExecutor::adopted() const {
  std::lock_guard lock(mu_);
  return adopted_;
}

}  // namespace gpuherd::exec
