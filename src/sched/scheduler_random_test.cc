// A seeded randomized test of the scheduling pass: thousands of random
// fleets, queues and running sets (fractions, stopping jobs, claims, drains,
// host limits), driven for a few passes each the way the daemon applies
// decisions; after every Schedule() call the invariants below must hold.
//
// Reproduce a failure with the seed it prints:
//   GPUHERD_SCHED_SEED=<seed> GPUHERD_SCHED_SCENARIOS=1 build/src/sched/sched_test
//     --gtest_filter='SchedulerRandomTest.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "sched/placement.h"
#include "sched/scheduler.h"
#include "sched/test_fleet.h"

namespace gpuherd::sched {
namespace {

using testing::kGiB;

uint64_t EnvOr(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

const char* const kNames[] = {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB",
                              "NVIDIA GeForce RTX 3090"};
const uint64_t kMemory[] = {80 * kGiB, 40 * kGiB, 24 * kGiB};

class Scenario {
 public:
  explicit Scenario(uint64_t seed) : rng_(seed) {}

  void Run(int passes) {
    MakeFleet();
    // The first pass fills the machine from a queue; later ones churn it.
    for (int i = Int(1, 20); i > 0; --i) Submit();
    for (int pass = 0; pass < passes && !::testing::Test::HasFailure(); ++pass) {
      SCOPED_TRACE("pass " + std::to_string(pass));
      Decisions d = Schedule(fleet_, pending_, running_, now_, config_);
      Check(d);
      Apply(d);
      Churn();
    }
  }

 private:
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool Chance(int percent) { return Int(0, 99) < percent; }

  void MakeFleet() {
    int n = Int(1, 16);
    fleet_ = testing::MakeFleet(n);
    int models = Int(1, 3);
    bool topology = Chance(60);
    if (topology) testing::SetAllLinks(&fleet_, gpu::Link::kCrossSocket);
    for (int i = 0; i < n; ++i) {
      GpuState& g = fleet_.gpus[i];
      int m = models == 1 ? 0 : (i * models) / n;  // contiguous blocks per model
      g.name = kNames[m];
      g.memory_total_bytes = kMemory[m];
      g.numa_node = i < (n + 1) / 2 ? 0 : 1;
      if (topology) {
        for (int j = 0; j < n; ++j) {
          if (i == j) continue;
          bool same_node = (i < (n + 1) / 2) == (j < (n + 1) / 2);
          gpu::Link link = !same_node             ? gpu::Link::kCrossSocket
                           : i / 4 == j / 4 && m == 0 ? gpu::Link::kNvLink
                           : i / 2 == j / 2       ? gpu::Link::kPcieSwitch
                                                  : gpu::Link::kNumaNode;
          if (link == gpu::Link::kNvLink && (j * models) / n != m) link = gpu::Link::kPcieSwitch;
          testing::SetLink(&fleet_, i, j, link);
        }
      }
      Disturb(g);
    }
    if (topology) DeriveTopologyGroups(&fleet_);
    if (Chance(40)) fleet_.host_cpus = Int(4, 64);
    if (Chance(40)) fleet_.host_mem_bytes = static_cast<uint64_t>(Int(16, 512)) * kGiB;
    config_ = SchedulerConfig{};
    config_.backfill = !Chance(10);
    config_.preemption = !Chance(10);
    if (Chance(20)) config_.max_running_gpus_per_user = Int(1, 8);
    if (Chance(10)) config_.max_queued_jobs_per_user = Int(1, 10);
  }

  void Disturb(GpuState& g) {
    g.lost = Chance(3);
    g.drained = Chance(5);
    g.healthy = !Chance(3);
    g.temp_c = Chance(4) ? 95 : 40;
    g.thermal_throttling = Chance(2);
    g.suspect = Chance(15);
  }

  JobSpec RandomSpec() {
    JobSpec spec;
    spec.argv = {"train"};
    int roll = Int(0, 99);
    spec.gpu_twentieths = roll < 10 ? 0 : roll < 35 ? Int(1, 19) : roll < 70 ? 20 : 20 * Int(2, 5);
    if (spec.fractional()) spec.gpu_mem_bytes = static_cast<uint64_t>(Int(1, 30)) * kGiB;
    if (Chance(10)) spec.model = "H100";
    if (Chance(5)) spec.min_cc = 90;
    const int priorities[] = {-20, -10, 0, 0, 10, 50, 90};
    spec.priority = priorities[Int(0, 6)];
    spec.preemptible = Chance(50);
    spec.mixed_models = Chance(20);
    spec.time_limit = Chance(50) ? Int(1, 120) * kMinuteMs : 0;
    spec.checkpoint_grace = Int(0, 60) * kSecondMs;
    if (Chance(30)) spec.cpus = Int(1, 16);
    if (Chance(30)) spec.mem_bytes = static_cast<uint64_t>(Int(1, 64)) * kGiB;
    spec.user = "user" + std::to_string(Int(0, 2));
    return spec;
  }

  void Submit() {
    PendingJob job;
    job.id = next_id_++;
    job.spec = RandomSpec();
    job.submitted = now_ - Int(0, 3600) * kSecondMs;
    if (Chance(5)) {
      job.deps = Chance(50) ? Dependencies::kWaiting : Dependencies::kFailed;
      job.blocking_dep = 1;
    }
    pending_.push_back(std::move(job));
  }

  const PendingJob* FindPending(JobId id) const {
    for (const PendingJob& p : pending_) {
      if (p.id == id) return &p;
    }
    return nullptr;
  }
  const RunningJob* FindRunning(JobId id) const {
    for (const RunningJob& r : running_) {
      if (r.id == id) return &r;
    }
    return nullptr;
  }

  // The invariants of one pass.
  void Check(const Decisions& d) {
    const size_t n = fleet_.gpus.size();
    std::set<JobId> dropped(d.dropped_claims.begin(), d.dropped_claims.end());
    // Every pending job starts or waits, once.
    std::map<JobId, int> seen;
    for (const StartDecision& s : d.starts) ++seen[s.job];
    for (const PendingReason& w : d.waiting) {
      ++seen[w.job];
      EXPECT_FALSE(w.reason.empty()) << "job " << w.job;
    }
    ASSERT_EQ(seen.size(), pending_.size());
    for (const auto& [id, count] : seen) {
      EXPECT_EQ(count, 1) << "job " << id << " started or explained twice";
      EXPECT_NE(FindPending(id), nullptr) << "job " << id << " is not pending";
    }
    for (JobId id : dropped) {
      const PendingJob* p = FindPending(id);
      ASSERT_NE(p, nullptr);
      EXPECT_FALSE(p->claimed_gpus.empty()) << "dropped a claim job " << id << " did not have";
    }
    // Claims in force: those passed in and kept, and this pass's.
    std::vector<JobId> claim_of(n, 0);
    auto claim = [&](JobId owner, const std::vector<int>& gpus) {
      for (int g : gpus) {
        ASSERT_GE(g, 0);
        ASSERT_LT(static_cast<size_t>(g), n);
        EXPECT_TRUE(claim_of[g] == 0 || claim_of[g] == owner)
            << "GPU " << g << " claimed for jobs " << claim_of[g] << " and " << owner;
        claim_of[g] = owner;
      }
    };
    for (const PendingJob& p : pending_) {
      if (!p.claimed_gpus.empty() && !dropped.count(p.id)) claim(p.id, p.claimed_gpus);
    }
    // GPU occupancy: running (stopping included) plus starts.
    std::vector<int> twentieths(n, 0);
    std::vector<uint64_t> fraction_mem(n, 0);
    int64_t cpus = 0;
    uint64_t mem = 0;
    auto hold = [&](const JobSpec& spec, const std::vector<int>& gpus) {
      for (int g : gpus) {
        twentieths[g] += spec.fractional() ? spec.gpu_twentieths : kTwentiethsPerGpu;
        if (spec.fractional()) fraction_mem[g] += spec.gpu_mem_bytes;
      }
      cpus += spec.cpus;
      mem += spec.mem_bytes;
    };
    for (const RunningJob& r : running_) hold(r.spec, r.gpus);
    // Rule order, to tell jobs below the reservation from those above.
    std::map<JobId, double> priority;
    for (const PendingJob& p : pending_) {
      priority[p.id] = ComputePriority(config_.weights, PriorityInputsOf(p, now_, config_)).total();
    }
    auto below = [&](JobId a, JobId b) {  // a after b in the queue
      const PendingJob& x = *FindPending(a);
      const PendingJob& y = *FindPending(b);
      return std::make_tuple(-priority[a], x.submitted, a) > std::make_tuple(-priority[b], y.submitted, b);
    };
    std::set<JobId> started;
    for (const StartDecision& s : d.starts) {
      const PendingJob& p = *FindPending(s.job);
      SCOPED_TRACE("start of job " + std::to_string(s.job));
      EXPECT_TRUE(started.insert(s.job).second);
      const int need = p.spec.gpu_twentieths == 0 ? 0 : p.spec.fractional() ? 1 : p.spec.whole_gpus();
      ASSERT_EQ(s.gpus.size(), static_cast<size_t>(need));
      std::set<int> distinct(s.gpus.begin(), s.gpus.end());
      EXPECT_EQ(distinct.size(), s.gpus.size());
      for (int g : s.gpus) {
        ASSERT_GE(g, 0);
        ASSERT_LT(static_cast<size_t>(g), n);
        const GpuState& gpu = fleet_.gpus[g];
        EXPECT_EQ(CheckGpu(gpu, config_.placement), GpuBlock::kNone) << "GPU " << g;
        EXPECT_TRUE(MatchesJob(gpu, p.spec)) << "GPU " << g;
        EXPECT_TRUE(claim_of[g] == 0 || claim_of[g] == s.job)
            << "GPU " << g << " is claimed for job " << claim_of[g];
        if (p.spec.one_model()) {
          EXPECT_EQ(gpu.name, fleet_.gpus[s.gpus[0]].name);
        }
      }
      if (!p.claimed_gpus.empty() && !dropped.count(p.id)) {
        std::vector<int> a = s.gpus, b = p.claimed_gpus;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        EXPECT_EQ(a, b) << "a job with a claim starts on its claimed GPUs";
      }
      if (d.reservation && d.reservation->job != s.job && below(s.job, d.reservation->job)) {
        for (int g : s.gpus) {
          if (std::find(d.reservation->gpus.begin(), d.reservation->gpus.end(), g) ==
              d.reservation->gpus.end()) {
            continue;
          }
          EXPECT_TRUE(config_.backfill && p.spec.time_limit > 0 && d.reservation->at &&
                      now_ + p.spec.time_limit <= *d.reservation->at)
              << "job " << s.job << " took GPU " << g << " reserved for job "
              << d.reservation->job;
        }
      }
      hold(p.spec, s.gpus);
    }
    // Rule 12: a long one-GPU job on a suspect GPU had no other choice. GPUs
    // only fill up during a pass, so one still free now was free then.
    std::set<int> preempt_claimed;
    for (const PreemptDecision& pd : d.preemptions) preempt_claimed.insert(pd.gpus.begin(), pd.gpus.end());
    for (const StartDecision& s : d.starts) {
      const PendingJob& p = *FindPending(s.job);
      const bool long_job = p.spec.time_limit <= 0 || p.spec.time_limit > config_.short_job_max;
      if (!long_job || p.spec.whole_gpus() != 1 || !p.claimed_gpus.empty() || s.gpus.empty() ||
          !fleet_.gpus[s.gpus[0]].suspect) {
        continue;
      }
      for (size_t g = 0; g < n; ++g) {
        const GpuState& other = fleet_.gpus[g];
        const bool reserved = d.reservation && std::find(d.reservation->gpus.begin(), d.reservation->gpus.end(),
                                                         static_cast<int>(g)) != d.reservation->gpus.end();
        if (other.suspect || twentieths[g] != 0 || claim_of[g] != 0 || preempt_claimed.count(static_cast<int>(g)) ||
            reserved || CheckGpu(other, config_.placement) != GpuBlock::kNone || !MatchesJob(other, p.spec)) {
          continue;
        }
        ADD_FAILURE() << "long job " << s.job << " took suspect GPU " << s.gpus[0] << " while GPU " << g
                      << " was free";
      }
    }
    for (size_t g = 0; g < n; ++g) {
      EXPECT_LE(twentieths[g], kTwentiethsPerGpu) << "GPU " << g << " over-committed";
      EXPECT_LE(fraction_mem[g], fleet_.gpus[g].memory_total_bytes) << "GPU " << g;
    }
    if (fleet_.host_cpus > 0) {
      EXPECT_LE(cpus, fleet_.host_cpus) << "CPUs over-committed";
    }
    if (fleet_.host_mem_bytes > 0) {
      EXPECT_LE(mem, fleet_.host_mem_bytes) << "memory over-committed";
    }
    // Preemption.
    std::set<JobId> preemptors, victims;
    for (const PreemptDecision& pd : d.preemptions) {
      SCOPED_TRACE("preemption for job " + std::to_string(pd.for_job));
      EXPECT_TRUE(config_.preemption);
      const PendingJob* p = FindPending(pd.for_job);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(preemptors.insert(pd.for_job).second) << "two preemptions for one job";
      EXPECT_FALSE(started.count(pd.for_job));
      EXPECT_TRUE(p->claimed_gpus.empty() || dropped.count(pd.for_job))
          << "a new preemption for a job that holds a claim";
      for (const RunningJob& r : running_) {
        EXPECT_NE(r.stopping_for, pd.for_job) << "job " << r.id << " is still stopping for it";
      }
      EXPECT_FALSE(pd.victims.empty());
      for (JobId v : pd.victims) {
        const RunningJob* r = FindRunning(v);
        ASSERT_NE(r, nullptr) << "victim " << v;
        EXPECT_TRUE(victims.insert(v).second) << "victim " << v << " twice";
        EXPECT_FALSE(r->stopping) << "victim " << v << " is already stopping";
        EXPECT_TRUE(r->spec.preemptible) << "victim " << v;
        EXPECT_LT(r->spec.priority, p->spec.priority) << "victim " << v;
        if (!ever_dropped_.count(pd.for_job)) {
          EXPECT_TRUE(stopped_for_.insert({v, pd.for_job}).second)
              << "job " << v << " stopped twice for job " << pd.for_job;
        }
      }
      const int need = p->spec.fractional() ? 1 : p->spec.whole_gpus();
      ASSERT_EQ(pd.gpus.size(), static_cast<size_t>(need));
      for (int g : pd.gpus) {
        EXPECT_EQ(CheckGpu(fleet_.gpus[g], config_.placement), GpuBlock::kNone);
        EXPECT_TRUE(MatchesJob(fleet_.gpus[g], p->spec));
        if (p->spec.one_model()) {
          EXPECT_EQ(fleet_.gpus[g].name, fleet_.gpus[pd.gpus[0]].name);
        }
        // Once the victims leave, the preemptor fits there.
        int staying = 0;
        for (const RunningJob& r : running_) {
          bool victim = std::find(pd.victims.begin(), pd.victims.end(), r.id) != pd.victims.end();
          if (r.stopping || victim) continue;
          if (std::find(r.gpus.begin(), r.gpus.end(), g) == r.gpus.end()) continue;
          staying += r.spec.fractional() ? r.spec.gpu_twentieths : kTwentiethsPerGpu;
        }
        EXPECT_LE(staying + (p->spec.fractional() ? p->spec.gpu_twentieths : kTwentiethsPerGpu),
                  kTwentiethsPerGpu)
            << "GPU " << g;
      }
      claim(pd.for_job, pd.gpus);
    }
  }

  // What the daemon does with the decisions.
  void Apply(const Decisions& d) {
    for (JobId id : d.dropped_claims) {
      ever_dropped_.insert(id);
      for (PendingJob& p : pending_) {
        if (p.id == id) p.claimed_gpus.clear();
      }
    }
    for (const StartDecision& s : d.starts) {
      auto it = std::find_if(pending_.begin(), pending_.end(),
                             [&](const PendingJob& p) { return p.id == s.job; });
      RunningJob r;
      r.id = it->id;
      r.spec = it->spec;
      r.started = now_;
      r.gpus = s.gpus;
      submitted_[r.id] = it->submitted;
      // Its wait is over: a later preemption for it is a new one.
      std::erase_if(stopped_for_, [&](const auto& pair) { return pair.second == r.id; });
      running_.push_back(std::move(r));
      pending_.erase(it);
    }
    for (const PreemptDecision& pd : d.preemptions) {
      for (RunningJob& r : running_) {
        if (std::find(pd.victims.begin(), pd.victims.end(), r.id) == pd.victims.end()) continue;
        r.stopping = true;
        r.stop_deadline = now_ + r.spec.checkpoint_grace;
        r.stopping_for = pd.for_job;
        requeue_.insert(r.id);
      }
      for (PendingJob& p : pending_) {
        if (p.id == pd.for_job) p.claimed_gpus = pd.gpus;
      }
    }
    AccountRunningJobs(running_, &fleet_);
  }

  // Time passes: jobs exit, stop, get cancelled; GPUs change; jobs arrive.
  void Churn() {
    now_ += Int(0, 90) * kSecondMs;
    std::vector<RunningJob> still;
    for (RunningJob& r : running_) {
      bool ends = (r.stopping && (now_ >= r.stop_deadline || Chance(50))) ||
                  (r.spec.time_limit > 0 && now_ >= r.started + r.spec.time_limit) ||
                  Chance(5);
      if (!ends) {
        if (!r.stopping && Chance(4)) {  // cancelled: stopping for nobody
          r.stopping = true;
          r.stop_deadline = now_ + r.spec.checkpoint_grace;
        }
        still.push_back(std::move(r));
        continue;
      }
      if (requeue_.erase(r.id)) {  // preempted: back in the queue
        pending_.push_back({.id = r.id, .spec = r.spec, .submitted = submitted_[r.id]});
      }
    }
    running_ = std::move(still);
    // Cancelling a pending job drops its claim with it.
    if (!pending_.empty() && Chance(10)) pending_.erase(pending_.begin() + Int(0, pending_.size() - 1));
    for (GpuState& g : fleet_.gpus) {
      if (Chance(5)) Disturb(g);
    }
    for (int i = Int(0, 4); i > 0; --i) Submit();
    AccountRunningJobs(running_, &fleet_);
  }

  std::mt19937_64 rng_;
  FleetState fleet_;
  SchedulerConfig config_;
  TimeMs now_ = 12 * kHourMs;
  JobId next_id_ = 100;
  std::vector<PendingJob> pending_;
  std::vector<RunningJob> running_;
  std::map<JobId, TimeMs> submitted_;
  std::set<JobId> requeue_;                         // stopping because preempted
  std::set<std::pair<JobId, JobId>> stopped_for_;   // (victim, preemptor)
  std::set<JobId> ever_dropped_;                    // preemptors whose claim was dropped
};

TEST(SchedulerRandomTest, InvariantsHoldOverRandomFleetsQueuesAndRunningSets) {
  const uint64_t seed = EnvOr("GPUHERD_SCHED_SEED", 20261203);
  const uint64_t scenarios = EnvOr("GPUHERD_SCHED_SCENARIOS", 2000);
  for (uint64_t i = 0; i < scenarios && !::testing::Test::HasFailure(); ++i) {
    const uint64_t scenario_seed = seed + i;
    SCOPED_TRACE("scenario seed " + std::to_string(scenario_seed) +
                 " (rerun: GPUHERD_SCHED_SEED=" + std::to_string(scenario_seed) +
                 " GPUHERD_SCHED_SCENARIOS=1)");
    Scenario(scenario_seed).Run(8);
  }
}

}  // namespace
}  // namespace gpuherd::sched
