#include "sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "sched/test_fleet.h"

namespace gpuherd::sched {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;
using testing::Gpus;

constexpr TimeMs kNow = 12 * kHourMs;  // 12:00 UTC on the first day

PendingJob Pending(JobId id, JobSpec spec, TimeMs submitted = kNow) {
  return PendingJob{.id = id, .spec = std::move(spec), .submitted = submitted};
}

RunningJob Running(JobId id, JobSpec spec, TimeMs started, std::vector<int> gpus) {
  return RunningJob{.id = id, .spec = std::move(spec), .started = started, .gpus = std::move(gpus)};
}

JobSpec Urgent(int tenths, int priority, DurationMs limit = 0) {
  JobSpec spec = Gpus(tenths, limit);
  spec.priority = priority;
  return spec;
}

JobSpec Preemptible(int tenths, int priority = 0) {
  JobSpec spec = Urgent(tenths, priority);
  spec.preemptible = true;
  return spec;
}

class SchedulerTest : public ::testing::Test {
 protected:
  Decisions Run(int gpus) { return Run(testing::MakeFleet(gpus)); }
  Decisions Run(FleetState fleet) {
    AccountRunningJobs(running_, &fleet);
    Decisions d = Schedule(fleet, pending_, running_, kNow, config_);
    // Every pending job either starts or has a reason.
    EXPECT_EQ(d.starts.size() + d.waiting.size(), pending_.size());
    for (const PendingReason& w : d.waiting) EXPECT_FALSE(w.reason.empty()) << w.job;
    return d;
  }
  std::vector<JobId> Started(const Decisions& d) {
    std::vector<JobId> ids;
    for (const StartDecision& s : d.starts) ids.push_back(s.job);
    return ids;
  }
  std::string Reason(const Decisions& d, JobId id) {
    for (const PendingReason& w : d.waiting) {
      if (w.job == id) return w.reason;
    }
    return "(started)";
  }

  std::vector<PendingJob> pending_;
  std::vector<RunningJob> running_;
  SchedulerConfig config_;
};

TEST_F(SchedulerTest, HigherPriorityFirst) {
  pending_ = {Pending(1, Urgent(10, 0)), Pending(2, Urgent(10, 10))};
  Decisions d = Run(1);
  EXPECT_THAT(Started(d), ElementsAre(2));
  ASSERT_EQ(d.waiting.size(), 1u);
  EXPECT_EQ(d.waiting[0].job, 1);
  EXPECT_EQ(d.waiting[0].rank, 1);
  EXPECT_DOUBLE_EQ(d.waiting[0].priority, 0);
}

TEST_F(SchedulerTest, TiesGoToTheOlderThenTheLowerId) {
  config_.weights.w_age = 0;
  pending_ = {Pending(5, Gpus(10), kNow - 10), Pending(3, Gpus(10), kNow)};
  EXPECT_THAT(Started(Run(1)), ElementsAre(5));
  pending_ = {Pending(5, Gpus(10), kNow), Pending(3, Gpus(10), kNow)};
  EXPECT_THAT(Started(Run(1)), ElementsAre(3));
}

TEST_F(SchedulerTest, AgingLetsAWaitingJobOvertake) {
  pending_ = {Pending(1, Urgent(10, 0), kNow - 2 * kHourMs), Pending(2, Urgent(10, 50))};
  EXPECT_THAT(Started(Run(1)), ElementsAre(1));
  config_.weights.w_age = 0;
  EXPECT_THAT(Started(Run(1)), ElementsAre(2));
}

TEST_F(SchedulerTest, FairSharePenaltyAndUserLevel) {
  JobSpec bob = Gpus(10);
  bob.user = "bob";
  pending_ = {Pending(1, Gpus(10)), Pending(2, bob)};
  pending_[0].user_gpu_hours = 10;  // alice used the GPUs all morning
  EXPECT_THAT(Started(Run(1)), ElementsAre(2));
  config_.user_levels["alice"] = 3;  // her level outweighs 10 GPU-hours
  EXPECT_THAT(Started(Run(1)), ElementsAre(1));
}

TEST_F(SchedulerTest, GangStartsOnlyWithAllItsGpus) {
  running_ = {Running(9, Gpus(10), kNow - kHourMs, {0})};
  pending_ = {Pending(1, Gpus(40))};
  Decisions d = Run(4);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("waiting for 4 GPUs: 3 free, 1 busy"));
  running_.clear();
  d = Run(4);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, UnorderedElementsAre(0, 1, 2, 3));
}

class BackfillTest : public SchedulerTest {
 protected:
  // 4 GPUs; job 9 holds 0-2 until 13:00; job 1 (4 GPUs, urgent) is blocked
  // and reserves all four from 13:00.
  BackfillTest() {
    running_ = {Running(9, Gpus(30, 2 * kHourMs), kNow - kHourMs, {0, 1, 2})};
    pending_ = {Pending(1, Urgent(40, 50))};
  }
};

TEST_F(BackfillTest, TopBlockedJobGetsAReservation) {
  Decisions d = Run(4);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_EQ(Reason(d, 1), "waiting for 4 GPUs: 1 free, 3 busy; next in line, expected to "
                          "start by 13:00 UTC");
}

TEST_F(BackfillTest, ShortJobWithATimeLimitBackfills) {
  pending_.push_back(Pending(2, Gpus(10, 30 * kMinuteMs)));
  Decisions d = Run(4);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, 2);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(3));
}

TEST_F(BackfillTest, JobWithoutATimeLimitDoesNot) {
  pending_.push_back(Pending(2, Gpus(10)));
  Decisions d = Run(4);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_EQ(Reason(d, 2), "reservation for job 1 blocks it until 13:00 UTC; with a time limit "
                          "under 1h00m it could start now");
}

TEST_F(BackfillTest, JobThatWouldDelayTheReservationDoesNot) {
  pending_.push_back(Pending(2, Gpus(10, 61 * kMinuteMs)));
  pending_.push_back(Pending(3, Gpus(10, 60 * kMinuteMs)));  // ends exactly at 13:00: fine
  Decisions d = Run(4);
  EXPECT_THAT(Started(d), ElementsAre(3));
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1 blocks it"));
}

