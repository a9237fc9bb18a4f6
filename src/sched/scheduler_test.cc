#include "sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  // GPU 1 is free but job 1 needs both: job 7 is preempted, and job 2 may
  // not take GPU 1 meanwhile.
  running_ = {Running(7, Preemptible(10), kNow - kHourMs, {0})};
  pending_ = {Pending(1, Urgent(20, 50)), Pending(2, Gpus(10))};
  Decisions d = Run(2);
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_THAT(d.starts, IsEmpty());
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1 blocks it until 12:00 UTC"));
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
  EXPECT_FALSE(CheckQueueLimit("alice", 2, config_).ok());
  EXPECT_TRUE(CheckQueueLimit("alice", 1, config_).ok());
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
  JobSpec spec = Gpus(static_cast<int>(uuids.size()) * kTenthsPerGpu);
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

TEST_F(SchedulerTest, FractionReservationWaitsForItsShare) {
  running_ = {Running(9, Gpus(8, 30 * kMinuteMs), kNow, {0})};
  pending_ = {Pending(1, Urgent(5, 50)), Pending(2, Gpus(1))};
  Decisions d = Run(1);
  EXPECT_THAT(Reason(d, 1), HasSubstr("expected to start by 12:30 UTC"));
  EXPECT_THAT(Reason(d, 2), HasSubstr("reservation for job 1"));
}

TEST(FormatClockTest, SameDayOrFullDate) {
  EXPECT_EQ(FormatClock(kNow + 2 * kHourMs + 5 * kMinuteMs, kNow), "14:05 UTC");
  EXPECT_EQ(FormatClock(kNow + 3 * 24 * kHourMs, kNow), "1970-01-04 12:00 UTC");
}

}  // namespace
}  // namespace gpuherd::sched
