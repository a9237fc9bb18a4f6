#include "daemon/queue/fair_share.h"

#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace gpuherd::daemon::queue {
namespace {

constexpr TimeMs kHour = 3'600'000;

sched::Job Ran(const std::string& user, int twentieths, TimeMs started, TimeMs ended) {
  sched::Job job;
  job.spec.user = user;
  job.spec.gpu_twentieths = twentieths;
  job.state = sched::JobState::kRunning;
  job.started = started;
  job.ended = ended;
  return job;
}

TEST(FairShareTest, EndedAttemptsCountWithinTheWindowOnly) {
  FairShare share(24 * kHour);
  sched::Job two_gpus = Ran("alice", 40, kHour, 4 * kHour);
  share.AttemptEnded(two_gpus, two_gpus.ended);
  share.Finished(two_gpus);
  EXPECT_DOUBLE_EQ(share.EndedGpuHours("alice", 4 * kHour), 6.0);
  EXPECT_DOUBLE_EQ(share.EndedGpuHours("bob", 4 * kHour), 0.0);
  // GPU-seconds since the daemon started never drop out.
  EXPECT_DOUBLE_EQ(share.gpu_seconds_done().at("alice"), 6.0 * 3600);
  share.Expire(30 * kHour);
  EXPECT_DOUBLE_EQ(share.EndedGpuHours("alice", 30 * kHour), 0.0);
  EXPECT_DOUBLE_EQ(share.gpu_seconds_done().at("alice"), 6.0 * 3600);
}

TEST(FairShareTest, AHalfGpuCountsHalfAndAJobThatNeverRanNothing) {
  FairShare share(24 * kHour);
  sched::Job half = Ran("alice", 10, kHour, 3 * kHour);
  EXPECT_DOUBLE_EQ(FairShare::RunningGpuHours(half, 2 * kHour), 0.5);
  EXPECT_DOUBLE_EQ(FairShare::RunningGpuSeconds(half, 2 * kHour), 1800.0);
  sched::Job never = Ran("bob", 20, 0, kHour);
  share.AttemptEnded(never, kHour);  // started 0: never launched
  share.Finished(never);
  EXPECT_FALSE(share.gpu_seconds_done().count("bob"));
  EXPECT_DOUBLE_EQ(share.EndedGpuHours("bob", kHour), 0.0);
}

TEST(FairShareTest, LoadReadsTheStoredShareOfEitherForm) {
  FairShare share(24 * kHour);
  store::JobRecord twentieths;
  twentieths.user = "alice";
  twentieths.started = kHour;
  twentieths.ended = 2 * kHour;
  twentieths.spec_json = R"({"spec": {}, "gpu_twentieths": 40})";
  store::JobRecord tenths = twentieths;  // stored before twentieths
  tenths.spec_json = R"({"gpu_tenths": 5})";
  store::JobRecord unreadable = twentieths;
  unreadable.spec_json = "{";
  share.Load({twentieths, tenths, unreadable});
  EXPECT_DOUBLE_EQ(share.EndedGpuHours("alice", 2 * kHour), 2.5);
}

// The kept sum must answer exactly as a walk over the user's jobs would:
// before and after some drop out of the window, whether or not Expire ran
// in between, and with jobs added out of order of their end.
TEST(FairShareTest, TheKeptSumIsTheWalkOverTheJobsInTheWindow) {
  FairShare share(10 * kHour);
  std::vector<std::pair<TimeMs, double>> ended;  // what the walk sums, in the order added
  auto walk = [&](TimeMs now) {
    double hours = 0;
    for (const auto& [end, h] : ended) {
      if (end >= now - 10 * kHour) hours += h;
    }
    return hours;
  };
  for (int i = 0; i < 30; ++i) {
    // Ends 1..30 hours, not in order; shares of 1 to 3 twentieths.
    const TimeMs end = ((i * 7) % 30 + 1) * kHour;
    sched::Job job = Ran("alice", 1 + i % 3, end - kHour / 3, end);
    share.Finished(job);
    ended.emplace_back(end, job.spec.gpu_twentieths / 20.0 * (job.ended - job.started) / 3.6e6);
  }
  for (TimeMs now : {5 * kHour, 11 * kHour, 20 * kHour, 31 * kHour}) {
    EXPECT_EQ(share.EndedGpuHours("alice", now), walk(now)) << "before Expire, at hour " << now / kHour;
  }
  share.Expire(20 * kHour);
  std::erase_if(ended, [](const auto& e) { return e.first < 10 * kHour; });
  for (TimeMs now : {20 * kHour, 25 * kHour, 31 * kHour}) {
    EXPECT_EQ(share.EndedGpuHours("alice", now), walk(now)) << "after Expire, at hour " << now / kHour;
  }
  share.Expire(41 * kHour);
  EXPECT_EQ(share.EndedGpuHours("alice", 41 * kHour), 0.0);
}

}  // namespace
}  // namespace gpuherd::daemon::queue