TEST_F(BackfillTest, JobOnGpusTheReservationDoesNotNeedStarts) {
  // Six GPUs: 0-2 free at 13:00, 3 held without a limit, 4-5 free now. Job 1
  // needs four by 13:00: 0-2 and one of 4-5; the other one is spare.
  running_.push_back(Running(8, Gpus(10), kNow - kHourMs, {3}));
  pending_.push_back(Pending(2, Gpus(10)));
  pending_.push_back(Pending(3, Gpus(10)));
  Decisions d = Run(6);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].job, 2);
  EXPECT_THAT(d.starts[0].gpus, ::testing::AnyOf(ElementsAre(4), ElementsAre(5)));
  EXPECT_THAT(Reason(d, 3), HasSubstr("reservation for job 1 blocks it until 13:00 UTC"));
}

TEST_F(BackfillTest, OffMeansStrictOrder) {
  config_.backfill = false;
  pending_.push_back(Pending(2, Gpus(10, 5 * kMinuteMs)));
  Decisions d = Run(4);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_EQ(Reason(d, 2), "waits behind job 1 (backfill is off)");
}

TEST_F(SchedulerTest, RunningJobsWithoutLimitsGiveNoTime) {
  running_ = {Running(9, Gpus(10), kNow - kHourMs, {0})};
  pending_ = {Pending(1, Urgent(20, 10)), Pending(2, Gpus(10, 5 * kMinuteMs))};
  Decisions d = Run(2);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("next in line, but the jobs on the GPUs it needs have no "
                                      "time limit"));
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1 blocks it (the GPUs it could use"));
}

TEST_F(SchedulerTest, UnusableGpusAreNamedAndHoldNobodyUp) {
  FleetState fleet = testing::MakeFleet(4);
  fleet.gpus[0].drained = true;
  fleet.gpus[1].temp_c = 91;
  pending_ = {Pending(1, Urgent(40, 50)), Pending(2, Gpus(10))};
  Decisions d = Run(fleet);
  EXPECT_EQ(Reason(d, 1), "waiting for 4 GPUs: 2 free, 1 drained, 1 too hot (91 °C ≥ 87 °C)");
  EXPECT_THAT(Started(d), ElementsAre(2));
}

TEST_F(SchedulerTest, JobBiggerThanTheMatchingGpusSaysSo) {
  JobSpec spec = Gpus(20);
  spec.model = "H100";
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[1].name = "NVIDIA A100";
  pending_ = {Pending(1, spec)};
  EXPECT_THAT(Reason(Run(fleet), 1), HasSubstr("only 1 GPU(s) here match"));
}

TEST_F(SchedulerTest, PreemptsTheCheapestVictim) {
  running_ = {Running(7, Preemptible(10), kNow - 2 * kHourMs, {0}),
              Running(8, Preemptible(10), kNow - 10 * kMinuteMs, {1})};
  pending_ = {Pending(1, Urgent(10, 50))};
  Decisions d = Run(2);
  EXPECT_THAT(d.starts, IsEmpty());
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(8));
  EXPECT_EQ(d.preemptions[0].for_job, 1);
  EXPECT_THAT(Reason(d, 1), HasSubstr("preempting job 8 (lower urgency, preemptible)"));
}

TEST_F(SchedulerTest, PreemptionPrefersOneMultiGpuVictimWhenCheaper) {
  // Job 7: 2 GPUs for 10 min (20 GPU-min); jobs 8 and 9: 1 GPU for 15 min each (30).
  running_ = {Running(7, Preemptible(20), kNow - 10 * kMinuteMs, {0, 1}),
              Running(8, Preemptible(10), kNow - 15 * kMinuteMs, {2}),
              Running(9, Preemptible(10), kNow - 15 * kMinuteMs, {3})};
  pending_ = {Pending(1, Urgent(20, 50))};
  Decisions d = Run(4);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(7));
  // With job 7 running for hours, the two small ones are cheaper.
  running_[0].started = kNow - 3 * kHourMs;
  d = Run(4);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(8, 9));
}

TEST_F(SchedulerTest, EqualCostVictimsGoLowestUrgencyFirst) {
  running_ = {Running(7, Preemptible(10, 5), kNow - kHourMs, {0}),
              Running(8, Preemptible(10, -5), kNow - kHourMs, {1})};
  pending_ = {Pending(1, Urgent(10, 50))};
  Decisions d = Run(2);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(8));
}

TEST_F(SchedulerTest, NeverPreemptsEqualOrHigherOrNonPreemptible) {
  JobSpec fixed = Urgent(10, 0);  // lower, but not preemptible
  running_ = {Running(7, Preemptible(10, 50), kNow - kMinuteMs, {0}),
              Running(8, Preemptible(10, 60), kNow - kMinuteMs, {1}),
              Running(9, fixed, kNow - kMinuteMs, {2})};
  pending_ = {Pending(1, Urgent(10, 50))};
  Decisions d = Run(3);
  EXPECT_THAT(d.preemptions, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("next in line"));
}

TEST_F(SchedulerTest, NoPreemptionWhenDisabled) {
  config_.preemption = false;
  running_ = {Running(7, Preemptible(10), kNow - kHourMs, {0})};
  pending_ = {Pending(1, Urgent(10, 50))};
  EXPECT_THAT(Run(1).preemptions, IsEmpty());
}

TEST_F(SchedulerTest, StoppingVictimsAreNotPreemptedTwice) {
  running_ = {Running(7, Preemptible(10), kNow - kHourMs, {0}),
              Running(8, Preemptible(10), kNow - kMinuteMs, {1})};
  running_[1].stopping = true;
  running_[1].stop_deadline = kNow + 30 * kSecondMs;
  pending_ = {Pending(1, Urgent(10, 50))};
  Decisions d = Run(2);
  EXPECT_THAT(d.preemptions, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("waiting for job 8 to stop"));
}

TEST_F(SchedulerTest, PreemptedGpusAreNotGivenToLowerJobs) {
  // GPU 1 is free but job 1 needs both: job 7 is preempted, both GPUs are
  // claimed for job 1 (rule 6), and job 2 may not take GPU 1 meanwhile.
  running_ = {Running(7, Preemptible(10), kNow - kHourMs, {0})};
  pending_ = {Pending(1, Urgent(20, 50)), Pending(2, Gpus(10))};
  Decisions d = Run(2);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(0, 1));
  EXPECT_EQ(Reason(d, 2), "waiting for 1 GPU: 0 free, 2 busy; GPUs 0, 1 are claimed for job 1");
}

