// Quasi-random points for sweeps (`random: {sampler: sobol}`): the Sobol'
// sequence with Joe and Kuo's direction numbers, digitally shifted by a
// seeded random word per dimension. The shift keeps the sequence's balance
// (the first 2^k points put exactly one point in each of the 2^k equal
// intervals of every dimension) while the seed still chooses which points
// are drawn, as it does for the uniform sampler. Pure and deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace gpuherd::pipeline {

// Dimensions the built-in direction numbers cover: one per swept parameter.
inline constexpr int kSobolMaxDimensions = 21;

class SobolSequence {
 public:
  // `dimensions` in [1, kSobolMaxDimensions]; refused otherwise.
  static Result<SobolSequence> Make(int dimensions, uint64_t seed);
  // The plain sequence without the shift (point 0 is the origin): for tests
  // against published values.
  static Result<SobolSequence> Unshifted(int dimensions);

  // The next point, each coordinate in [0, 1). Point i is the i-th in Gray
  // code order (Antonov–Saleev), so each call costs O(dimensions).
  std::vector<double> Next();
  int dimensions() const { return static_cast<int>(state_.size()); }

 private:
  SobolSequence() = default;

  // direction_[d][b]: the b-th direction number of dimension d, as the top
  // bits of a 32-bit word.
  std::vector<std::vector<uint32_t>> direction_;
  std::vector<uint32_t> state_;  // the current point's words, before the shift
  std::vector<uint32_t> shift_;  // the seeded digital shift, per dimension
  uint64_t index_ = 0;           // how many points Next() has returned
};

}  // namespace gpuherd::pipeline
