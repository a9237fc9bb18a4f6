#include "telemetry/sampler.h"

#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::telemetry {
namespace {

using ::testing::HasSubstr;

constexpr TimeMs kStart = 1'699'999'980'000;

// A driver whose GPUs answer instantly unless told to fail, and which can run
// a hook per round (to spend fake time, as a slow driver would). Records the
// threads it was called on.
class FakeDriver : public gpu::Driver {
 public:
  explicit FakeDriver(int count) : count_(count) {}

  std::string name() const override { return "fake"; }
  bool simulated() const override { return true; }
  Result<gpu::Fleet> Discover() override {
    gpu::Fleet fleet;
    for (int i = 0; i < count_; ++i) {
      gpu::GpuInfo info;
      info.index = i;
      info.uuid = "GPU-" + std::to_string(i);
      fleet.gpus.push_back(info);
    }
    return fleet;
  }
  Result<gpu::GpuSample> Sample(int index, TimeMs now) override {
    std::lock_guard lock(mu_);
    threads_.insert(std::this_thread::get_id());
    if (index == 0) {
      ++rounds_;
      if (on_round_) on_round_(rounds_);
    }
    if (failing_.count(index)) return Unavailable("GPU " + std::to_string(index) + " is gone");
    gpu::GpuSample s;
    s.time = now;
    s.gpu_util_pct = 10.0 * index;
    return s;
  }

  void Fail(int index) { failing_.insert(index); }
  // Called with the 1-based round number when GPU 0 is read.
  void OnRound(std::function<void(int)> hook) { on_round_ = std::move(hook); }
  std::set<std::thread::id> threads() {
    std::lock_guard lock(mu_);
    return threads_;
  }

 private:
  int count_;
  std::set<int> failing_;
  std::function<void(int)> on_round_;
  int rounds_ = 0;
  std::mutex mu_;
  std::set<std::thread::id> threads_;
};

// Collects the rounds the sampler hands over.
class Rounds {
 public:
  Sampler::Callback Callback() {
    return [this](SampleRound round) {
      std::lock_guard lock(mu_);
      callback_thread_ = std::this_thread::get_id();
      rounds_.push_back(std::move(round));
    };
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return rounds_.size();
  }
  std::vector<SampleRound> Take() {
    std::lock_guard lock(mu_);
    return rounds_;
  }
  std::thread::id callback_thread() {
    std::lock_guard lock(mu_);
    return callback_thread_;
  }

 private:
  std::mutex mu_;
  std::vector<SampleRound> rounds_;
  std::thread::id callback_thread_;
};

// Waits (in real time, bounded) until `done` holds.
bool WaitFor(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// Waits until the sampler has handed over `n` rounds and sleeps for the next.
bool WaitForSleepAfter(host::FakeClock& clock, Rounds& rounds, size_t n) {
  return WaitFor([&] { return rounds.size() == n && clock.sleepers() == 1; });
}

std::unique_ptr<Sampler> MakeSampler(FakeDriver& driver, host::Clock& clock,
                                     DurationMs interval = 5000) {
  Result<std::unique_ptr<Sampler>> sampler =
      Sampler::Create(&driver, &clock, driver.Discover().value(), SamplerOptions{interval});
  EXPECT_TRUE(sampler.ok()) << sampler.status().ToString();
  return std::move(sampler).value();
}

TEST(SamplerTest, RejectsIntervalsBelow100ms) {
  FakeDriver driver(1);
  host::FakeClock clock(kStart);
  Result<std::unique_ptr<Sampler>> too_fast =
      Sampler::Create(&driver, &clock, driver.Discover().value(), SamplerOptions{99});
  ASSERT_FALSE(too_fast.ok());
  EXPECT_EQ(too_fast.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(too_fast.status().message(), HasSubstr("at least 100ms"));

  Result<std::unique_ptr<Sampler>> fastest =
      Sampler::Create(&driver, &clock, driver.Discover().value(), SamplerOptions{100});
  ASSERT_TRUE(fastest.ok());
  EXPECT_EQ((*fastest)->interval(), 100);
}

TEST(SamplerTest, DoesNotDriftOver1000TicksWithASlowDriver) {
  constexpr DurationMs kInterval = 5000;
  constexpr DurationMs kRoundCost = 1300;  // every round spends 1.3 s of fake time
  constexpr size_t kTicks = 1000;
  host::FakeClock clock(kStart);
  FakeDriver driver(4);
  driver.OnRound([&](int) { clock.Advance(kRoundCost); });
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock, kInterval);
  Rounds rounds;
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  for (size_t k = 1; k < kTicks; ++k) {
    ASSERT_TRUE(WaitForSleepAfter(clock, rounds, k)) << "round " << k;
    clock.Set(kStart + static_cast<TimeMs>(k) * kInterval);
  }
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, kTicks));
  sampler->Stop();