TEST_F(SchedulerTest, FractionalVictimsFreeTheirShare) {
  running_ = {Running(7, Preemptible(6), kNow - kHourMs, {0}),
              Running(8, Preemptible(3), kNow - kMinuteMs, {0})};
  pending_ = {Pending(1, Urgent(5, 50))};
  Decisions d = Run(1);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(7));  // 8 alone frees too little
}

TEST_F(SchedulerTest, UserRunningGpuLimit) {
  config_.max_running_gpus_per_user = 2;
  JobSpec bob = Gpus(10);
  bob.user = "bob";
  pending_ = {Pending(1, Gpus(10), kNow - 3), Pending(2, Gpus(10), kNow - 2),
              Pending(3, Gpus(10), kNow - 1), Pending(4, bob)};
  Decisions d = Run(8);
  EXPECT_THAT(Started(d), UnorderedElementsAre(1, 2, 4));
  EXPECT_EQ(Reason(d, 3), "user limit: 2 running GPUs (alice holds 2)");
  running_ = {Running(9, Gpus(5), kNow, {0})};
  pending_ = {Pending(1, Gpus(20)), Pending(2, Gpus(15 - 5))};
  d = Run(8);
  EXPECT_THAT(Started(d), ElementsAre(2));
  EXPECT_EQ(Reason(d, 1), "user limit: 2 running GPUs (alice holds 0.5)");
}

TEST_F(SchedulerTest, UserQueuedJobLimit) {
  config_.max_queued_jobs_per_user = 2;
  running_ = {Running(9, Gpus(10), kNow, {0})};
  pending_ = {Pending(1, Gpus(10), kNow - 3), Pending(2, Gpus(10), kNow - 2),
              Pending(3, Gpus(10), kNow - 1)};
  Decisions d = Run(1);
  EXPECT_THAT(Reason(d, 1), HasSubstr("waiting for 1 GPU"));
  EXPECT_THAT(Reason(d, 3), HasSubstr("user limit: 2 queued jobs are considered at a time"));
  EXPECT_FALSE(CheckQueueLimit("alice", 2, 1, config_).ok());
  EXPECT_TRUE(CheckQueueLimit("alice", 1, 1, config_).ok());
}

// Issue 29: the message said "already has 99999" for a user with fewer jobs
// (an array's tasks were added to the count). It states the limit and the
// user's own count, at limit - 1, limit and limit + 1.
TEST(QueueLimitTest, MessageStatesTheLimitAndTheTrueCount) {
  SchedulerConfig config;
  config.max_queued_jobs_per_user = 100000;
  EXPECT_TRUE(CheckQueueLimit("alice", 99999, 1, config).ok());
  const Status at = CheckQueueLimit("alice", 100000, 1, config);
  EXPECT_EQ(at.code(), Code::kResourceExhausted);
  EXPECT_EQ(at.message(),
            "a user may have at most 100000 unfinished jobs; alice has 100000: wait for some to finish or cancel some");
  EXPECT_EQ(CheckQueueLimit("alice", 100001, 1, config).message(),
            "a user may have at most 100000 unfinished jobs; alice has 100001: wait for some to finish or cancel some");
  // An array: the count is the user's, the array's size is said apart.
  EXPECT_TRUE(CheckQueueLimit("alice", 99990, 10, config).ok());
  EXPECT_EQ(CheckQueueLimit("alice", 99990, 11, config).message(),
            "a user may have at most 100000 unfinished jobs; alice has 99990, and this array adds 11 (10 more fit): "
            "wait for some to finish or cancel some");
  EXPECT_EQ(CheckQueueLimit("alice", 100000, 20, config).message(),
            "a user may have at most 100000 unfinished jobs; alice has 100000, and this array adds 20 (0 more fit): "
            "wait for some to finish or cancel some");
  config.max_queued_jobs_per_user = 0;  // no limit
  EXPECT_TRUE(CheckQueueLimit("alice", 1 << 30, 1 << 20, config).ok());
}

TEST_F(SchedulerTest, DependencyStates) {
  pending_ = {Pending(1, Gpus(10)), Pending(2, Gpus(10)), Pending(3, Gpus(10))};
  pending_[0].deps = Dependencies::kWaiting;
  pending_[0].blocking_dep = 7;
  pending_[0].blocking_dep_state = JobState::kRunning;
  pending_[1].deps = Dependencies::kFailed;
  pending_[1].blocking_dep = 8;
  pending_[1].blocking_dep_state = JobState::kFailed;
  Decisions d = Run(4);
  EXPECT_THAT(Started(d), ElementsAre(3));
  EXPECT_EQ(Reason(d, 1), "depends on job 7 (running)");
  EXPECT_EQ(Reason(d, 2), "dependency job 8 failed: this job cannot start; cancel it, or "
                          "requeue job 8");
}

JobSpec Pinned(std::vector<std::string> uuids) {
  JobSpec spec = Gpus(static_cast<int>(uuids.size()) * kTwentiethsPerGpu);
  spec.pinned_gpus = std::move(uuids);
  spec.user = "root";
  return spec;
}

TEST_F(SchedulerTest, MaintenanceJobRunsOnItsDrainedAndUnhealthyGpusFirst) {
  FleetState fleet = testing::MakeFleet(4);
  fleet.gpus[1].drained = true;
  fleet.gpus[2].healthy = false;
  pending_ = {Pending(1, Urgent(10, 100)), Pending(2, Pinned({"GPU-1", "GPU-2"}))};
  Decisions d = Run(fleet);
  ASSERT_THAT(Started(d), UnorderedElementsAre(1, 2));
  for (const StartDecision& s : d.starts) {
    if (s.job == 2) {
      EXPECT_THAT(s.gpus, ElementsAre(1, 2));
    } else {
      EXPECT_THAT(s.gpus, ::testing::AnyOf(ElementsAre(0), ElementsAre(3)));
    }
  }
}

