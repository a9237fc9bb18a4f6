#include "gpu/cuda/memtest_plan.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/cuda/memtest_words.h"

namespace gpuherd::gpu::cuda {
namespace {

constexpr uint64_t kBase = 0x7f0000000000ull;  // a device-like virtual address
constexpr size_t kWords = 1000;

class MemTestPlanTest : public ::testing::TestWithParam<MemPattern> {};

TEST_P(MemTestPlanTest, HealthyMemoryPassesWithoutErrors) {
  std::vector<uint32_t> words(kWords, 0xdeadbeef);
  std::vector<MemError> errors;
  const MemTestPlan plan = PlanMemTest(GetParam(), 42);
  ASSERT_FALSE(plan.steps.empty());
  EXPECT_EQ(plan.steps.front().kind, MemTestStep::Kind::kWrite);
  EXPECT_EQ(RunPlanOnHost(plan, words, kBase, 10, &errors), 0u);
  EXPECT_TRUE(errors.empty());
}

// A cell stuck at 0 or 1 in any bit position must be caught by every pattern:
// each writes every bit of every word both ways at some step.
TEST_P(MemTestPlanTest, StuckBitsAreCaughtInBothPolarities) {
  for (int bit : {0, 7, 13, 31}) {
    for (bool stuck_high : {false, true}) {
      std::vector<uint32_t> words(kWords, 0);
      const size_t bad = 517;
      const uint32_t mask = 1u << bit;
      auto fault = [&](std::span<uint32_t> memory) {
        memory[bad] = stuck_high ? (memory[bad] | mask) : (memory[bad] & ~mask);
      };
      std::vector<MemError> errors;
      const uint64_t count =
          RunPlanOnHost(PlanMemTest(GetParam(), 7), words, kBase, 4, &errors, fault);
      ASSERT_GT(count, 0u) << MemPatternName(GetParam()) << " missed bit " << bit
                           << (stuck_high ? " stuck at 1" : " stuck at 0");
      ASSERT_FALSE(errors.empty());
      EXPECT_LE(errors.size(), 4u);
      for (const MemError& error : errors) {
        EXPECT_EQ(error.address, kBase + 4 * bad);
        EXPECT_EQ(error.offset, 4 * bad);
        EXPECT_EQ(error.xor_bits(), mask);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPatterns, MemTestPlanTest, ::testing::ValuesIn(AllMemPatterns()),
                         [](const auto& info) { return std::string(MemPatternName(info.param)); });

TEST(MemTestPlanTest, ErrorCountKeepsCountingPastTheStoredRecords) {
  std::vector<uint32_t> words(kWords, 0);
  // Every word loses its top bit after each write: hundreds of mismatches.
  auto fault = [](std::span<uint32_t> memory) {
    for (uint32_t& word : memory) word &= 0x7fffffffu;
  };
  std::vector<MemError> errors;
  const uint64_t count =
      RunPlanOnHost(PlanMemTest(MemPattern::kRandomSequence, 3), words, kBase, 5, &errors, fault);
  EXPECT_GT(count, 100u);
  EXPECT_EQ(errors.size(), 5u);
}

TEST(MemTestPlanTest, OwnAddressTellsApartAliasedAddresses) {
  // A decoder fault on any single address line maps a word onto another whose
  // address differs in that line; the two must hold different values.
  const uint64_t address = 0x7f12345678a0ull;
  for (int line = 2; line < 48; ++line) {
    const uint64_t alias = address ^ (uint64_t{1} << line);
    EXPECT_NE(memtest::OwnAddressWord(0, address, 0, 0), memtest::OwnAddressWord(0, alias, 0, 0))
        << "address line " << line;
  }
}

TEST(MemTestPlanTest, RandomSequenceDependsOnTheSeedAndLooksRandom) {
  std::set<uint32_t> values;
  int ones = 0;
  for (uint64_t i = 0; i < 4096; ++i) {
    const uint32_t word = memtest::RandomSequenceWord(i, 0, 11, 0);
    values.insert(word);
    ones += __builtin_popcount(word);
  }
  EXPECT_GT(values.size(), 4090u);
  EXPECT_NEAR(ones / 4096.0, 16.0, 0.5);
  EXPECT_NE(memtest::RandomSequenceWord(5, 0, 11, 0), memtest::RandomSequenceWord(5, 0, 12, 0));
  // Word indexes past 2^32 (regions over 16 GiB) do not repeat the first ones.
  EXPECT_NE(memtest::RandomSequenceWord(5, 0, 11, 0),
            memtest::RandomSequenceWord(5 + (uint64_t{1} << 32), 0, 11, 0));
}

TEST(MemTestPlanTest, MovingInversionsWalkUpThenDown) {
  const MemTestPlan plan = PlanMemTest(MemPattern::kMovingInversions, 0);
  EXPECT_EQ(plan.function, WordFunction::kConstant);
  ASSERT_EQ(plan.steps.size(), 8u);  // zeros, then ones: write, up, down, final check
  EXPECT_TRUE(plan.steps[1].invert);
  EXPECT_FALSE(plan.steps[1].descending);
  EXPECT_TRUE(plan.steps[2].invert);
  EXPECT_TRUE(plan.steps[2].descending);
  EXPECT_EQ(plan.steps[0].a, 0u);
  EXPECT_EQ(plan.steps[4].a, 0xffffffffu);
  // 2 plain steps + 2 read-and-write steps, twice.
  EXPECT_EQ(plan.TrafficFactor(), 12u);
}

TEST(MemTestPlanTest, WalkingPatternsVisitEveryBitPosition) {
  const MemTestPlan plan = PlanMemTest(MemPattern::kWalkingOnes, 0);
  EXPECT_EQ(plan.steps.size(), 64u);
  for (uint64_t index : {0u, 1u, 31u}) {
    uint32_t seen = 0;
    for (const MemTestStep& step : plan.steps) {
      seen |= memtest::WalkingOnesWord(index, 0, step.a, step.b);
    }
    EXPECT_EQ(seen, 0xffffffffu);
  }
  EXPECT_EQ(std::string(WordFunctionName(PlanMemTest(MemPattern::kModulo20, 0).function)),
            "modulo_20");
}

}  // namespace
}  // namespace gpuherd::gpu::cuda
