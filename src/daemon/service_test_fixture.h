// What the tests of the daemon through its real wiring share: a daemon of
// their own on a simulated fleet, in a fresh state directory, run on a
// thread, and its API over the unix socket. DaemonServiceTest runs it on the
// real clock (its jobs are real processes); SteppedDaemonTest on a fake
// clock moved one sampling round at a time, so that minutes pass in
// milliseconds.
#pragma once

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/daemon.h"
#include "host/clock.h"
#include "http/client.h"

namespace gpuherd::daemon {

class DaemonServiceTest : public ::testing::Test {
 protected:
  // root_: a fresh folder of this test process; home_ (root_/home, made by
  // the daemon) is the daemon's state directory.
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("gpuherd_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) + "_" +
             std::to_string(getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    home_ = root_ / "home";
    clock_ = host::NewRealClock();
  }
  void TearDown() override {
    StopDaemon();
    std::filesystem::remove_all(root_);
  }

  // A daemon of `sim_gpus` simulated GPUs on home_, sampling every 100 ms;
  // with `tcp`, also on a free TCP port (daemon_->tcp_port()).
  DaemonOptions Options(int sim_gpus, bool tcp = false) const {
    DaemonOptions options;
    options.home = home_.string();
    options.driver.sim_count = sim_gpus;
    options.port = tcp ? 0 : -1;
    options.sample_interval = 100;
    return options;
  }

  void StartDaemon(const DaemonOptions& options) {
    auto d = Daemon::Create(options, clock_.get());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    runner_ = std::thread([this] { run_status_ = daemon_->Run(); });
  }
  // Stops the daemon; its jobs run on under their supervisors.
  void StopDaemon() {
    if (!daemon_) return;
    daemon_->Stop();
    runner_.join();
    daemon_.reset();
    EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
  }
  // Jobs outlive the daemon by design: a test's own must not.
  void CancelUnfinished() {
    if (!daemon_) return;
    // Held by value: a range-for over Get(...)["jobs"] iterates a part of a
    // temporary that is gone before the loop starts.
    const nlohmann::json unfinished = Get("/v1/jobs?all=0")["jobs"];
    for (const auto& j : unfinished) {
      Call("POST", "/v1/jobs/" + std::to_string(j["id"].get<int64_t>()) + "/cancel");
    }
    EXPECT_TRUE(WaitFor([&] { return Get("/v1/jobs?all=0")["jobs"].empty(); })) << "jobs left running after the test";
  }

  // Over the unix socket: the caller is this process's user.
  http::ClientResponse Call(const std::string& method, const std::string& target, const std::string& body = "") {
    http::Client client(http::Endpoint{daemon_->socket_path()});
    auto r = client.Request(method, target, body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }
  // A GET that must answer 200; its body (discarded JSON when unreadable).
  nlohmann::json Get(const std::string& target) {
    auto r = Call("GET", target);
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
    return nlohmann::json::parse(r.body, nullptr, false);
  }
  // Submits `spec`, which must be accepted; the job's id (0 when refused).
  int64_t Submit(const nlohmann::json& spec) {
    auto r = Call("POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return nlohmann::json::parse(r.body, nullptr, false).value("id", int64_t{0});
  }
  nlohmann::json Job(int64_t id) { return Get("/v1/jobs/" + std::to_string(id)); }

  // Polls `done` in real time; false when it still fails after `seconds`.
  static bool WaitFor(const std::function<bool()>& done, int seconds = 20) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return done();
  }

  // Writes root_/name (making its folders); its path.
  std::string WriteFile(const std::string& name, const std::string& text) {
    std::filesystem::path p = root_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p.string();
  }

  std::filesystem::path root_, home_;
  std::unique_ptr<host::Clock> clock_;
  std::unique_ptr<Daemon> daemon_;
  std::thread runner_;
  Status run_status_;
};

// The fake clock's start and the sampling interval of SteppedDaemonTest.
inline constexpr TimeMs kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
inline constexpr DurationMs kStep = 5 * kSecondMs;

class SteppedDaemonTest : public DaemonServiceTest {
 protected:
  void SetUp() override {
    DaemonServiceTest::SetUp();
    auto fake = std::make_unique<host::FakeClock>(kT0);
    fake_clock_ = fake.get();
    clock_ = std::move(fake);
  }

  // A daemon on the simulated fleet of `scenario` (a scenario's YAML text),
  // sampling every kStep of the fake clock, with InfiniBand counters read
  // under root_/sysroot.
  DaemonOptions ScenarioOptions(const std::string& scenario) {
    DaemonOptions options;
    options.home = home_.string();
    options.driver.scenario_path = WriteFile("scenario.yaml", scenario);
    options.port = 0;
    options.sample_interval = kStep;
    options.ib_sysfs_root = (root_ / "sysroot").string();
    return options;
  }
  // Starts the daemon and waits for its first round (the one at start).
  void StartDaemon(const DaemonOptions& options) {
    DaemonServiceTest::StartDaemon(options);
    if (!daemon_) return;
    rounds_ = 0;
    WaitForRounds(1);
  }

  void WaitForRounds(uint64_t n) {
    for (int i = 0; i < 5000; ++i) {
      nlohmann::json h = Get("/v1/health");
      if (h.is_object() && h.value("rounds", uint64_t{0}) >= n) {
        rounds_ = h["rounds"].get<uint64_t>();
        return;
      }
      ::usleep(1000);
    }
    FAIL() << "the daemon did not reach sampling round " << n;
  }
  // Moves the clock one sampling interval and waits until the daemon has
  // taken (and committed) that round.
  void Step() {
    fake_clock_->Advance(kStep);
    WaitForRounds(rounds_ + 1);
  }
  // Steps until `t` (since kT0) has been sampled.
  void RunUntil(DurationMs t) {
    while (clock_->Now() < kT0 + t) Step();
  }

  // The events of `kind` as the API lists them, oldest first.
  nlohmann::json Events(const std::string& kind) { return Get("/v1/events?limit=1000&kind=" + kind)["events"]; }

  host::FakeClock* fake_clock_ = nullptr;  // clock_
  uint64_t rounds_ = 0;
};

}  // namespace gpuherd::daemon
