#include "host/clock.h"

#include <thread>

#include <gtest/gtest.h>

namespace gpuherd::host {
namespace {

TEST(FakeClockTest, SleepReturnsWhenTimeIsAdvancedPastDeadline) {
  FakeClock clock(1000);
  bool reached = false;
  std::thread t([&] { reached = clock.SleepUntil(6000); });
  while (clock.sleepers() == 0) std::this_thread::yield();
  clock.Advance(4000);  // 5000: not yet
  clock.Advance(1000);  // 6000
  t.join();
  EXPECT_TRUE(reached);
  EXPECT_EQ(clock.Now(), 6000);
}

TEST(FakeClockTest, WakeInterruptsSleep) {
  FakeClock clock(0);
  bool reached = true;
  std::thread t([&] { reached = clock.SleepUntil(1'000'000); });
  while (clock.sleepers() == 0) std::this_thread::yield();
  clock.Wake();
  t.join();
  EXPECT_FALSE(reached);
}

TEST(RealClockTest, SleepsAtLeastUntilDeadline) {
  auto clock = NewRealClock();
  TimeMs start = clock->Now();
  EXPECT_TRUE(clock->SleepUntil(start + 20));
  EXPECT_GE(clock->Now(), start + 20);
}

}  // namespace
}  // namespace gpuherd::host
