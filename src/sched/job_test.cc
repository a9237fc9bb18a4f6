#include "sched/job.h"

#include <gtest/gtest.h>

namespace gpuherd::sched {
namespace {

TEST(JobStateTest, NamesRoundTrip) {
  for (JobState s : {JobState::kPending, JobState::kHeld, JobState::kRunning, JobState::kStopping,
                     JobState::kCompleted, JobState::kFailed, JobState::kCancelled}) {
    std::optional<JobState> parsed = ParseJobState(JobStateName(s));
    ASSERT_TRUE(parsed.has_value()) << JobStateName(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(JobStateName(JobState::kPending), "pending");
  EXPECT_STREQ(JobStateName(JobState::kCancelled), "cancelled");
}

TEST(JobStateTest, UnknownNameIsRefused) {
  EXPECT_FALSE(ParseJobState("queued").has_value());
  EXPECT_FALSE(ParseJobState("").has_value());
  EXPECT_FALSE(ParseJobState("Running").has_value());
}

TEST(JobSpecTest, GpuCounts) {
  JobSpec spec;
  spec.gpu_twentieths = 5;  // 0.25
  EXPECT_TRUE(spec.fractional());
  EXPECT_EQ(spec.whole_gpus(), 0);
  spec.gpu_twentieths = 60;
  EXPECT_FALSE(spec.fractional());
  EXPECT_EQ(spec.whole_gpus(), 3);
}

}  // namespace
}  // namespace gpuherd::sched
