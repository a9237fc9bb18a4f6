#include "daemon/fd_budget.h"

#include <sys/resource.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PlanConnectionsTest, DefaultsFitUnderTheSystemdLimit) {
  ConnectionPlan plan = PlanConnections(4096, 64, /*metrics_listener=*/false, 65536, /*daemon_uid=*/0);
  EXPECT_EQ(plan.api.total, 4096);
  EXPECT_EQ(plan.api.per_user, 64);
  EXPECT_EQ(plan.api.per_address, 64);
  EXPECT_EQ(plan.api.reserved, kAdminConnections);
  EXPECT_THAT(plan.api.reserved_for, ElementsAre(0u));
  EXPECT_EQ(plan.lowered, "");
}

TEST(PlanConnectionsTest, TotalIsLoweredToLeaveHeadroom) {
  // 1024 files: 512 kept for jobs, SQLite and logs.
  ConnectionPlan plan = PlanConnections(4096, 64, false, 1024, 0);
  EXPECT_EQ(plan.api.total, 512);
  EXPECT_THAT(plan.lowered, HasSubstr("--max-connections 4096 lowered to 512"));
  // 20,000 files: a quarter kept.
  EXPECT_EQ(PlanConnections(100000, 64, false, 20000, 0).api.total, 15000);
  // A small limit keeps half.
  EXPECT_EQ(PlanConnections(4096, 64, false, 256, 0).api.total, 128);
}

TEST(PlanConnectionsTest, MetricsListenerTakesItsShareOfTheTotal) {
  ConnectionPlan plan = PlanConnections(4096, 64, /*metrics_listener=*/true, 65536, 0);
  EXPECT_EQ(plan.metrics.total, kMetricsConnections);
  EXPECT_EQ(plan.metrics.per_address, kMetricsConnectionsPerAddress);
  EXPECT_EQ(plan.metrics.reserved, 0);
  EXPECT_EQ(plan.api.total + plan.metrics.total, 4096);
}

TEST(PlanConnectionsTest, DaemonsOwnUserSharesTheReserve) {
  ConnectionPlan plan = PlanConnections(100, 0, false, 65536, 1000);
  EXPECT_THAT(plan.api.reserved_for, ElementsAre(0u, 1000u));
  EXPECT_EQ(plan.api.per_user, 0);
  // Tiny totals keep half for users.
  EXPECT_EQ(PlanConnections(10, 0, false, 65536, 0).api.reserved, 5);
}

TEST(RaiseFdLimitTest, RaisesTheSoftLimitTowardsTheHardOne) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max < 512) GTEST_SKIP() << "the hard limit is too low to lower and raise";
  rlimit lowered = saved;
  lowered.rlim_cur = 256;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lowered), 0);
  auto raised = RaiseFdLimit();
  ASSERT_TRUE(raised.ok()) << raised.status().ToString();
  EXPECT_EQ(raised->before, 256u);
  EXPECT_EQ(raised->soft, std::min<uint64_t>(saved.rlim_max, kFdLimitCap));
  EXPECT_EQ(CurrentFdLimit(), raised->soft);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

}  // namespace
}  // namespace gpuherd::daemon