  std::vector<SampleRound> taken = rounds.Take();
  ASSERT_EQ(taken.size(), kTicks);
  for (size_t k = 0; k < kTicks; ++k) {
    EXPECT_EQ(taken[k].time, kStart + static_cast<TimeMs>(k) * kInterval) << "round " << k;
    EXPECT_EQ(taken[k].took, kRoundCost);
    EXPECT_EQ(taken[k].skipped_ticks, 0u);
    ASSERT_EQ(taken[k].readings.size(), 4u);
    EXPECT_EQ(taken[k].readings[3].sample->time, taken[k].time);
  }
}

TEST(SamplerTest, SkipsTicksMissedByAnOverrunningRound) {
  host::FakeClock clock(kStart);
  FakeDriver driver(2);
  driver.OnRound([&](int round) {
    if (round == 2) clock.Advance(12'000);  // the round due at +5 s ends at +17 s
  });
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock, 5000);
  Rounds rounds;
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 1));
  clock.Set(kStart + 5000);
  // Ticks +10 s and +15 s have passed: the sampler sleeps until +20 s instead
  // of running them back to back.
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 2));
  EXPECT_EQ(clock.Now(), kStart + 17'000);
  clock.Set(kStart + 19'999);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(rounds.size(), 2u);
  clock.Set(kStart + 20'000);
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 3));
  clock.Set(kStart + 25'000);
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 4));
  sampler->Stop();

  std::vector<SampleRound> taken = rounds.Take();
  ASSERT_EQ(taken.size(), 4u);
  EXPECT_EQ(taken[1].time, kStart + 5000);
  EXPECT_EQ(taken[1].took, 12'000);
  EXPECT_EQ(taken[2].time, kStart + 20'000);
  EXPECT_EQ(taken[2].skipped_ticks, 2u);
  EXPECT_EQ(taken[3].time, kStart + 25'000);
  EXPECT_EQ(taken[3].skipped_ticks, 0u);
}

TEST(SamplerTest, RestartsTheGridWhenTheClockStepsBack) {
  host::FakeClock clock(kStart);
  FakeDriver driver(1);
  driver.OnRound([&](int round) {
    if (round == 2) clock.Set(kStart - kHourMs);
  });
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock, 5000);
  Rounds rounds;
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 1));
  clock.Set(kStart + 5000);
  // Without a new grid the sampler would sleep an hour; it samples at once.
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 3));
  clock.Set(kStart - kHourMs + 5000);
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 4));
  sampler->Stop();
  std::vector<SampleRound> taken = rounds.Take();
  EXPECT_EQ(taken[2].time, kStart - kHourMs);
  EXPECT_EQ(taken[3].time, kStart - kHourMs + 5000);
}

