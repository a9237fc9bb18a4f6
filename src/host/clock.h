// The clock behind an interface, so the sampler and the daemon run on fake time
// in tests and benchmarks. Thread-safe: any thread may call any method.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>

#include "core/time.h"

namespace gpuherd::host {

class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time (what is recorded and shown).
  virtual TimeMs Now() = 0;
  // Blocks until Now() >= deadline, or until Wake() is called. Returns true if
  // the deadline was reached, false if woken early.
  virtual bool SleepUntil(TimeMs deadline) = 0;
  // Wakes every thread blocked in SleepUntil (used for shutdown).
  virtual void Wake() = 0;
};

// The real clock. SleepUntil re-checks the wall clock so that it never returns
// early on spurious wake-ups.
std::unique_ptr<Clock> NewRealClock();

// A clock that moves only when told. SleepUntil blocks until Advance() or
// Set() moves time past the deadline, which lets a test step a sampler thread.
class FakeClock : public Clock {
 public:
  explicit FakeClock(TimeMs start) : now_(start) {}
  TimeMs Now() override;
  bool SleepUntil(TimeMs deadline) override;
  void Wake() override;
  void Advance(DurationMs d);
  void Set(TimeMs t);
  // Number of threads currently blocked in SleepUntil (lets tests wait for a
  // thread to reach its sleep before advancing).
  int sleepers();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  TimeMs now_;
  int sleepers_ = 0;
  uint64_t wake_generation_ = 0;
};

}  // namespace gpuherd::host
