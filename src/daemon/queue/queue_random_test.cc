// The queue under seeded random sequences of what users, jobs, GPUs and the
// daemon do: submit, cancel, hold, release, requeue, jobs ending, preemption,
// GPU faults, operator drains, time passing, failed commits and daemon
// restarts, on a FakeExecutor and a virtual clock (queue_harness.h). After
// every step the invariants below hold. GPUHERD_QUEUE_SEED=N replays one
// sequence; GPUHERD_QUEUE_RUNS=N changes how many run.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/queue/queue_harness.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using testing::QueueHarness;
using How = exec::ExitRecord::How;

constexpr int kGpus = 6;
constexpr int kStepsPerRun = 160;

bool Terminal(const std::string& state) {
  return state == "completed" || state == "failed" || state == "cancelled";
}

class RandomQueue {
 public:
  explicit RandomQueue(uint64_t seed) : rng_(seed), q_(kGpus, QueueConfig{}, "rand" + std::to_string(seed)) {}

  // Running fractions the invariants were checked on, over every step.
  int64_t fractions_seen() const { return fractions_seen_; }

  // One random step, then the invariants; false once an invariant broke.
  void Step(int step) {
    step_ = step;
    std::uniform_int_distribution<int> pick(0, 99);
    const int r = pick(rng_);
    if (std::getenv("GPUHERD_QUEUE_TRACE")) std::fprintf(stderr, "step %d: r=%d\n", step, r);
    if (r < 24) {
      Submit();
    } else if (r < 30) {
      SubmitArray();
    } else if (r < 48) {
      EndOne(/*stopping_only=*/false);
    } else if (r < 58) {
      EndOne(/*stopping_only=*/true);
    } else if (r < 63) {
      Act("cancel");
    } else if (r < 66) {
      Act("hold");
    } else if (r < 69) {
      Act("release");
    } else if (r < 73) {
      Act("requeue");
    } else if (r < 77) {
      Fault();
    } else if (r < 79) {
      OperatorDrain();
    } else if (r < 80) {
      Suspect();
    } else if (r < 92) {
      Passes();
    } else if (r < 96) {
      FailedCommit();
    } else {
      Restart();
    }
    Check();
  }

 private:
  Caller AnyUser() {
    static const char* kNames[] = {"alice", "bob", "carol"};
    int u = std::uniform_int_distribution<int>(0, 2)(rng_);
    return q_.User(kNames[u], 1000 + static_cast<uint32_t>(u));
  }

  json RandomSpec() {
    static const double kGpuChoices[] = {0.25, 0.5, 1, 1, 1, 2, 2, 3, 4};
    json s = {{"command", {"train"}}};
    const double gpus = kGpuChoices[std::uniform_int_distribution<int>(0, 8)(rng_)];
    s["gpus"] = gpus;
    // A fraction needs its memory share; without one the spec is refused.
    if (gpus < 1) s["gpu_mem"] = gpus == 0.25 ? "16GiB" : "32GiB";
    static const int kPriorities[] = {-10, 0, 0, 20, 50};
    s["priority"] = kPriorities[std::uniform_int_distribution<int>(0, 4)(rng_)];
    if (std::bernoulli_distribution(0.4)(rng_)) s["preemptible"] = true;
    if (std::bernoulli_distribution(0.3)(rng_)) s["time_limit"] = "10m";
    return s;
  }

  // A spec the parser refuses is refused as POST /v1/jobs refuses it.
  Result<sched::JobId> Submit(const json& body, const Caller& caller) {
    auto spec = sched::ParseJobSpec(body);
    if (!spec.ok()) return spec.status();
    return q_.jobs().Submit(*spec, caller);
  }
  Result<std::vector<sched::JobId>> SubmitArray(const json& body, int n, const Caller& caller) {
    auto spec = sched::ParseJobSpec(body);
    if (!spec.ok()) return spec.status();
    return q_.jobs().SubmitArray(*spec, n, caller);
  }

  // Submits are acknowledged only by the commit of their turn.
  void Submit() {
    auto id = Submit(RandomSpec(), AnyUser());
    if (!id.ok()) return;
    std::vector<sched::JobId> ids = {*id};
    if (q_.Turn()) Acknowledge(ids);
    q_.Settle();
  }
  void SubmitArray() {
    int n = std::uniform_int_distribution<int>(2, 5)(rng_);
    auto ids = SubmitArray(RandomSpec(), n, AnyUser());
    if (!ids.ok()) return;
    if (q_.Turn()) Acknowledge(*ids);
    q_.Settle();
  }
  void Acknowledge(const std::vector<sched::JobId>& ids) {
    for (sched::JobId id : ids) acknowledged_.insert(id);
  }