TEST_F(SchedulerTest, MaintenanceJobWaitsForItsGpusAndKeepsNewWorkOff) {
  running_ = {Running(7, Gpus(5), kNow - kHourMs, {0})};
  // A fraction would pack onto GPU 0 beside job 7; the burn-in claims it.
  pending_ = {Pending(2, Pinned({"GPU-0"}), kNow - 5), Pending(3, Gpus(5)),
              Pending(4, Urgent(20, 50))};
  Decisions d = Run(2);
  EXPECT_THAT(Reason(d, 2), HasSubstr("waits for job 7"));
  ASSERT_THAT(Started(d), ElementsAre(3));
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(1));
  EXPECT_THAT(Reason(d, 4), HasSubstr("waiting for 2 GPUs"));
  EXPECT_THAT(d.preemptions, IsEmpty());
}

TEST_F(SchedulerTest, AJobBehindAMaintenanceJobOnTheOnlyGpuWaitsWithoutAReservation) {
  // The one GPU is busy and claimed: nothing is left to reserve for job 3.
  running_ = {Running(7, Gpus(10), kNow - kHourMs, {0})};
  pending_ = {Pending(2, Pinned({"GPU-0"}), kNow - 5), Pending(3, Gpus(10)), Pending(4, Gpus(5))};
  Decisions d = Run(1);
  EXPECT_THAT(Started(d), IsEmpty());
  EXPECT_THAT(Reason(d, 2), HasSubstr("waits for job 7"));
  EXPECT_THAT(Reason(d, 3), HasSubstr("claimed by a maintenance job"));
  EXPECT_THAT(Reason(d, 4), HasSubstr("claimed by a maintenance job"));
}

TEST_F(SchedulerTest, MaintenanceJobsOnTheSameGpuGoInSubmissionOrder) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[1].lost = true;
  pending_ = {Pending(5, Pinned({"GPU-0"}), kNow - 1), Pending(4, Pinned({"GPU-0"}), kNow),
              Pending(6, Pinned({"GPU-1"})), Pending(8, Pinned({"GPU-9"}))};
  Decisions d = Run(fleet);
  EXPECT_THAT(Started(d), ElementsAre(5));
  EXPECT_THAT(Reason(d, 4), HasSubstr("claimed by an earlier maintenance job"));
  EXPECT_THAT(Reason(d, 6), HasSubstr("GPU 1 is lost"));
  EXPECT_THAT(Reason(d, 8), HasSubstr("GPU GPU-9 is not in this machine"));
}

TEST_F(SchedulerTest, CpuOnlyJobsStartWithoutGpus) {
  running_ = {Running(9, Gpus(10), kNow, {0})};
  pending_ = {Pending(1, Gpus(0))};
  Decisions d = Run(1);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, IsEmpty());
}

TEST_F(SchedulerTest, FractionsShareOneGpuWithinAPass) {
  pending_ = {Pending(1, Gpus(5), kNow - 3), Pending(2, Gpus(3), kNow - 2),
              Pending(3, Gpus(3), kNow - 1)};
  Decisions d = Run(2);
  ASSERT_EQ(d.starts.size(), 3u);
  EXPECT_EQ(d.starts[0].gpus, d.starts[1].gpus);  // 0.5 + 0.3 on one GPU
  EXPECT_NE(d.starts[2].gpus, d.starts[0].gpus);  // 0.3 more does not fit there
}

// Twentieths: four quarters fill a GPU exactly; 0.95 and 0.05 share one.
TEST_F(SchedulerTest, QuartersAndTwentiethsFillAGpuExactly) {
  FleetState fleet = testing::MakeFleet(2);
  for (GpuState& g : fleet.gpus) g.memory_total_bytes = 80 * testing::kGiB;
  for (JobId id = 1; id <= 5; ++id) pending_.push_back(Pending(id, testing::Twentieths(5), kNow - 10 + id));
  pending_.push_back(Pending(6, testing::Twentieths(19), kNow));
  pending_.push_back(Pending(7, testing::Twentieths(1), kNow + 1));
  Decisions d = Run(fleet);
  std::map<int, int> twentieths;
  for (const StartDecision& s : d.starts) {
    ASSERT_EQ(s.gpus.size(), 1u);
    for (const PendingJob& p : pending_) {
      if (p.id == s.job) twentieths[s.gpus[0]] += p.spec.gpu_twentieths;
    }
  }
  // 4 quarters on one GPU, the fifth quarter with 0.05 on the other; 0.95
  // fits nowhere then (0.25 + 0.95 > 1) and waits.
  EXPECT_THAT(Started(d), UnorderedElementsAre(1, 2, 3, 4, 5, 7));
  EXPECT_NE(Reason(d, 6), "(started)");
  std::vector<int> used;
  for (const auto& [gpu, t] : twentieths) used.push_back(t);
  EXPECT_THAT(used, UnorderedElementsAre(20, 6));
}

TEST_F(SchedulerTest, FractionReservationWaitsForItsShare) {
  running_ = {Running(9, Gpus(8, 30 * kMinuteMs), kNow, {0})};
  pending_ = {Pending(1, Urgent(5, 50)), Pending(2, Gpus(1))};
  Decisions d = Run(1);
  EXPECT_THAT(Reason(d, 1), HasSubstr("expected to start by 12:30 UTC"));
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1"));
}

// Rule 7: preemption picks GPUs first, victims second.
TEST_F(SchedulerTest, PreemptionTakesTheBestConnectedGpusThenTheCheapestVictims) {
  // GPUs 0-3 (NVLink) run work nothing may preempt. Of 4-7, the two cheapest
  // victims sit on 4 and 6, joined only by the NUMA node; 4+5 share a PCIe
  // switch and cost 11 GPU-minutes, 6+7 cost 62.
  running_ = {Running(20, Urgent(40, 90), kNow - kHourMs, {0, 1, 2, 3}),
              Running(24, Preemptible(10, -10), kNow - 1 * kMinuteMs, {4}),
              Running(25, Preemptible(10, -10), kNow - 10 * kMinuteMs, {5}),
              Running(26, Preemptible(10, -10), kNow - 2 * kMinuteMs, {6}),
              Running(27, Preemptible(10, -10), kNow - 60 * kMinuteMs, {7})};
  pending_ = {Pending(1, Urgent(20, 50))};
  Decisions d = Run(testing::MakeServer8());
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(24, 25));
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(4, 5));
}