TEST(SamplerTest, AFailingGpuDoesNotStopTheOthers) {
  host::FakeClock clock(kStart);
  FakeDriver driver(3);
  driver.Fail(1);
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock);

  Result<SampleRound> once = sampler->SampleOnce(kStart + 7);
  ASSERT_TRUE(once.ok());
  EXPECT_EQ(once->time, kStart + 7);
  ASSERT_EQ(once->readings.size(), 3u);
  EXPECT_EQ(once->readings[0].index, 0);
  EXPECT_TRUE(once->readings[0].sample.ok());
  EXPECT_EQ(once->readings[1].index, 1);
  ASSERT_FALSE(once->readings[1].sample.ok());
  EXPECT_EQ(once->readings[1].sample.status().code(), Code::kUnavailable);
  EXPECT_THAT(once->readings[1].sample.status().message(), HasSubstr("GPU 1 is gone"));
  ASSERT_TRUE(once->readings[2].sample.ok());
  EXPECT_DOUBLE_EQ(*once->readings[2].sample->gpu_util_pct, 20.0);

  Rounds rounds;
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 1));
  clock.Advance(5000);
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 2));
  sampler->Stop();
  for (const SampleRound& round : rounds.Take()) {
    EXPECT_TRUE(round.readings[0].sample.ok());
    EXPECT_FALSE(round.readings[1].sample.ok());
    EXPECT_TRUE(round.readings[2].sample.ok());
  }
}

TEST(SamplerTest, UsesTheDriverOnlyOnItsOwnThread) {
  host::FakeClock clock(kStart);
  FakeDriver driver(2);
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock);
  Rounds rounds;
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 1));
  clock.Advance(5000);
  ASSERT_TRUE(WaitForSleepAfter(clock, rounds, 2));
  sampler->Stop();
  std::set<std::thread::id> threads = driver.threads();
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
  EXPECT_EQ(*threads.begin(), rounds.callback_thread());
}

TEST(SamplerTest, RefusesOnDemandSamplingAndASecondStartWhileRunning) {
  host::FakeClock clock(kStart);
  FakeDriver driver(1);
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock);
  Rounds rounds;
  EXPECT_EQ(sampler->Start(nullptr).code(), Code::kInvalidArgument);
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  EXPECT_TRUE(sampler->running());
  EXPECT_EQ(sampler->Start(rounds.Callback()).code(), Code::kFailedPrecondition);
  EXPECT_EQ(sampler->SampleOnce(kStart).status().code(), Code::kFailedPrecondition);
  sampler->Stop();
  EXPECT_FALSE(sampler->running());
  EXPECT_TRUE(sampler->SampleOnce(kStart).ok());
}

TEST(SamplerTest, StopIsPromptAndSafeToRepeat) {
  std::unique_ptr<host::Clock> clock = host::NewRealClock();
  FakeDriver driver(2);
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, *clock, kHourMs);
  sampler->Stop();  // never started
  Rounds rounds;
  ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
  ASSERT_TRUE(WaitFor([&] { return rounds.size() == 1; }));
  auto before = std::chrono::steady_clock::now();
  sampler->Stop();
  auto took = std::chrono::steady_clock::now() - before;
  EXPECT_LT(took, std::chrono::milliseconds(500));
  sampler->Stop();
  EXPECT_EQ(rounds.size(), 1u);
}

TEST(SamplerTest, StopRightAfterStartReturnsOnAFakeClockThatNeverMoves) {
  host::FakeClock clock(kStart);
  FakeDriver driver(1);
  for (int i = 0; i < 50; ++i) {
    std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock);
    Rounds rounds;
    ASSERT_TRUE(sampler->Start(rounds.Callback()).ok());
    sampler->Stop();
    EXPECT_LE(rounds.size(), 1u);
  }
}

TEST(SamplerTest, CanBeStartedAgainAfterStop) {
  host::FakeClock clock(kStart);
  FakeDriver driver(1);
  std::unique_ptr<Sampler> sampler = MakeSampler(driver, clock);
  Rounds first;
  ASSERT_TRUE(sampler->Start(first.Callback()).ok());
  ASSERT_TRUE(WaitForSleepAfter(clock, first, 1));
  sampler->Stop();
  clock.Advance(1234);
  Rounds second;
  ASSERT_TRUE(sampler->Start(second.Callback()).ok());
  ASSERT_TRUE(WaitForSleepAfter(clock, second, 1));
  sampler->Stop();
  EXPECT_EQ(second.Take()[0].time, kStart + 1234);
}

}  // namespace
}  // namespace gpuherd::telemetry
