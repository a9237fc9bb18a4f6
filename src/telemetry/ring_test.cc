#include "telemetry/ring.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::telemetry {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<int> Contents(const Ring<int>& ring) {
  std::vector<int> out;
  for (int v : ring) out.push_back(v);
  return out;
}

TEST(RingTest, KeepsEverythingBelowCapacityOldestFirst) {
  Ring<int> ring(4);
  EXPECT_TRUE(ring.empty());
  ring.Push(1);
  ring.Push(2);
  ring.Push(3);
  EXPECT_EQ(ring.size(), 3u);
  EXPECT_EQ(ring.capacity(), 4u);
  EXPECT_THAT(Contents(ring), ElementsAre(1, 2, 3));
  EXPECT_EQ(ring[0], 1);
  EXPECT_EQ(ring.Newest(), 3);
}

TEST(RingTest, DropsOldestWhenFullAcrossSeveralWraps) {
  Ring<int> ring(3);
  for (int i = 1; i <= 11; ++i) ring.Push(i);
  EXPECT_EQ(ring.size(), 3u);
  EXPECT_THAT(Contents(ring), ElementsAre(9, 10, 11));
  EXPECT_EQ(ring[0], 9);
  EXPECT_EQ(ring[2], 11);
  EXPECT_EQ(ring.Newest(), 11);
}

TEST(RingTest, LastReturnsNewestNOldestFirst) {
  Ring<int> ring(5);
  for (int i = 1; i <= 7; ++i) ring.Push(i);  // holds 3..7
  EXPECT_THAT(ring.Last(2), ElementsAre(6, 7));
  EXPECT_THAT(ring.Last(0), IsEmpty());
  EXPECT_THAT(ring.Last(100), ElementsAre(3, 4, 5, 6, 7));
}

TEST(RingTest, ZeroCapacityStillKeepsTheNewest) {
  Ring<std::string> ring(0);
  EXPECT_EQ(ring.capacity(), 1u);
  ring.Push("a");
  ring.Push("b");
  EXPECT_EQ(ring.size(), 1u);
  EXPECT_EQ(ring.Newest(), "b");
}

TEST(RingTest, ClearEmptiesAndAcceptsNewElements) {
  Ring<int> full(2);
  full.Push(1);
  full.Push(2);
  full.Push(3);
  full.Clear();
  EXPECT_TRUE(full.empty());
  EXPECT_THAT(Contents(full), IsEmpty());
  full.Push(4);
  full.Push(5);
  full.Push(6);
  EXPECT_THAT(Contents(full), ElementsAre(5, 6));

  Ring<int> partial(4);
  partial.Push(1);
  partial.Push(2);
  partial.Clear();
  partial.Push(3);
  EXPECT_THAT(Contents(partial), ElementsAre(3));
  EXPECT_EQ(partial.Newest(), 3);
}

}  // namespace
}  // namespace gpuherd::telemetry
