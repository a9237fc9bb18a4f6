#include "host/virtual_clock.h"

#include <algorithm>

namespace gpuherd::host {

TimeMs VirtualClock::Now() {
  std::lock_guard lock(mu_);
  return now_;
}

bool VirtualClock::SleepUntil(TimeMs deadline) {
  std::unique_lock lock(mu_);
  if (now_ >= deadline) return true;
  auto bound = bound_.find(std::this_thread::get_id());
  const int weight = bound == bound_.end() ? 0 : bound->second;
  auto it = sleepers_.insert(sleepers_.end(), Sleeper{deadline, weight, false});
  sleeping_weight_ += weight;
  MaybeAdvanceLocked();
  cv_.wait(lock, [&] { return it->released; });
  sleepers_.erase(it);
  return now_ >= deadline;
}

void VirtualClock::Wake() {
  std::lock_guard lock(mu_);
  for (Sleeper& sleeper : sleepers_) ReleaseLocked(sleeper);
  cv_.notify_all();
}

void VirtualClock::Advance(DurationMs d) {
  std::lock_guard lock(mu_);
  now_ += d;
  ReleaseDueLocked();
}

int VirtualClock::participants() {
  std::lock_guard lock(mu_);
  return participants_;
}

void VirtualClock::Join() {
  std::lock_guard lock(mu_);
  ++participants_;
}

void VirtualClock::Bind(std::thread::id thread) {
  std::lock_guard lock(mu_);
  ++bound_[thread];
}

void VirtualClock::Leave(bool bound, std::thread::id thread) {
  std::lock_guard lock(mu_);
  --participants_;
  if (bound) {
    auto it = bound_.find(thread);
    if (it != bound_.end() && --it->second == 0) bound_.erase(it);
  }
  MaybeAdvanceLocked();
}

void VirtualClock::MaybeAdvanceLocked() {
  if (sleeping_weight_ < participants_) return;
  TimeMs earliest = 0;
  bool any = false;
  for (const Sleeper& sleeper : sleepers_) {
    if (sleeper.released) continue;
    earliest = any ? std::min(earliest, sleeper.deadline) : sleeper.deadline;
    any = true;
  }
  if (!any) return;
  now_ = std::max(now_, earliest);
  ReleaseDueLocked();
}

void VirtualClock::ReleaseDueLocked() {
  for (Sleeper& sleeper : sleepers_) {
    if (!sleeper.released && sleeper.deadline <= now_) ReleaseLocked(sleeper);
  }
  cv_.notify_all();
}

void VirtualClock::ReleaseLocked(Sleeper& sleeper) {
  if (sleeper.released) return;
  sleeper.released = true;
  sleeping_weight_ -= sleeper.weight;
}

ClockParticipant::ClockParticipant(Clock& clock)
    : clock_(dynamic_cast<VirtualClock*>(&clock)) {
  if (clock_) clock_->Join();
}

ClockParticipant::~ClockParticipant() {
  if (clock_) clock_->Leave(bound_, thread_);
}

ClockParticipant::ClockParticipant(ClockParticipant&& other) noexcept
    : clock_(other.clock_), bound_(other.bound_), thread_(other.thread_) {
  other.clock_ = nullptr;
}

void ClockParticipant::Bind() {
  if (!clock_ || bound_) return;
  bound_ = true;
  thread_ = std::this_thread::get_id();
  clock_->Bind(thread_);
}

}  // namespace gpuherd::host
