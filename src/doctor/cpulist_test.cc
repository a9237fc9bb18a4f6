#include "doctor/cpulist.h"

#include <gtest/gtest.h>

#include "doctor/test_tree.h"

namespace gpuherd::doctor {
namespace {

TEST(CpuListTest, FirstThreadsFromTopology) {
  TestTree tree("tuned");
  const std::map<int, int> first = ReadFirstThreads(tree.host());
  ASSERT_EQ(first.size(), 16u);
  EXPECT_EQ(first.at(3), 3);
  EXPECT_EQ(first.at(11), 3);
  TestTree empty;
  EXPECT_TRUE(ReadFirstThreads(empty.host()).empty());
}

}  // namespace
}  // namespace gpuherd::doctor
