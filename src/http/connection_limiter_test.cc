#include "http/connection_limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::http {
namespace {

using ::testing::HasSubstr;

Peer User(uint32_t uid) { return Peer{.uid = uid, .address = ""}; }
Peer Address(const std::string& address) { return Peer{.uid = std::nullopt, .address = address}; }

ConnectionLimits Limits(int per_user, int per_address, int total, int reserved) {
  ConnectionLimits limits;
  limits.per_user = per_user;
  limits.per_address = per_address;
  limits.total = total;
  limits.reserved = reserved;
  limits.reserved_for = {0};
  return limits;
}

TEST(ConnectionLimiterTest, PerUserLimitCountsEachUidApart) {
  ConnectionLimiter limiter(Limits(2, 0, 100, 0));
  EXPECT_EQ(limiter.Admit(User(1000)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(1000)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(1000)), Refusal::kPerUser);
  EXPECT_EQ(limiter.Admit(User(1001)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(0)), Refusal::kNone);  // root too is one user among others
  EXPECT_EQ(limiter.Admit(User(0)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(0)), Refusal::kPerUser);
  ConnectionStats stats = limiter.Stats();
  EXPECT_EQ(stats.open, 5);
  EXPECT_EQ(stats.limit, 100);
  EXPECT_EQ(stats.refused_per_user, 2u);
  EXPECT_EQ(stats.refused_per_address, 0u);
  EXPECT_EQ(stats.refused_total, 0u);
}

TEST(ConnectionLimiterTest, ReleaseFreesTheSlot) {
  ConnectionLimiter limiter(Limits(1, 1, 100, 0));
  ASSERT_EQ(limiter.Admit(User(1000)), Refusal::kNone);
  ASSERT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(1000)), Refusal::kPerUser);
  EXPECT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kPerAddress);
  limiter.Release(User(1000));
  limiter.Release(Address("127.0.0.1"));
  EXPECT_EQ(limiter.Stats().open, 0);
  EXPECT_EQ(limiter.Admit(User(1000)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kNone);
}

TEST(ConnectionLimiterTest, PerAddressLimitIsApartFromUids) {
  ConnectionLimiter limiter(Limits(1, 2, 100, 0));
  EXPECT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kPerAddress);
  EXPECT_EQ(limiter.Admit(Address("::1")), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(1000)), Refusal::kNone);
  EXPECT_EQ(limiter.Stats().refused_per_address, 1u);
}

TEST(ConnectionLimiterTest, TotalLimitKeepsTheReserveForReservedUids) {
  ConnectionLimiter limiter(Limits(0, 0, 5, 2));
  for (uint32_t uid = 1000; uid < 1003; ++uid) EXPECT_EQ(limiter.Admit(User(uid)), Refusal::kNone);
  // 3 open: the other 2 are root's.
  EXPECT_EQ(limiter.Admit(User(1003)), Refusal::kTotal);
  EXPECT_EQ(limiter.Admit(Address("127.0.0.1")), Refusal::kTotal);  // TCP has no uid: never reserved
  EXPECT_EQ(limiter.Admit(User(0)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(0)), Refusal::kNone);
  EXPECT_EQ(limiter.Admit(User(0)), Refusal::kTotal);
  ConnectionStats stats = limiter.Stats();
  EXPECT_EQ(stats.open, 5);
  EXPECT_EQ(stats.refused_total, 3u);
  // A slot freed by a user is a user's again.
  limiter.Release(User(1000));
  EXPECT_EQ(limiter.Admit(User(1004)), Refusal::kTotal);
  limiter.Release(User(0));
  limiter.Release(User(0));
  EXPECT_EQ(limiter.Admit(User(1004)), Refusal::kNone);
}

TEST(ConnectionLimiterTest, ZeroMeansNoLimit) {
  ConnectionLimiter limiter(Limits(0, 0, 0, 0));
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(limiter.Admit(User(1000)), Refusal::kNone);
  EXPECT_EQ(limiter.Stats().open, 1000);
}

TEST(ConnectionLimiterTest, AcceptErrorsAreCounted) {
  ConnectionLimiter limiter(Limits(1, 1, 10, 1));
  limiter.CountAcceptError();
  limiter.CountAcceptError();
  EXPECT_EQ(limiter.Stats().accept_errors, 2u);
}

TEST(ConnectionLimiterTest, ExplanationNamesTheLimit) {
  ConnectionLimiter limiter(Limits(3, 4, 50, 5));
  EXPECT_THAT(limiter.Explain(Refusal::kPerUser, User(1234)), HasSubstr("uid 1234 already holds 3, the limit per user"));
  EXPECT_THAT(limiter.Explain(Refusal::kPerAddress, Address("127.0.0.1")),
              HasSubstr("127.0.0.1 already holds 4, the limit per address"));
  EXPECT_THAT(limiter.Explain(Refusal::kTotal, User(1234)), HasSubstr("limit of 50 open connections"));
}

}  // namespace
}  // namespace gpuherd::http
