#include "host/clock.h"

#include <chrono>

namespace gpuherd::host {
namespace {

class RealClock : public Clock {
 public:
  TimeMs Now() override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }

  bool SleepUntil(TimeMs deadline) override {
    std::unique_lock lock(mu_);
    uint64_t gen = wake_generation_;
    while (true) {
      TimeMs now = Now();
      if (now >= deadline) return true;
      cv_.wait_for(lock, std::chrono::milliseconds(deadline - now));
      if (wake_generation_ != gen) return false;
    }
  }

  void Wake() override {
    std::lock_guard lock(mu_);
    ++wake_generation_;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t wake_generation_ = 0;
};

}  // namespace

std::unique_ptr<Clock> NewRealClock() { return std::make_unique<RealClock>(); }

TimeMs FakeClock::Now() {
  std::lock_guard lock(mu_);
  return now_;
}

bool FakeClock::SleepUntil(TimeMs deadline) {
  std::unique_lock lock(mu_);
  uint64_t gen = wake_generation_;
  ++sleepers_;
  cv_.notify_all();
  cv_.wait(lock, [&] { return now_ >= deadline || wake_generation_ != gen; });
  --sleepers_;
  return now_ >= deadline;
}

void FakeClock::Wake() {
  std::lock_guard lock(mu_);
  ++wake_generation_;
  cv_.notify_all();
}

void FakeClock::Advance(DurationMs d) {
  std::lock_guard lock(mu_);
  now_ += d;
  cv_.notify_all();
}

void FakeClock::Set(TimeMs t) {
  std::lock_guard lock(mu_);
  now_ = t;
  cv_.notify_all();
}

int FakeClock::sleepers() {
  std::lock_guard lock(mu_);
  return sleepers_;
}

}  // namespace gpuherd::host
