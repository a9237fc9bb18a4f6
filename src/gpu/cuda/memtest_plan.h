// How each memory-test pattern runs as a sequence of write and check kernel
// launches, and a CPU reference that runs the same sequence over host memory
// with the same word functions (memtest_words.h), so the tests check what the
// device does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "gpu/compute.h"

namespace gpuherd::gpu::cuda {

// The word functions of memtest_words.h; each has a memtest_write_<name> and a
// memtest_check_<name> kernel.
enum class WordFunction {
  kWalkingOnes,
  kWalkingZeros,
  kOwnAddress,
  kConstant,
  kModulo20,
  kRandomSequence,
};
// "walking_ones", "walking_zeros", "own_address", "constant", "modulo_20",
// "random_sequence".
const char* WordFunctionName(WordFunction function);

struct MemTestStep {
  enum class Kind { kWrite, kCheck };
  Kind kind = Kind::kWrite;
  uint32_t a = 0;     // word-function parameters
  uint32_t b = 0;
  uint32_t flip = 0;  // xor applied to every value (0 or ~0u)
  // Checks only: write the complement of the expected value after reading.
  bool invert = false;
  // Checks only: walk from the top of the region down.
  bool descending = false;
};

struct MemTestPlan {
  WordFunction function = WordFunction::kConstant;
  std::vector<MemTestStep> steps;
  // Bytes moved per byte tested over all steps (reads and writes).
  uint64_t TrafficFactor() const;
};

MemTestPlan PlanMemTest(MemPattern pattern, uint64_t seed);

// Runs `plan` over `words`, which the device would see at `base_address`,
// exactly as the kernels do. `after_writes`, when set, is called after every
// step that wrote (a test's way to model a faulty cell). Returns the number
// of mismatching reads; the first `max_errors` land in `errors`.
uint64_t RunPlanOnHost(const MemTestPlan& plan, std::span<uint32_t> words, uint64_t base_address,
                       size_t max_errors, std::vector<MemError>* errors,
                       const std::function<void(std::span<uint32_t>)>& after_writes = {});

}  // namespace gpuherd::gpu::cuda