TEST_F(SchedulerTest, PreemptionPrefersAnNvlinkPairOverCheaperVictimsBehindASwitch) {
  // Every GPU holds a preemptible job; the NVLink pair costs more than a
  // PCIe pair but is what the job would get on an empty machine.
  for (int g = 0; g < 8; ++g) {
    running_.push_back(Running(20 + g, Preemptible(10, -10),
                               kNow - (g < 4 ? 30 : 5) * kMinuteMs, {g}));
  }
  pending_ = {Pending(1, Urgent(20, 50))};
  Decisions d = Run(testing::MakeServer8());
  ASSERT_EQ(d.preemptions.size(), 1u);
  ASSERT_EQ(d.preemptions[0].gpus.size(), 2u);
  EXPECT_LT(d.preemptions[0].gpus[0], 4);
  EXPECT_LT(d.preemptions[0].gpus[1], 4);
  EXPECT_EQ(d.preemptions[0].victims.size(), 2u);
}

// Rule 6: claims. A small daemon: applies each pass's decisions the way the
// daemon does and lets victims exit one at a time.
class ClaimTest : public SchedulerTest {
 protected:
  ClaimTest() {
    // `--array 8 --priority -10 --preemptible` on 8 GPUs, then an urgent
    // 2-GPU job.
    for (int g = 0; g < 8; ++g) {
      running_.push_back(Running(10 + g, Preemptible(10, -10), kNow - kHourMs, {g}));
      submitted_[10 + g] = kNow - 10 * kMinuteMs;
    }
    pending_ = {Pending(1, Urgent(20, 50))};
  }

  Decisions Pass() {
    Decisions d = Run(fleet_);
    for (const StartDecision& s : d.starts) {
      auto it = std::find_if(pending_.begin(), pending_.end(),
                             [&](const PendingJob& p) { return p.id == s.job; });
      running_.push_back(Running(s.job, it->spec, kNow, s.gpus));
      pending_.erase(it);
    }
    for (const PreemptDecision& p : d.preemptions) {
      for (JobId v : p.victims) {
        for (RunningJob& r : running_) {
          if (r.id != v) continue;
          EXPECT_FALSE(r.stopping) << "job " << v << " signalled twice";
          r.stopping = true;
          r.stop_deadline = kNow + r.spec.checkpoint_grace;
          r.stopping_for = p.for_job;
          ++stops_[{v, p.for_job}];
        }
      }
      for (PendingJob& j : pending_) {
        if (j.id == p.for_job) j.claimed_gpus = p.gpus;
      }
    }
    for (JobId id : d.dropped_claims) {
      for (PendingJob& j : pending_) {
        if (j.id == id) j.claimed_gpus.clear();
      }
    }
    return d;
  }

  // The victim's process exits; it is requeued.
  void Exit(JobId id) {
    auto it = std::find_if(running_.begin(), running_.end(),
                           [&](const RunningJob& r) { return r.id == id; });
    ASSERT_NE(it, running_.end());
    pending_.push_back(Pending(id, it->spec, submitted_[id]));
    running_.erase(it);
  }

  FleetState fleet_ = testing::MakeServer8();
  std::map<JobId, TimeMs> submitted_;
  std::map<std::pair<JobId, JobId>, int> stops_;  // (victim, preemptor) → signals
};

TEST_F(ClaimTest, VictimsAreStoppedOnceAndTheClaimedGpusGoToThePreemptor) {
  Decisions d = Pass();
  ASSERT_EQ(d.preemptions.size(), 1u);
  const std::vector<JobId> victims = d.preemptions[0].victims;
  const std::vector<int> claimed = d.preemptions[0].gpus;
  ASSERT_EQ(victims.size(), 2u);
  ASSERT_EQ(claimed.size(), 2u);
  EXPECT_THAT(Reason(d, 1), HasSubstr("preempting jobs"));

  // While they stop: nothing more is preempted for job 1.
  d = Pass();
  EXPECT_THAT(d.preemptions, IsEmpty());
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("held for it"));

  // The first victim is back in the queue; its old GPU is free but claimed.
  Exit(victims[0]);
  d = Pass();
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(d.preemptions, IsEmpty());
  EXPECT_THAT(Reason(d, victims[0]), HasSubstr("claimed for job 1"));

  // Both gone: job 1 starts on its claim at once; the victims wait.
  Exit(victims[1]);
  d = Pass();
  ASSERT_THAT(Started(d), ElementsAre(1));
  EXPECT_EQ(d.starts[0].gpus, claimed);
  EXPECT_THAT(d.preemptions, IsEmpty());
  d = Pass();
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(d.preemptions, IsEmpty());
  for (const auto& [key, n] : stops_) EXPECT_EQ(n, 1) << "job " << key.first;
}

TEST_F(ClaimTest, AClaimOnADrainedGpuIsDroppedAndNoVictimIsStoppedTwice) {
  Decisions d = Pass();
  ASSERT_EQ(d.preemptions.size(), 1u);
  const std::vector<int> claimed = d.preemptions[0].gpus;
  const std::vector<JobId> victims = d.preemptions[0].victims;
  ASSERT_EQ(claimed.size(), 2u);
  fleet_.gpus[claimed[1]].drained = true;
  d = Pass();
  EXPECT_THAT(d.dropped_claims, ElementsAre(1));
  // Its victims are still stopping for it: no second preemption yet.
  EXPECT_THAT(d.preemptions, IsEmpty());
  for (JobId v : victims) Exit(v);
  d = Pass();
  EXPECT_THAT(d.dropped_claims, IsEmpty());
  // Scheduled afresh: one GPU is free; preempting again is allowed now.
  EXPECT_THAT(d.starts, IsEmpty());
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].gpus, ::testing::Not(::testing::Contains(claimed[1])));
  for (const auto& [key, n] : stops_) EXPECT_EQ(n, 1) << "job " << key.first;
}

TEST_F(ClaimTest, AClaimHeldByAJobThatIsNotStoppingIsDropped) {
  pending_[0].claimed_gpus = {0, 1};  // no victim was ever signalled there
  Decisions d = Run(fleet_);
  EXPECT_THAT(d.dropped_claims, ElementsAre(1));
}

