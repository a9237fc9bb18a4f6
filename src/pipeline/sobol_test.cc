#include "pipeline/sobol.h"

#include <set>

#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

TEST(SobolTest, FirstPointsMatchThePublishedSequence) {
  auto seq = SobolSequence::Unshifted(3);
  ASSERT_TRUE(seq.ok());
  // Joe and Kuo's generator (and scipy's unscrambled Sobol) in Gray code order.
  const double expected[8][3] = {{0, 0, 0},           {0.5, 0.5, 0.5},     {0.75, 0.25, 0.25},
                                 {0.25, 0.75, 0.75},  {0.375, 0.375, 0.625}, {0.875, 0.875, 0.125},
                                 {0.625, 0.125, 0.875}, {0.125, 0.625, 0.375}};
  for (const auto& row : expected) {
    auto p = seq->Next();
    ASSERT_EQ(p.size(), 3u);
    for (int d = 0; d < 3; ++d) EXPECT_DOUBLE_EQ(p[d], row[d]) << "dimension " << d;
  }
}

TEST(SobolTest, ShiftedPointsStayBalancedInEveryDimension) {
  // The first 2^k points fall one in each of the 2^k equal intervals of
  // every dimension, whatever the seed: what a random sampler cannot promise.
  for (uint64_t seed : {1u, 7u, 12345u}) {
    auto seq = SobolSequence::Make(kSobolMaxDimensions, seed);
    ASSERT_TRUE(seq.ok());
    const int n = 64;
    std::vector<std::set<int>> cells(kSobolMaxDimensions);
    for (int i = 0; i < n; ++i) {
      auto p = seq->Next();
      for (int d = 0; d < kSobolMaxDimensions; ++d) {
        ASSERT_GE(p[d], 0.0);
        ASSERT_LT(p[d], 1.0);
        cells[d].insert(static_cast<int>(p[d] * n));
      }
    }
    for (int d = 0; d < kSobolMaxDimensions; ++d) EXPECT_EQ(cells[d].size(), 64u) << "dimension " << d;
  }
}

TEST(SobolTest, FirstTwoDimensionsFormANet) {
  // The first two dimensions are a (0, m, 2)-net: 16 points put one in each
  // cell of a 4×4 grid, and of a 2×8 and an 8×2 grid (the shift keeps it).
  auto seq = SobolSequence::Make(2, 99);
  ASSERT_TRUE(seq.ok());
  std::vector<std::vector<double>> pts;
  for (int i = 0; i < 16; ++i) pts.push_back(seq->Next());
  for (auto [nx, ny] : {std::pair{4, 4}, std::pair{2, 8}, std::pair{8, 2}}) {
    std::set<std::pair<int, int>> cells;
    for (const auto& p : pts) cells.insert({static_cast<int>(p[0] * nx), static_cast<int>(p[1] * ny)});
    EXPECT_EQ(cells.size(), 16u) << nx << "x" << ny;
  }
}

TEST(SobolTest, SameSeedSamePointsOtherSeedOtherPoints) {
  auto a = SobolSequence::Make(2, 5), b = SobolSequence::Make(2, 5), c = SobolSequence::Make(2, 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  bool differs = false;
  for (int i = 0; i < 10; ++i) {
    auto pa = a->Next(), pb = b->Next(), pc = c->Next();
    EXPECT_EQ(pa, pb);
    differs = differs || pa != pc;
  }
  EXPECT_TRUE(differs);
}

TEST(SobolTest, RefusesDimensionsItHasNoNumbersFor) {
  EXPECT_FALSE(SobolSequence::Make(0, 1).ok());
  auto too_many = SobolSequence::Make(kSobolMaxDimensions + 1, 1);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("uniform sampler"), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::pipeline
