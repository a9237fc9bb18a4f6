#include "sched/priority.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::sched {
namespace {

using ::testing::HasSubstr;

TEST(PriorityTest, TermsFollowTheWeights) {
  PriorityWeights w;
  w.w_urgency = 2;
  w.w_user = 10;
  w.w_age = 0.5;
  w.w_fair = 3;
  PriorityTerms t = ComputePriority(w, {.urgency = 10, .user_level = 1, .waited = 30 * kMinuteMs,
                                        .user_gpu_hours = 4});
  EXPECT_DOUBLE_EQ(t.urgency, 20);
  EXPECT_DOUBLE_EQ(t.user, 10);
  EXPECT_DOUBLE_EQ(t.age, 15);
  EXPECT_DOUBLE_EQ(t.fair_share, -12);
  EXPECT_DOUBLE_EQ(t.total(), 33);
}

TEST(PriorityTest, AgingGrowsThenStopsAtTheCap) {
  PriorityWeights w;
  w.w_age = 1;
  w.age_cap_minutes = 60;
  auto age = [&](DurationMs waited) { return ComputePriority(w, {.waited = waited}).age; };
  EXPECT_DOUBLE_EQ(age(0), 0);
  EXPECT_DOUBLE_EQ(age(10 * kMinuteMs), 10);
  EXPECT_LT(age(30 * kMinuteMs), age(59 * kMinuteMs));
  EXPECT_DOUBLE_EQ(age(60 * kMinuteMs), 60);
  EXPECT_DOUBLE_EQ(age(10 * kHourMs), 60);
  EXPECT_DOUBLE_EQ(age(-5 * kMinuteMs), 0);  // a clock step back does not go negative
}

TEST(PriorityTest, AgingLetsAnOldLowJobPassAFreshHigherOne) {
  PriorityWeights w;  // defaults: 0.5 per minute
  double old_low = ComputePriority(w, {.urgency = 0, .waited = 2 * kHourMs}).total();
  double fresh_high = ComputePriority(w, {.urgency = 50, .waited = 0}).total();
  EXPECT_GT(old_low, fresh_high);
}

TEST(PriorityTest, FairSharePenalisesRecentGpuHours) {
  PriorityWeights w;
  double light = ComputePriority(w, {.urgency = 10, .user_gpu_hours = 0}).total();
  double heavy = ComputePriority(w, {.urgency = 10, .user_gpu_hours = 20}).total();
  EXPECT_DOUBLE_EQ(light - heavy, 20 * w.w_fair);
  // Negative usage (bad input) never turns into a bonus.
  EXPECT_DOUBLE_EQ(ComputePriority(w, {.user_gpu_hours = -5}).fair_share, 0);
}

TEST(PriorityTest, ExplainGivesEveryTermInOneLine) {
  PriorityWeights w;
  std::string line = ExplainPriority(
      w, {.urgency = 10, .user_level = 1, .waited = 30 * kMinuteMs, .user_gpu_hours = 4});
  EXPECT_EQ(line,
            "priority 27.0 = urgency 10 (10×1) + user 10 (level 1×10) + age 15.0 (30 min×0.5) "
            "− fair share 8.0 (4.0 GPU-h in 1d00h×2)");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  std::string capped = ExplainPriority(w, {.waited = 10 * kHourMs});
  EXPECT_THAT(capped, HasSubstr("240 min, capped"));
}

}  // namespace
}  // namespace gpuherd::sched