TEST_F(SchedulerTest, ClaimedGpusStayOffLimitsToHigherJobsToo) {
  // GPU 1 is claimed for job 1; job 2 outranks it but may not take it.
  running_ = {Running(7, Preemptible(10, -10), kNow - kHourMs, {0})};
  running_[0].stopping = true;
  running_[0].stop_deadline = kNow + 30 * kSecondMs;
  running_[0].stopping_for = 1;
  pending_ = {Pending(1, Urgent(20, 50)), Pending(2, Urgent(10, 90))};
  pending_[0].claimed_gpus = {0, 1};
  Decisions d = Run(2);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(d.dropped_claims, IsEmpty());
  EXPECT_THAT(Reason(d, 2), HasSubstr("claimed for job 1"));
  EXPECT_THAT(Reason(d, 1), HasSubstr("waiting for job 7 to leave"));
}

TEST_F(SchedulerTest, AMaintenanceJobGoesFirstAndDropsAClaimOnItsGpu) {
  running_ = {Running(7, Preemptible(10, -10), kNow - kHourMs, {0})};
  running_[0].stopping = true;
  running_[0].stop_deadline = kNow + 30 * kSecondMs;
  running_[0].stopping_for = 1;
  pending_ = {Pending(1, Urgent(20, 50)), Pending(2, Pinned({"GPU-1"}))};
  pending_[0].claimed_gpus = {0, 1};
  Decisions d = Run(2);
  ASSERT_THAT(Started(d), ElementsAre(2));
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(1));
  EXPECT_THAT(d.dropped_claims, ElementsAre(1));
  EXPECT_THAT(d.preemptions, IsEmpty());  // job 7 is still stopping for job 1
  EXPECT_THAT(Reason(d, 1), HasSubstr("claimed by a maintenance job"));
}

TEST_F(SchedulerTest, AClaimedFractionStartsBesideTheFractionsThatStay) {
  // GPU 0: job 8 (0.3) stays, job 7 (0.6) stops for job 1 (0.5).
  running_ = {Running(7, Preemptible(6, -10), kNow - kHourMs, {0}),
              Running(8, Gpus(3), kNow - kHourMs, {0})};
  running_[0].stopping = true;
  running_[0].stop_deadline = kNow + 30 * kSecondMs;
  running_[0].stopping_for = 1;
  pending_ = {Pending(1, Urgent(5, 50)), Pending(2, Gpus(1))};
  pending_[0].claimed_gpus = {0};
  Decisions d = Run(1);
  EXPECT_THAT(d.starts, IsEmpty());  // job 2 would fit beside them, but GPU 0 is claimed
  EXPECT_THAT(d.dropped_claims, IsEmpty());
  EXPECT_EQ(Reason(d, 1), "waiting for job 7 to leave GPU 0, held for it since it preempted "
                          "jobs to get them");
  running_.erase(running_.begin());  // job 7 exits; job 8 stays
  d = Run(1);
  ASSERT_THAT(Started(d), ElementsAre(1));
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(0));
}

// Rule 8: a stopping job's GPUs free up for the first job in line.
class StoppingTest : public SchedulerTest {
 protected:
  // GPUs 0-3 are H100s, 4-7 RTX 3090s. Job 1 wants the four H100s; the
  // fractions that held them were cancelled: GPU 0 is free, 1-3 stopping.
  StoppingTest() {
    fleet_ = testing::MakeFleet(8);
    for (int g = 4; g < 8; ++g) fleet_.gpus[g].name = "NVIDIA GeForce RTX 3090";
    for (int g = 1; g < 4; ++g) {
      running_.push_back(Running(10 + g, Gpus(5), kNow - kHourMs, {g}));
      running_.back().stopping = true;
      running_.back().stop_deadline = kNow + 30 * kSecondMs;
    }
    for (int g = 4; g < 8; ++g) running_.push_back(Running(20 + g, Gpus(10), kNow - kHourMs, {g}));
    JobSpec first = Gpus(40);
    first.model = "H100";
    pending_ = {Pending(1, first, kNow - kHourMs)};
  }
  JobSpec H100(DurationMs limit) {
    JobSpec spec = Gpus(10, limit);
    spec.model = "H100";
    return spec;
  }
  FleetState fleet_;
};

TEST_F(StoppingTest, TheGpusOfStoppingJobsAreReservedForTheFirstJob) {
  pending_.push_back(Pending(2, H100(0)));
  Decisions d = Run(fleet_);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("waiting for jobs 11, 12, 13 to stop"));
  EXPECT_THAT(Reason(d, 1), HasSubstr("expected to start by 12:00 UTC"));
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1 blocks it"));
}

TEST_F(StoppingTest, OnlyAJobThatEndsBeforeTheStopDeadlineBackfills) {
  pending_.push_back(Pending(2, H100(5 * kMinuteMs)));
  pending_.push_back(Pending(3, H100(20 * kSecondMs)));
  Decisions d = Run(fleet_);
  EXPECT_THAT(Started(d), ElementsAre(3));
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1 blocks it"));
}

// Rule 9: one model per multi-GPU job.
TEST_F(SchedulerTest, AMultiGpuJobGetsGpusOfOneModel) {
  FleetState fleet = testing::MakeFleet(6);
  fleet.gpus[4].name = fleet.gpus[5].name = "NVIDIA GeForce RTX 3090";
  running_ = {Running(9, Gpus(30), kNow - kHourMs, {0, 1, 2})};
  pending_ = {Pending(1, Gpus(20))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(4, 5));  // not the last H100 and a 3090
}

TEST_F(SchedulerTest, AJobBiggerThanAnyOneModelWaitsAndSaysHowToMix) {
  FleetState fleet = testing::MakeFleet(5);
  fleet.gpus[4].name = "NVIDIA GeForce RTX 3090";
  pending_ = {Pending(1, Gpus(50))};
  Decisions d = Run(fleet);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(Reason(d, 1), HasSubstr("needs 5 GPUs of one model; at most 4 are NVIDIA H100 80GB "
                                      "HBM3 (submit it with --mixed-models, or mixed_models: true in its spec, to mix)"));
  pending_[0].spec.mixed_models = true;
  d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, UnorderedElementsAre(0, 1, 2, 3, 4));
}

