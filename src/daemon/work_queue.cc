#include "daemon/work_queue.h"

#include "core/log.h"

namespace gpuherd::daemon {

WorkQueue::WorkQueue() : thread_([this] { Run(); }) {}

WorkQueue::~WorkQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void WorkQueue::Post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkQueue::Run() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything ran
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    // Nothing may leave the thread: an exception here would end the daemon.
    RunLoggingExceptions(task, "a background task");
  }
}

}  // namespace gpuherd::daemon