  // Ends a running attempt as its program would: on its own (completed or
  // failed) or, for one that was signalled, stopped.
  void EndOne(bool stopping_only) {
    std::vector<exec::FakeExecutor::Key> candidates;
    for (const auto& key : q_.executor().running()) {
      if (stopping_only != (signalled_.count(key) > 0)) continue;
      candidates.push_back(key);
    }
    if (candidates.empty()) return;
    auto key = candidates[std::uniform_int_distribution<size_t>(0, candidates.size() - 1)(rng_)];
    if (stopping_only) {
      q_.executor().Exit(key.first, key.second, How::kStopped, 143);
    } else {
      q_.executor().Exit(key.first, key.second, How::kExited, std::bernoulli_distribution(0.8)(rng_) ? 0 : 1);
    }
    q_.Settle();
  }

  void Act(const std::string& action) {
    if (acknowledged_.empty()) return;
    auto it = acknowledged_.begin();
    std::advance(it, std::uniform_int_distribution<size_t>(0, acknowledged_.size() - 1)(rng_));
    (void)q_.jobs().Act(*it, action, q_.Admin());
    q_.Settle();
  }

  void Fault() {
    int gpu = std::uniform_int_distribution<int>(0, kGpus - 1)(rng_);
    q_.jobs().MoveJobsOff(gpu, "fault: XID 79");
    q_.Settle();
    // The fault is dealt with later: a passing burn-in returns the GPU.
    faulted_.insert(gpu);
  }

  void OperatorDrain() {
    int gpu = std::uniform_int_distribution<int>(0, kGpus - 1)(rng_);
    if (std::bernoulli_distribution(0.5)(rng_)) {
      (void)q_.jobs().Drain(gpu, "fan noisy", q_.Admin());
    } else {
      (void)q_.jobs().Undrain(gpu, q_.Admin());
    }
    q_.Settle();
  }

  // Self-healing marks a GPU suspect or clears it (scheduler rule 12): long
  // jobs go elsewhere while another GPU is free; every invariant still holds.
  void Suspect() {
    int gpu = std::uniform_int_distribution<int>(0, kGpus - 1)(rng_);
    q_.jobs().SetSuspect(gpu, std::bernoulli_distribution(0.6)(rng_));
    q_.Settle();
  }

  void Passes() {
    int n = std::uniform_int_distribution<int>(1, 4)(rng_);
    for (int i = 0; i < n; ++i) {
      q_.clock().Advance(std::uniform_int_distribution<int64_t>(1, 120)(rng_) * kSecondMs);
      if (!faulted_.empty() && std::bernoulli_distribution(0.3)(rng_)) {
        int gpu = *faulted_.begin();
        faulted_.erase(faulted_.begin());
        (void)q_.jobs().LiftAfterBurnIn(gpu, "burn-in");
      }
      q_.jobs().OnRound();
      q_.Settle();
    }
  }

  // A turn whose commit fails: whatever it decided never happens.
  void FailedCommit() {
    const size_t launches = q_.executor().launches().size();
    const size_t signals = q_.executor().signals().size();
    auto id = Submit(RandomSpec(), AnyUser());
    if (!q_.executor().running().empty() && std::bernoulli_distribution(0.5)(rng_)) {
      auto key = *q_.executor().running().begin();
      if (!signalled_.count(key)) q_.executor().Exit(key.first, key.second, How::kExited, 0);
    }
    q_.Turn(/*fail_commit=*/true);
    EXPECT_EQ(q_.executor().launches().size(), launches) << Where() << "a failed commit launched";
    EXPECT_EQ(q_.executor().signals().size(), signals) << Where() << "a failed commit signalled";
    if (id.ok()) {
      EXPECT_FALSE(q_.jobs().Show(*id).ok()) << Where() << "an unacknowledged job was kept";
    }
    q_.Settle();
  }

  void Restart() {
    q_.Restart();
    q_.Settle();
    for (sched::JobId id : acknowledged_) {
      EXPECT_TRUE(q_.jobs().Show(id).ok()) << Where() << "acknowledged job " << id << " lost in a restart";
    }
  }

  std::string Where() const { return "step " + std::to_string(step_) + ": "; }