TEST_F(SchedulerTest, ReservationsAndPreemptionsKeepToOneModel) {
  FleetState fleet = testing::MakeFleet(4);
  fleet.gpus[2].name = fleet.gpus[3].name = "NVIDIA GeForce RTX 3090";
  // GPU 0 (H100) frees at 13:00, GPU 2 (3090) at 12:30, GPU 3 (3090) at 14:00.
  running_ = {Running(7, Gpus(10, 2 * kHourMs), kNow - kHourMs, {0}),
              Running(8, Gpus(10, kHourMs), kNow - 30 * kMinuteMs, {2}),
              Running(9, Gpus(10, 3 * kHourMs), kNow - kHourMs, {3})};
  pending_ = {Pending(1, Urgent(20, 50))};
  Decisions d = Run(fleet);
  EXPECT_THAT(Reason(d, 1), HasSubstr("expected to start by 13:00 UTC"));  // the two H100s
  for (RunningJob& r : running_) r.spec.preemptible = true;
  d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  ASSERT_EQ(d.preemptions[0].gpus.size(), 2u);
  EXPECT_EQ(fleet.gpus[d.preemptions[0].gpus[0]].name, fleet.gpus[d.preemptions[0].gpus[1]].name);
}

// Rule 10: host CPUs and memory.
TEST_F(SchedulerTest, CpusAndMemoryCountAgainstTheMachine) {
  FleetState fleet = testing::MakeFleet(4);
  fleet.host_cpus = 16;
  fleet.host_mem_bytes = 64 * testing::kGiB;
  JobSpec busy = Gpus(10);
  busy.cpus = 12;
  busy.mem_bytes = 16 * testing::kGiB;
  running_ = {Running(9, busy, kNow - kHourMs, {0})};
  JobSpec cpus8 = Gpus(10), cpus_too_many = Gpus(10), mem56 = Gpus(0), mem32 = Gpus(0),
          cpus4 = Gpus(10), cpus1 = Gpus(0);
  cpus8.cpus = 8;
  cpus_too_many.cpus = 64;
  mem56.mem_bytes = 56 * testing::kGiB;
  mem32.mem_bytes = 32 * testing::kGiB;
  cpus4.cpus = 4;
  cpus1.cpus = 1;
  pending_ = {Pending(1, cpus8, kNow - 6), Pending(2, cpus_too_many, kNow - 5),
              Pending(3, mem56, kNow - 4),  Pending(4, mem32, kNow - 3),
              Pending(5, cpus4, kNow - 2),  Pending(6, cpus1, kNow - 1)};
  Decisions d = Run(fleet);
  EXPECT_THAT(Started(d), ElementsAre(4, 5));
  EXPECT_EQ(Reason(d, 1), "waiting for 8 CPUs: 4 of 16 free");
  EXPECT_EQ(Reason(d, 2), "asks for 64 CPUs but this machine has 16, so it cannot start: "
                          "resubmit it asking for less");
  EXPECT_EQ(Reason(d, 3), "waiting for 56 GiB of host memory: 48 GiB of 64 GiB free");
  EXPECT_EQ(Reason(d, 6), "waiting for 1 CPU: 0 of 16 free");  // job 5 took the last 4
  fleet.host_cpus = 0;  // unknown: no check
  fleet.host_mem_bytes = 0;
  EXPECT_THAT(Started(Run(fleet)), UnorderedElementsAre(1, 2, 3, 4, 5, 6));
}

// Rule 11: a full machine ends placement early, with the same reasons.
TEST_F(SchedulerTest, AFullMachineStopsPlacingButStillExplainsEveryJob) {
  for (int g = 0; g < 4; ++g) running_.push_back(Running(20 + g, Urgent(10, 100), kNow - kHourMs, {g}));
  for (JobId id = 1; id <= 500; ++id) {
    pending_.push_back(Pending(id, Gpus(id % 2 ? 10 : 5), kNow - (1000 - id)));
  }
  pending_.push_back(Pending(600, Gpus(0), kNow));                 // no GPU: starts
  pending_.push_back(Pending(601, Gpus(10), kNow));
  pending_.back().deps = Dependencies::kWaiting;
  pending_.back().blocking_dep = 1;
  Decisions d = Run(4);
  EXPECT_THAT(Started(d), ElementsAre(600));
  EXPECT_EQ(Reason(d, 601), "depends on job 1 (pending)");
  EXPECT_THAT(Reason(d, 1), HasSubstr("next in line, but the jobs on the GPUs it needs have no "
                                      "time limit"));
  EXPECT_EQ(Reason(d, 3), "waiting for 1 GPU: 0 free, 4 busy");
  EXPECT_EQ(Reason(d, 499), "waiting for 1 GPU: 0 free, 4 busy");
  EXPECT_EQ(Reason(d, 500), "waiting for 0.5 GPU with 8 GiB: 0 free, 4 busy");
}

// Rule 12: suspect GPUs last for long jobs.
TEST_F(SchedulerTest, Rule12ALongJobAvoidsASuspectGpuWhileAnotherIsFree) {
  FleetState fleet = testing::MakeFleet(3);
  fleet.gpus[0].suspect = true;  // otherwise the first choice: equal GPUs go lowest first
  pending_ = {Pending(1, Gpus(10)), Pending(2, Gpus(10, 4 * kHourMs))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(1));  // no time limit: long
  EXPECT_THAT(d.starts[1].gpus, ElementsAre(2));  // 4 h > 1 h: long
}

TEST_F(SchedulerTest, Rule12ALongJobTakesTheSuspectGpuWhenNoOtherIsFree) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  running_ = {Running(9, Gpus(10), kNow - kHourMs, {1})};
  pending_ = {Pending(1, Gpus(10))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(0));
}

TEST_F(SchedulerTest, Rule12AShortJobUsesASuspectGpuLikeAnyOther) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  fleet.gpus[1].health_score = 90;  // the suspect GPU is the healthier one by burn-in
  pending_ = {Pending(1, Gpus(10, kHourMs)), Pending(2, Gpus(10))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(0));  // exactly 1 h: short, takes the best GPU
  EXPECT_THAT(d.starts[1].gpus, ElementsAre(1));
}

