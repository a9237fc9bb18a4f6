#include "host/virtual_clock.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace gpuherd::host {
namespace {

constexpr TimeMs kStart = 1'700'000'000'000;

TEST(VirtualClockTest, WithoutParticipantsASleepJumpsToItsDeadline) {
  VirtualClock clock(kStart);
  const auto real_start = std::chrono::steady_clock::now();
  EXPECT_TRUE(clock.SleepUntil(kStart + kHourMs));
  EXPECT_EQ(clock.Now(), kStart + kHourMs);
  EXPECT_TRUE(clock.SleepUntil(kStart));  // already past: returns at once
  EXPECT_EQ(clock.Now(), kStart + kHourMs);
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, std::chrono::seconds(1));
}

// Two threads with different periods: each wakes exactly at its deadlines,
// time never passes a deadline unseen, and time stands still while a
// registered thread works.
TEST(VirtualClockTest, ParticipantsSeeEveryDeadlineExactly) {
  VirtualClock clock(kStart);
  std::vector<TimeMs> woke_a, woke_b;
  std::atomic<bool> moved_while_working = false;
  auto worker = [&](ClockParticipant participant, DurationMs period, int count,
                    std::vector<TimeMs>* woke) {
    participant.Bind();
    for (int i = 1; i <= count; ++i) {
      const TimeMs before = clock.Now();
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // "work"
      if (clock.Now() != before) moved_while_working = true;
      EXPECT_TRUE(clock.SleepUntil(kStart + i * period));
      woke->push_back(clock.Now());
    }
  };
  std::thread a(worker, ClockParticipant(clock), 100, 30, &woke_a);
  std::thread b(worker, ClockParticipant(clock), 250, 12, &woke_b);
  a.join();
  b.join();
  ASSERT_EQ(woke_a.size(), 30u);
  ASSERT_EQ(woke_b.size(), 12u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ(woke_a[i], kStart + (i + 1) * 100);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(woke_b[i], kStart + (i + 1) * 250);
  EXPECT_FALSE(moved_while_working);
  EXPECT_EQ(clock.participants(), 0);
}

TEST(VirtualClockTest, AParticipantNotYetStartedHoldsTimeBack) {
  VirtualClock clock(kStart);
  ClockParticipant self(clock);
  self.Bind();
  std::atomic<bool> go = false;
  TimeMs worker_saw = 0;
  std::thread worker([&, participant = ClockParticipant(clock)]() mutable {
    while (!go) std::this_thread::yield();
    participant.Bind();
    worker_saw = clock.Now();
    clock.SleepUntil(kStart + 5000);
  });
  // An unregistered thread lets the worker start only later (in real time).
  std::thread starter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    go = true;
  });
  EXPECT_TRUE(clock.SleepUntil(kStart + 1000));
  EXPECT_EQ(worker_saw, kStart);  // time had not moved before it started
  EXPECT_EQ(clock.Now(), kStart + 1000);
  EXPECT_TRUE(clock.SleepUntil(kStart + 6000));
  worker.join();
  starter.join();
}

TEST(VirtualClockTest, LeavingLetsTheOthersSleepOn) {
  VirtualClock clock(kStart);
  std::atomic<bool> leave = false;
  std::thread busy([&, participant = ClockParticipant(clock)]() mutable {
    participant.Bind();
    while (!leave) std::this_thread::yield();
  });  // the participant leaves when the thread's lambda is destroyed
  std::thread sleeper([&, participant = ClockParticipant(clock)]() mutable {
    participant.Bind();
    EXPECT_TRUE(clock.SleepUntil(kStart + 300));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(clock.Now(), kStart);  // the busy thread holds time back
  leave = true;
  busy.join();
  sleeper.join();
  EXPECT_EQ(clock.Now(), kStart + 300);
}

TEST(VirtualClockTest, WakeEndsSleepsEarly) {
  VirtualClock clock(kStart);
  ClockParticipant self(clock);
  self.Bind();
  std::atomic<bool> woken = false;
  std::thread sleeper([&, participant = ClockParticipant(clock)]() mutable {
    participant.Bind();
    woken = !clock.SleepUntil(kStart + kHourMs);
  });
  // This thread is registered and awake, so the sleeper cannot reach its
  // deadline; only Wake can end its sleep.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  clock.Wake();
  sleeper.join();
  EXPECT_TRUE(woken);
  EXPECT_EQ(clock.Now(), kStart);
}

TEST(VirtualClockTest, ParticipantOnAnotherClockDoesNothing) {
  FakeClock clock(kStart);
  ClockParticipant participant(clock);
  participant.Bind();
  clock.Advance(10);
  EXPECT_TRUE(clock.SleepUntil(kStart + 10));
}

}  // namespace
}  // namespace gpuherd::host