  void Check() {
    // Signals since the last check: each victim stopped at most once for one
    // preemptor (a reason names the preemptor).
    auto signals = q_.executor().signals();
    for (size_t i = signals_seen_; i < signals.size(); ++i) {
      const auto& s = signals[i];
      if (s.signal != SIGTERM) continue;
      exec::FakeExecutor::Key key{s.job_id, s.attempt};
      EXPECT_FALSE(signalled_.count(key)) << Where() << "job " << s.job_id << " attempt " << s.attempt
                                          << " got SIGTERM twice";
      signalled_.insert(key);
      auto shown = q_.jobs().Show(s.job_id);
      if (!shown.ok()) continue;
      std::string reason = shown->reason;
      if (std::getenv("GPUHERD_QUEUE_TRACE")) {
        std::fprintf(stderr, "  SIGTERM job %lld attempt %d: %s\n", static_cast<long long>(s.job_id), s.attempt,
                     reason.c_str());
      }
      if (reason.rfind("preempted for job ", 0) == 0) {
        EXPECT_TRUE(preempted_for_.insert({s.job_id, reason}).second)
            << Where() << "job " << s.job_id << " " << reason << " a second time";
      }
    }
    signals_seen_ = signals.size();

    // What runs: at most one attempt of a job, each the job's current one.
    std::map<int64_t, int> attempts;
    for (const auto& [id, attempt] : q_.executor().running()) {
      EXPECT_EQ(++attempts[id], 1) << Where() << "job " << id << " runs twice";
    }
    std::vector<double> used(kGpus, 0.0);
    std::vector<int> whole(kGpus, 0);
    // Claims made before this step that still hold: a job that started
    // during the step may be a victim of a claim made after it started.
    std::map<int, sched::JobId> claimed;
    for (const auto& [job, gpus] : q_.jobs().claims()) {
      for (int g : gpus) {
        if (auto before = claimed_before_.find(g); before != claimed_before_.end() && before->second == job) {
          claimed[g] = job;
        }
      }
    }
    for (const auto& [id, attempt] : q_.executor().running()) {
      auto shown = q_.jobs().Show(id);
      ASSERT_TRUE(shown.ok()) << Where() << "running job " << id << " unknown";
      const api::JobView& j = *shown;
      const std::string state = j.state;
      EXPECT_TRUE(state == "running" || state == "stopping")
          << Where() << "job " << id << " runs while " << state;
      EXPECT_EQ(j.attempt, attempt) << Where() << "job " << id << " runs a stale attempt";
      double share = j.gpu_twentieths / 20.0;
      for (int g : j.assigned_gpus) {
        ASSERT_TRUE(g >= 0 && g < kGpus);
        if (share < 1) {
          used[g] += share;
          ++fractions_seen_;
        } else {
          ++whole[g];
        }
        // A GPU claimed for a preemptor is taken by nobody who started after the claim.
        if (auto c = claimed.find(g); c != claimed.end() && !seen_running_.count({id, attempt})) {
          EXPECT_EQ(c->second, id) << Where() << "job " << id << " started on GPU " << g << " claimed for job "
                                   << c->second;
        }
      }
    }
    for (int g = 0; g < kGpus; ++g) {
      EXPECT_LE(whole[g], 1) << Where() << "GPU " << g << " held whole by " << whole[g] << " jobs";
      if (whole[g] == 1) {
        EXPECT_EQ(used[g], 0.0) << Where() << "GPU " << g << " whole and shared";
      }
      EXPECT_LE(used[g], 1.0 + 1e-9) << Where() << "GPU " << g << " shared past 1";
    }
    claimed_before_.clear();
    for (const auto& [job, gpus] : q_.jobs().claims()) {
      for (int g : gpus) claimed_before_[g] = job;
    }
    seen_running_.clear();
    for (const auto& key : q_.executor().running()) seen_running_.insert(key);

    // A job that ended stays ended; every acknowledged job is known.
    for (sched::JobId id : acknowledged_) {
      auto shown = q_.jobs().Show(id);
      ASSERT_TRUE(shown.ok()) << Where() << "acknowledged job " << id << " unknown";
      std::string state = shown->state;
      if (Terminal(ended_[id])) {
        EXPECT_EQ(state, ended_[id]) << Where() << "job " << id << " left " << ended_[id];
      }
      if (Terminal(state)) ended_[id] = state;
      // A running job's attempt runs: no exit was lost on the way.
      if (state == "running") {
        exec::FakeExecutor::Key key{id, shown->attempt};
        EXPECT_TRUE(q_.executor().running().count(key)) << Where() << "job " << id << " running without a process";
      }
    }
  }

  std::mt19937_64 rng_;
  QueueHarness q_;
  int step_ = 0;
  int64_t fractions_seen_ = 0;
  std::set<sched::JobId> acknowledged_;
  std::set<int> faulted_;
  std::set<exec::FakeExecutor::Key> signalled_;
  std::set<exec::FakeExecutor::Key> seen_running_;
  std::map<int, sched::JobId> claimed_before_;  // GPU → the job it was claimed for at the last check
  std::set<std::pair<int64_t, std::string>> preempted_for_;
  std::map<sched::JobId, std::string> ended_;
  size_t signals_seen_ = 0;
};

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v ? std::strtoull(v, nullptr, 10) : fallback;
}

TEST(QueueRandomTest, InvariantsHoldAfterEveryStep) {
  const uint64_t only = EnvOr("GPUHERD_QUEUE_SEED", 0);
  const uint64_t runs = only ? 1 : EnvOr("GPUHERD_QUEUE_RUNS", 40);
  int64_t fractions_seen = 0;
  for (uint64_t r = 0; r < runs; ++r) {
    const uint64_t seed = only ? only : 1 + r;
    SCOPED_TRACE("GPUHERD_QUEUE_SEED=" + std::to_string(seed));
    RandomQueue run(seed);
    for (int step = 0; step < kStepsPerRun; ++step) {
      run.Step(step);
      if (::testing::Test::HasFailure()) return;  // the first broken invariant is the story
    }
    fractions_seen += run.fractions_seen();
  }
  // The fraction invariants were checked on running fractions, not vacuously.
  if (!only) {
    EXPECT_GT(fractions_seen, 0);
  }
}

}  // namespace
}  // namespace gpuherd::daemon