TEST_F(SchedulerTest, Rule12AGangUsesASuspectGpuOnlyWhenItCannotFormWithoutOne) {
  FleetState fleet = testing::MakeServer8();
  fleet.gpus[1].suspect = true;
  pending_ = {Pending(1, Gpus(30))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, UnorderedElementsAre(0, 2, 3));  // the NVLink island less GPU 1
  pending_ = {Pending(2, Gpus(80))};
  d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_EQ(d.starts[0].gpus.size(), 8u);
}

TEST_F(SchedulerTest, Rule12ALongFractionGoesToAFreeGpuRatherThanShareASuspectOne) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  running_ = {Running(9, Gpus(5, 30 * kMinuteMs), kNow - kMinuteMs, {0})};
  pending_ = {Pending(1, Gpus(5)), Pending(2, Gpus(5, 30 * kMinuteMs))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 2u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(1));  // long: the free GPU, not beside job 9
  EXPECT_THAT(d.starts[1].gpus, ElementsAre(0));  // short: packs beside job 9 (best fit)
}

TEST_F(SchedulerTest, Rule12TheShortLimitIsConfigurable) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  config_.short_job_max = 10 * kMinuteMs;
  pending_ = {Pending(1, Gpus(10, 30 * kMinuteMs))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(1));  // 30 min > 10 min: long here
}

TEST_F(SchedulerTest, Rule12AMaintenanceJobPinnedToASuspectGpuRunsThere) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  JobSpec burnin = Gpus(10);
  burnin.pinned_gpus = {"GPU-0"};
  pending_ = {Pending(1, burnin)};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_THAT(d.starts[0].gpus, ElementsAre(0));
}

// Rule 12 in reservations: a long job holds the GPUs it will be placed on.
TEST_F(SchedulerTest, Rule12AReservationForALongJobHoldsGpusThatAreNotSuspect) {
  // GPUs 0-2 free at 13:00, GPU 3 free now: a 2-GPU job reserves two of 0-2.
  running_ = {Running(9, Gpus(30, 2 * kHourMs), kNow - kHourMs, {0, 1, 2})};
  running_.push_back(Running(8, Gpus(10), kNow - kHourMs, {3}));
  pending_ = {Pending(1, Urgent(20, 50))};
  FleetState fleet = testing::MakeFleet(4);
  Decisions d = Run(fleet);
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_THAT(d.reservation->gpus, ElementsAre(0, 1));  // equal GPUs: lowest first
  fleet.gpus[0].suspect = true;
  d = Run(fleet);
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_THAT(d.reservation->gpus, ElementsAre(1, 2));
  EXPECT_EQ(*d.reservation->at, 13 * kHourMs);
  // A short job reserves as before.
  pending_ = {Pending(1, Urgent(20, 50, kHourMs))};
  d = Run(fleet);
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_THAT(d.reservation->gpus, ElementsAre(0, 1));
}

TEST_F(SchedulerTest, Rule12AReservationIsNotDelayedToAvoidASuspectGpu) {
  // The suspect GPU frees first: a long job will take it then (nothing else
  // is free), so it reserves it, and says when.
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  running_ = {Running(8, Gpus(10, kHourMs), kNow - 30 * kMinuteMs, {0}),
              Running(9, Gpus(10, 2 * kHourMs), kNow - 30 * kMinuteMs, {1})};
  pending_ = {Pending(1, Gpus(10))};
  Decisions d = Run(fleet);
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_THAT(d.reservation->gpus, ElementsAre(0));
  EXPECT_THAT(Reason(d, 1), HasSubstr("expected to start by 12:30 UTC"));
}

// Rule 12 in preemption: of victims and GPU sets otherwise equal, a long job
// takes the ones that are not suspect.
TEST_F(SchedulerTest, Rule12PreemptionForALongJobStopsTheEqualVictimOnAGpuThatIsNotSuspect) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].suspect = true;
  running_ = {Running(7, Preemptible(10), kNow - kHourMs, {0}),
              Running(8, Preemptible(10), kNow - kHourMs, {1})};
  pending_ = {Pending(1, Urgent(10, 50))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(8));
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(1));
  // A short job: the lower id, as without a suspect GPU.
  pending_ = {Pending(1, Urgent(10, 50, 30 * kMinuteMs))};
  d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(7));
  // The cheaper victim still goes first: no more work is stopped to avoid
  // a suspect GPU.
  running_[1].started = kNow - 2 * kHourMs;
  pending_ = {Pending(1, Urgent(10, 50))};
  d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(7));
}

TEST_F(SchedulerTest, Rule12PreemptionForALongGangPicksTheNvlinkPairWithoutTheSuspectGpu) {
  FleetState fleet = testing::MakeServer8();
  for (int g = 0; g < 8; ++g) running_.push_back(Running(20 + g, Preemptible(10, -10), kNow - 30 * kMinuteMs, {g}));
  pending_ = {Pending(1, Urgent(20, 50))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(0, 1));
  fleet.gpus[0].suspect = true;
  d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(1, 2));
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(21, 22));
}

TEST_F(SchedulerTest, Rule12PreemptionLeavesOutAFreeSuspectGpuWhenTheSameVictimsMakeRoomElsewhere) {
  // GPU 0 (suspect) is free; one 2-GPU victim on 1 and 2 frees two more;
  // GPU 3 runs work nothing may preempt. The same victim, the same NVLink:
  // the long job is to get 1 and 2.
  FleetState fleet = testing::MakeServer8();
  for (int g = 4; g < 8; ++g) fleet.gpus[g].drained = true;
  running_ = {Running(7, Preemptible(20, -10), kNow - 30 * kMinuteMs, {1, 2}),
              Running(8, Urgent(10, 90), kNow - 30 * kMinuteMs, {3})};
  pending_ = {Pending(1, Urgent(20, 50))};
  Decisions d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(0, 1));  // free already: costs nothing
  fleet.gpus[0].suspect = true;
  d = Run(fleet);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.preemptions[0].victims, ElementsAre(7));
  EXPECT_THAT(d.preemptions[0].gpus, ElementsAre(1, 2));
}

TEST(FormatClockTest, SameDayOrFullDate) {
  EXPECT_EQ(FormatClock(kNow + 2 * kHourMs + 5 * kMinuteMs, kNow), "14:05 UTC");
  EXPECT_EQ(FormatClock(kNow + 3 * 24 * kHourMs, kNow), "1970-01-04 12:00 UTC");
}

}  // namespace
}  // namespace gpuherd::sched
