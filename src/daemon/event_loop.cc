#include "daemon/event_loop.h"

#include "core/log.h"

namespace gpuherd::daemon {

bool EventLoop::Enqueue(Task task) {
  bool was_empty;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;
    was_empty = queue_.empty();
    queue_.push_back(std::move(task));
  }
  // Only the first task of a batch wakes the loop (it takes the whole queue
  // when it wakes), and the wake comes after the unlock, so the loop does not
  // wake only to block on the mutex still held here.
  if (was_empty) cv_.notify_one();
  return true;
}

void EventLoop::Post(Task task) { Enqueue(std::move(task)); }

void EventLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  cv_.notify_one();
}

void EventLoop::Run() {
  while (true) {
    std::deque<Task> batch;
    bool stopping;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopped_ || !queue_.empty(); });
      batch.swap(queue_);
      stopping = stopped_;
    }
    // Nothing may leave the loop: an exception would end the daemon. A task
    // that throws is dropped (its caller in CallOr gets `if_failed`).
    for (Task& task : batch) RunLoggingExceptions(task, "a task on the event loop");
    bool committed = end_of_turn_ ? end_of_turn_() : true;
    for (auto& release : after_turn_) release(committed);
    after_turn_.clear();
    if (stopping) {
      // Tasks queued after the final swap are dropped: their promises break
      // and the waiting callers get their `if_stopped` answer.
      std::lock_guard lock(mu_);
      queue_.clear();
      return;
    }
  }
}

}  // namespace gpuherd::daemon
