#include "gpu/sim/sim_memtest.h"

#include "gpu/sim/card.h"

namespace gpuherd::gpu::sim {
namespace {

constexpr int kWordBits = 32;
constexpr int kModuloStride = 20;

uint32_t RandomWord(uint64_t seed) { return static_cast<uint32_t>(SplitMix64(seed).Next()); }

}  // namespace

std::vector<uint32_t> PatternWords(MemPattern pattern, uint64_t address, uint64_t word_index,
                                   uint64_t seed) {
  std::vector<uint32_t> words;
  switch (pattern) {
    case MemPattern::kWalkingOnes:
      for (int bit = 0; bit < kWordBits; ++bit) words.push_back(1u << bit);
      break;
    case MemPattern::kWalkingZeros:
      for (int bit = 0; bit < kWordBits; ++bit) words.push_back(~(1u << bit));
      break;
    case MemPattern::kOwnAddress:
      words = {static_cast<uint32_t>(address), ~static_cast<uint32_t>(address)};
      break;
    case MemPattern::kMovingInversions:
      words = {0u, ~0u};
      break;
    case MemPattern::kMovingInversions8Bit:
      for (int bit = 0; bit < 8; ++bit) {
        const uint32_t p = 0x01010101u << bit;
        words.push_back(p);
        words.push_back(~p);
      }
      break;
    case MemPattern::kMovingInversionsRandom: {
      const uint32_t p = RandomWord(seed);
      words = {p, ~p};
      break;
    }
    case MemPattern::kModulo20: {
      // Pass j writes p to every 20th word from j and ~p elsewhere.
      const uint32_t p = RandomWord(seed ^ kModuloStride);
      for (int j = 0; j < kModuloStride; ++j) {
        words.push_back(word_index % kModuloStride == static_cast<uint64_t>(j) ? p : ~p);
      }
      break;
    }
    case MemPattern::kRandomSequence: {
      const uint32_t p = RandomWord(seed ^ (word_index * 0x9E3779B97F4A7C15ull));
      words = {p, ~p};
      break;
    }
  }
  return words;
}

int PatternSweeps(MemPattern pattern) {
  switch (pattern) {
    case MemPattern::kWalkingOnes:
    case MemPattern::kWalkingZeros:
      return 2 * kWordBits;  // write + read per bit position
    case MemPattern::kModulo20:
      return 2 * kModuloStride;
    case MemPattern::kMovingInversions8Bit:
      return 4 * 8;
    case MemPattern::kOwnAddress:
    case MemPattern::kMovingInversions:
    case MemPattern::kMovingInversionsRandom:
    case MemPattern::kRandomSequence:
      return 4;  // write, read + write the complement, read
  }
  return 4;
}

}  // namespace gpuherd::gpu::sim
