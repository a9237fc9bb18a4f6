// For tests: the job queue (JobService) on a FakeExecutor, a VirtualClock and
// a real store in a temporary folder, with the event loop played by hand:
// Turn() runs what the launch thread and the loop were asked to do, then the
// end of turn, the commit and the after-commit, like the daemon's loop. No
// process, no thread, no sleep.
#pragma once

#include <unistd.h>

#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/state_dir.h"
#include "daemon/job_service.h"
#include "exec/fake_executor.h"
#include "gpu/sim/sim_driver.h"
#include "host/virtual_clock.h"
#include "sched/job_spec.h"
#include "store/store.h"

namespace gpuherd::daemon::testing {

// A spec in the API's JSON form, parsed as POST /v1/jobs parses it.
inline sched::JobSpec ParsedSpec(const nlohmann::json& j) {
  auto spec = sched::ParseJobSpec(j);
  EXPECT_TRUE(spec.ok()) << j.dump() << ": " << spec.status().ToString();
  return spec.ok() ? *spec : sched::JobSpec();
}

class QueueHarness {
 public:
  // `gpus` simulated H100s (one model, so that any set may host a gang).
  explicit QueueHarness(int gpus = 8, QueueConfig config = {}, const std::string& tag = "q")
      : config_(std::move(config)) {
    static int serial = 0;
    home_ = std::filesystem::temp_directory_path() /
            ("gpuherd_queue_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(serial++));
    std::filesystem::remove_all(home_);
    dir_.root = home_.string();
    EXPECT_TRUE(EnsureStateDir(dir_).ok());
    gpu::sim::SimOptions sim;
    sim.count = gpus;
    sim.models = {"h100-sxm"};
    auto driver = gpu::sim::OpenSimDriver(sim);
    EXPECT_TRUE(driver.ok());
    auto fleet = (*driver)->Discover();
    EXPECT_TRUE(fleet.ok());
    state_.fleet = *fleet;
    state_.clock = &clock_;
    executor_ = std::make_unique<exec::FakeExecutor>([this](exec::ExitRecord r) {
      loop_.push_back([this, r] { jobs_->OnExit(r); });
    });
    OpenStore();
    MakeQueue();
  }
  ~QueueHarness() {
    launcher_.reset();
    jobs_.reset();
    state_.store.reset();
    std::filesystem::remove_all(home_);
  }

  JobService& jobs() { return *jobs_; }
  exec::FakeExecutor& executor() { return *executor_; }
  host::VirtualClock& clock() { return clock_; }
  DaemonState& state() { return state_; }
  const StateDir& dir() const { return dir_; }

  // One turn of the loop. With `fail_commit`, the commit "fails": its batch
  // is dropped unwritten, as the daemon does when the store refuses it.
  bool Turn(bool fail_commit = false) {
    RunQueued();
    jobs_->EndOfTurn();
    bool ok = !fail_commit;
    if (ok && !state_.batch.empty()) ok = state_.store->Commit(&state_.batch).ok();
    state_.batch = store::WriteBatch();
    jobs_->AfterCommit(ok);
    return ok;
  }
  // The first half of a turn: what is queued runs (exits, launches reported
  // back), and the turn has yet to end and commit.
  void RunQueued() {
    while (!off_loop_.empty() || !loop_.empty()) {
      auto off = std::move(off_loop_);
      off_loop_.clear();
      for (auto& t : off) t();
      auto tasks = std::move(loop_);
      loop_.clear();
      for (auto& t : tasks) t();
    }
  }
  // Turns until nothing more is queued (launches reported back included).
  void Settle() {
    for (int i = 0; i < 20; ++i) {
      Turn();
      if (off_loop_.empty() && loop_.empty()) return;
    }
  }
  // A new queue on the same store and executor, as after a daemon restart.
  void Restart() {
    off_loop_.clear();  // launches never started die with the daemon
    loop_.clear();
    jobs_.reset();
    launcher_.reset();
    state_.store.reset();
    OpenStore();
    MakeQueue();
    EXPECT_TRUE(jobs_->Load().ok());
    Turn();
  }

  Caller User(const std::string& name = "alice", uint32_t uid = 1000) const {
    Caller c;
    c.user = name;
    c.uid = uid;
    c.gid = uid;
    c.authenticated = true;
    return c;
  }
  Caller Admin() const {
    Caller c = User("root", 0);
    c.admin = true;
    return c;
  }

  // The job as `show` renders it.
  nlohmann::json Show(sched::JobId id) {
    auto j = jobs_->Show(id);
    EXPECT_TRUE(j.ok()) << j.status().ToString();
    return j.ok() ? nlohmann::json(*j) : nlohmann::json::object();
  }
  std::string StateOf(sched::JobId id) { return Show(id).value("state", std::string()); }

 private:
  void OpenStore() {
    store::StoreOptions options;
    options.synchronous_full = false;  // a test's store need not survive power loss
    auto store = store::Store::Open(dir_.db_path(), options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    state_.store = std::move(store).value();
  }
  // The queue and its parts, wired as daemon.cc wires them.
  void MakeQueue() {
    launcher_ = std::make_unique<queue::JobLauncher>(
        &state_.fleet, dir_, executor_.get(), [this](std::function<void()> t) { loop_.push_back(std::move(t)); },
        [this](std::function<void()> t) { off_loop_.push_back(std::move(t)); });
    fair_share_ = std::make_unique<queue::FairShare>(config_.scheduler.weights.fair_window);
    watchdog_ = std::make_unique<queue::MemoryWatchdog>(&state_, executor_.get(), config_.memory_watchdog_grace);
    jobs_ = std::make_unique<JobService>(&state_, executor_.get(),
                                         QueueParts{launcher_.get(), fair_share_.get(), watchdog_.get()}, config_);
  }

  QueueConfig config_;
  std::filesystem::path home_;
  StateDir dir_;
  host::VirtualClock clock_{1'800'000'000'000};
  DaemonState state_;
  std::unique_ptr<exec::FakeExecutor> executor_;
  std::deque<std::function<void()>> loop_, off_loop_;
  std::unique_ptr<queue::JobLauncher> launcher_;
  std::unique_ptr<queue::FairShare> fair_share_;
  std::unique_ptr<queue::MemoryWatchdog> watchdog_;
  std::unique_ptr<JobService> jobs_;
};

}  // namespace gpuherd::daemon::testing
