#include "daemon/event_loop.h"

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

TEST(EventLoopTest, CallerIsReleasedOnlyAfterTheTurnCommitted) {
  std::vector<int> committed;
  std::vector<int> pending;
  EventLoop loop([&] {
    committed.insert(committed.end(), pending.begin(), pending.end());
    pending.clear();
    return true;
  });
  std::thread owner([&] { loop.Run(); });
  for (int i = 0; i < 50; ++i) {
    size_t seen = loop.CallOr<size_t>(
        [&, i] {
          pending.push_back(i);
          return committed.size();
        },
        0);
    EXPECT_EQ(seen, static_cast<size_t>(i));  // committed before the previous call returned
  }
  loop.Stop();
  owner.join();
  EXPECT_EQ(committed.size(), 50u);
}

TEST(EventLoopTest, ManyThreadsSerializedOnOneOwner) {
  int counter = 0;  // touched only on the loop thread
  int turns = 0;
  EventLoop loop([&] {
    ++turns;
    return true;
  });
  std::thread owner([&] { loop.Run(); });
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      for (int i = 0; i < 200; ++i) loop.CallOr<int>([&] { return ++counter; }, -1);
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(loop.CallOr<int>([&] { return counter; }, -1), 1600);
  loop.Stop();
  owner.join();
  EXPECT_GT(turns, 0);
  EXPECT_LE(turns, 1601);  // tasks that queued together shared a turn
}

TEST(EventLoopTest, FailedCommitIsNeverAcknowledged) {
  bool store_healthy = true;
  EventLoop loop([&] { return store_healthy; });
  std::thread owner([&] { loop.Run(); });
  EXPECT_EQ(loop.CallOr<int>([] { return 1; }, -1), 1);
  loop.CallOr<int>([&] { store_healthy = false; return 0; }, -1);
  EXPECT_EQ(loop.CallOr<int>([] { return 2; }, -1), -1);
  loop.Stop();
  owner.join();
}

TEST(EventLoopTest, CallAfterStopGetsTheFallback) {
  EventLoop loop(nullptr);
  std::thread owner([&] { loop.Run(); });
  loop.Stop();
  owner.join();
  EXPECT_EQ(loop.CallOr<int>([] { return 1; }, -1), -1);
}

// A task that throws (a library's exception that nobody caught) is dropped:
// its caller gets the failure value, and the loop goes on.
TEST(EventLoopTest, ThrowingTaskFailsItsCallerAndTheLoopGoesOn) {
  EventLoop loop([] { return true; });
  std::thread owner([&] { loop.Run(); });
  EXPECT_EQ(loop.CallOr<int>([]() -> int { throw std::runtime_error("from a library"); }, -1), -1);
  EXPECT_EQ(loop.CallOr<int>([]() -> int { throw 7; }, -2), -2);
  EXPECT_EQ(loop.CallOr<int>([] { return 5; }, -1), 5);
  loop.Stop();
  owner.join();
}

}  // namespace
}  // namespace gpuherd::daemon
