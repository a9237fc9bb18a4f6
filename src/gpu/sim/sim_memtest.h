// What the memory-test patterns write into one 32-bit word, so that the
// simulated device can tell which reads a stuck bit spoils. Private to the
// simulated fleet.
#pragma once

#include <cstdint>
#include <vector>

#include "gpu/compute.h"

namespace gpuherd::gpu::sim {

// Every value `pattern` writes into the word at device address `address`
// (word `word_index` of the tested region) before reading it back, in order.
// Each pattern writes a value and its complement, as cuda_memtest's do.
std::vector<uint32_t> PatternWords(MemPattern pattern, uint64_t address, uint64_t word_index,
                                   uint64_t seed);

// How many times the pattern writes or reads the whole region: its cost in
// memory traffic relative to one sweep.
int PatternSweeps(MemPattern pattern);

}  // namespace gpuherd::gpu::sim
