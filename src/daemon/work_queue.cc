#include "daemon/work_queue.h"

#include <exception>

#include <spdlog/spdlog.h>

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
    try {
      task();
    } catch (const std::exception& e) {
      spdlog::error("a background task failed: {}", e.what());
    } catch (...) {
      spdlog::error("a background task failed with an unknown exception");
    }
  }
}

}  // namespace gpuherd::daemon
