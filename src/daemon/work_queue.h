// One background thread that runs tasks in the order they were posted. The
// daemon launches jobs on it, so that a slow fork never holds up the event
// loop (and with it every API caller).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gpuherd::daemon {

class WorkQueue {
 public:
  WorkQueue();
  ~WorkQueue();  // runs what is queued, then joins
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Thread-safe. Tasks run one at a time, in order, on the queue's thread.
  void Post(std::function<void()> task);

 private:
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the fields it uses
};

}  // namespace gpuherd::daemon
