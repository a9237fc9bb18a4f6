#include "pipeline/sobol.h"

#include <algorithm>
#include <bit>
#include <random>

#include <fmt/format.h>

namespace gpuherd::pipeline {
namespace {

constexpr int kBits = 32;

// Joe and Kuo's direction numbers (the new-joe-kuo-6.21201 set) for
// dimensions 2.. : the degree s of the primitive polynomial, its middle
// coefficients a (as bits), and the initial odd numbers m_1..m_s.
struct Primitive {
  int s;
  uint32_t a;
  uint32_t m[7];
};
constexpr Primitive kPrimitives[kSobolMaxDimensions - 1] = {
    {1, 0, {1}},
    {2, 1, {1, 3}},
    {3, 1, {1, 3, 1}},
    {3, 2, {1, 1, 1}},
    {4, 1, {1, 1, 3, 3}},
    {4, 4, {1, 3, 5, 13}},
    {5, 2, {1, 1, 5, 5, 17}},
    {5, 4, {1, 1, 5, 5, 5}},
    {5, 7, {1, 1, 7, 11, 19}},
    {5, 11, {1, 1, 5, 1, 1}},
    {5, 13, {1, 1, 1, 3, 11}},
    {5, 14, {1, 3, 5, 5, 31}},
    {6, 1, {1, 3, 3, 9, 7, 49}},
    {6, 13, {1, 1, 1, 15, 21, 21}},
    {6, 16, {1, 3, 1, 13, 27, 49}},
    {6, 19, {1, 1, 1, 15, 7, 5}},
    {6, 22, {1, 3, 1, 15, 13, 25}},
    {6, 25, {1, 1, 5, 5, 19, 61}},
    {7, 1, {1, 3, 7, 11, 23, 15, 103}},
    {7, 4, {1, 3, 7, 13, 13, 15, 69}},
};

std::vector<uint32_t> Directions(int dimension) {
  std::vector<uint32_t> v(kBits);
  if (dimension == 0) {  // van der Corput: every m_i = 1
    for (int b = 0; b < kBits; ++b) v[b] = 1u << (kBits - 1 - b);
    return v;
  }
  const Primitive& p = kPrimitives[dimension - 1];
  for (int b = 0; b < kBits; ++b) {
    if (b < p.s) {
      v[b] = p.m[b] << (kBits - 1 - b);
      continue;
    }
    // v_b = v_{b-s} ^ (v_{b-s} >> s) ^ XOR over k of a_k · v_{b-k}.
    uint32_t x = v[b - p.s] ^ (v[b - p.s] >> p.s);
    for (int k = 1; k < p.s; ++k) {
      if ((p.a >> (p.s - 1 - k)) & 1u) x ^= v[b - k];
    }
    v[b] = x;
  }
  return v;
}

}  // namespace

Result<SobolSequence> SobolSequence::Make(int dimensions, uint64_t seed) {
  if (dimensions < 1 || dimensions > kSobolMaxDimensions) {
    return InvalidArgument(fmt::format(
        "a sobol sweep takes 1 to {} parameters, not {}; use the uniform sampler for more",
        kSobolMaxDimensions, dimensions));
  }
  SobolSequence seq;
  std::mt19937_64 rng(seed);
  for (int d = 0; d < dimensions; ++d) {
    seq.direction_.push_back(Directions(d));
    seq.state_.push_back(0);
    seq.shift_.push_back(static_cast<uint32_t>(rng() >> 32));
  }
  return seq;
}

Result<SobolSequence> SobolSequence::Unshifted(int dimensions) {
  auto seq = Make(dimensions, 0);
  if (seq.ok()) std::fill(seq->shift_.begin(), seq->shift_.end(), 0u);
  return seq;
}

std::vector<double> SobolSequence::Next() {
  if (index_ > 0) {
    // Gray code: point i differs from point i-1 in the direction of the
    // lowest zero bit of i-1. The 2^32-th point would repeat; sweeps are
    // bounded far below that.
    const int bit = std::countr_one(index_ - 1);
    for (size_t d = 0; d < state_.size(); ++d) state_[d] ^= direction_[d][bit % kBits];
  }
  ++index_;
  std::vector<double> point(state_.size());
  for (size_t d = 0; d < state_.size(); ++d) {
    point[d] = static_cast<double>(state_[d] ^ shift_[d]) / 4294967296.0;  // 2^32
  }
  return point;
}

}  // namespace gpuherd::pipeline
