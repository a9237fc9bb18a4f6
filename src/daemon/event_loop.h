// The one thread that owns the daemon's mutable state. Other threads (HTTP
// handlers, the sampler) post tasks; the loop runs every queued task, then
// calls the end-of-turn hook (which commits everything the turn changed in one
// transaction), and only then releases the callers waiting in Call(). So a
// caller is never told of a change before it is durable.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

namespace gpuherd::daemon {

class EventLoop {
 public:
  using Task = std::function<void()>;
  // Runs on the loop thread after each batch of tasks; returns false when what
  // the turn changed could not be made durable.
  using EndOfTurn = std::function<bool()>;

  explicit EventLoop(EndOfTurn end_of_turn) : end_of_turn_(std::move(end_of_turn)) {}

  // Thread-safe. Runs `task` on the loop thread. After Stop(), tasks are dropped.
  void Post(Task task);

  // Thread-safe; must not be called from the loop thread. Runs `fn` on the loop
  // and returns its result once the turn that ran it has been committed. Returns
  // `if_failed` instead when the loop stopped before running it or the turn's
  // commit failed (the caller must not claim the change happened).
  template <typename T>
  T CallOr(std::function<T()> fn, T if_failed) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    // Only the task and its release may own the promise: when both are gone
    // without setting it, the future breaks and this caller is let go.
    bool accepted = Enqueue([this, fn = std::move(fn), promise = std::move(promise)]() mutable {
      T value = fn();
      // Released after the commit at the end of this turn.
      after_turn_.push_back([promise, value = std::move(value)](bool committed) mutable {
        if (committed) promise->set_value(std::move(value));
        // else: the promise breaks and the caller gets `if_failed`.
      });
    });
    if (!accepted) return if_failed;
    try {
      return future.get();
    } catch (const std::future_error&) {
      return if_failed;  // stopped with the task queued, or the commit failed
    }
  }

  // Runs on the calling thread until Stop(); the thread becomes the owner.
  void Run();
  // Thread-safe. Run() returns after finishing the current turn.
  void Stop();

 private:
  bool Enqueue(Task task);

  EndOfTurn end_of_turn_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopped_ = false;
  std::vector<std::function<void(bool committed)>> after_turn_;  // loop thread only
};

}  // namespace gpuherd::daemon
