#include "daemon/work_queue.h"

#include <atomic>
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

}  // namespace
}  // namespace gpuherd::daemon
