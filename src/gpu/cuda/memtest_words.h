// The value every 32-bit word holds at each step of the memory test. Compiled
// twice from this one header: into the device kernels (kernels.cu) and into
// the host code that plans passes and the CPU reference the tests run, so the
// host checks exactly what the device writes.
//
// A word function maps (word index from the start of the region, the word's
// device address, two step parameters a and b) to the expected value; the
// kernels xor it with a per-step `flip` (all ones for the complement steps).
#pragma once

#include <stdint.h>

#if defined(__CUDA__) || defined(__CUDACC__)
#define GPUHERD_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GPUHERD_HOST_DEVICE inline
#endif

namespace gpuherd::gpu::cuda::memtest {

// Chris Wellons' lowbias32: a cheap 32-bit mixer (two multiplies), so that the
// random-sequence check stays memory-bound on fast cards.
GPUHERD_HOST_DEVICE uint32_t Mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// One set bit per word; a = the step (0..31) shifts it, so across 32 steps
// every word holds every bit position, and neighbours differ in each step.
GPUHERD_HOST_DEVICE uint32_t WalkingOnesWord(uint64_t index, uint64_t, uint32_t a, uint32_t) {
  return 1u << ((static_cast<uint32_t>(index) + a) & 31u);
}

GPUHERD_HOST_DEVICE uint32_t WalkingZerosWord(uint64_t index, uint64_t address, uint32_t a,
                                              uint32_t b) {
  return ~WalkingOnesWord(index, address, a, b);
}

// The word's own address, folded to 32 bits so that a fault on any single
// address line (low or high half) changes the value.
GPUHERD_HOST_DEVICE uint32_t OwnAddressWord(uint64_t, uint64_t address, uint32_t, uint32_t) {
  return static_cast<uint32_t>(address) ^ static_cast<uint32_t>(address >> 32);
}

// The same value everywhere: moving inversions of zeros/ones, 8-bit and random patterns.
GPUHERD_HOST_DEVICE uint32_t ConstantWord(uint64_t, uint64_t, uint32_t a, uint32_t) { return a; }

// a in every 20th word starting at offset b, its complement elsewhere.
GPUHERD_HOST_DEVICE uint32_t Modulo20Word(uint64_t index, uint64_t, uint32_t a, uint32_t b) {
  return static_cast<uint32_t>(index % 20u) == b ? a : ~a;
}

// A per-index hash of the 64-bit seed (a = low half, b = high half): the check
// regenerates it, so no copy of the written data is needed.
GPUHERD_HOST_DEVICE uint32_t RandomSequenceWord(uint64_t index, uint64_t, uint32_t a,
                                                uint32_t b) {
  return Mix32((static_cast<uint32_t>(index) * 0x9e3779b9u) ^ a ^
               (static_cast<uint32_t>(index >> 32) * 0x85ebca6bu + b));
}

// A mismatch as the check kernels store it; the layout is shared with the host.
struct MemErrorRecord {
  uint64_t address;
  uint32_t expected;
  uint32_t read;
};
static_assert(sizeof(MemErrorRecord) == 16, "the host reads these records as 16-byte rows");

}  // namespace gpuherd::gpu::cuda::memtest
