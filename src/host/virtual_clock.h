// A clock for tests of code that sleeps on several threads at once (the
// burn-in runner's sampler and one thread per GPU). Time stands still while
// any registered thread runs and jumps to the earliest deadline once every
// registered thread is inside SleepUntil, so a 15-minute run on simulated GPUs
// takes milliseconds and the threads always see the same sequence of times.
#pragma once

#include <condition_variable>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "host/clock.h"

namespace gpuherd::host {

class VirtualClock : public Clock {
 public:
  explicit VirtualClock(TimeMs start) : now_(start) {}

  TimeMs Now() override;
  // With no thread registered, time jumps to `deadline` at once; otherwise
  // it waits until every registered thread sleeps, and only the earliest
  // deadline of all sleepers is reached.
  bool SleepUntil(TimeMs deadline) override;
  void Wake() override;

  // Moves time forward by hand, releasing the sleepers it passes.
  void Advance(DurationMs d);
  // Threads registered through ClockParticipant, bound or not.
  int participants();

 private:
  friend class ClockParticipant;
  struct Sleeper {
    TimeMs deadline = 0;
    int weight = 0;  // participants bound to the sleeping thread
    bool released = false;
  };

  void Join();
  void Bind(std::thread::id thread);
  void Leave(bool bound, std::thread::id thread);
  // Requires mu_. Jumps to the earliest deadline when every participant
  // sleeps.
  void MaybeAdvanceLocked();
  // Requires mu_. Lets every sleeper whose deadline has come run again, and
  // counts it as running from now on so that time cannot jump past it.
  void ReleaseDueLocked();
  void ReleaseLocked(Sleeper& sleeper);

  std::mutex mu_;
  std::condition_variable cv_;
  TimeMs now_;
  int participants_ = 0;
  int sleeping_weight_ = 0;
  std::map<std::thread::id, int> bound_;  // thread -> participants bound to it
  std::list<Sleeper> sleepers_;
};

// Registers a thread that a VirtualClock waits for; with any other clock it
// does nothing, so code that runs threads on a given Clock holds one per
// thread. Create it on the spawning thread (the new thread counts as running
// from then on, so time cannot move before it starts), move it into the
// thread and call Bind() there first thing. Leaves the clock when destroyed.
class ClockParticipant {
 public:
  explicit ClockParticipant(Clock& clock);
  ~ClockParticipant();
  ClockParticipant(ClockParticipant&& other) noexcept;
  ClockParticipant& operator=(ClockParticipant&&) = delete;
  ClockParticipant(const ClockParticipant&) = delete;
  ClockParticipant& operator=(const ClockParticipant&) = delete;

  // Binds to the calling thread: its sleeps count as this participant's.
  void Bind();

 private:
  VirtualClock* clock_;  // null for clocks other than VirtualClock
  bool bound_ = false;
  std::thread::id thread_;
};

}  // namespace gpuherd::host
