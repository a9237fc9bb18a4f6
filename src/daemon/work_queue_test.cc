#include "daemon/work_queue.h"

#include <atomic>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

TEST(WorkQueueTest, RunsTasksInOrderAndDrainsOnDestruction) {
  std::vector<int> order;  // touched only by the queue's thread until it is joined
  {
    WorkQueue queue;
    for (int i = 0; i < 100; ++i) queue.Post([&order, i] { order.push_back(i); });
  }
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
}

TEST(WorkQueueTest, RunsOnItsOwnThread) {
  std::atomic<bool> other_thread{false};
  auto caller = std::this_thread::get_id();
  {
    WorkQueue queue;
    queue.Post([&] { other_thread = std::this_thread::get_id() != caller; });
  }
  EXPECT_TRUE(other_thread);
}

// A task that throws (a library's exception nobody expected) must not end
// the daemon through std::terminate; the tasks after it still run.
TEST(WorkQueueTest, ThrowingTaskDoesNotStopTheQueue) {
  std::vector<int> ran;
  {
    WorkQueue queue;
    queue.Post([] { throw std::runtime_error("from a library"); });
    queue.Post([] { throw 7; });
    queue.Post([&ran] { ran.push_back(1); });
  }
  EXPECT_EQ(ran, std::vector<int>{1});
}

}  // namespace
}  // namespace gpuherd::daemon
