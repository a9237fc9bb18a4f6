#include "gpu/cuda/memtest_plan.h"

#include "gpu/cuda/memtest_words.h"

namespace gpuherd::gpu::cuda {
namespace {

using Kind = MemTestStep::Kind;
constexpr uint32_t kAllOnes = 0xffffffffu;

MemTestStep Write(uint32_t a, uint32_t b = 0, uint32_t flip = 0) {
  return {Kind::kWrite, a, b, flip, false, false};
}
MemTestStep Check(uint32_t a, uint32_t b = 0, uint32_t flip = 0, bool invert = false,
                  bool descending = false) {
  return {Kind::kCheck, a, b, flip, invert, descending};
}

// cuda_memtest's moving inversions: write p, then check and invert upwards,
// check and invert downwards, and check that p is back.
void AddMovingInversions(uint32_t pattern, std::vector<MemTestStep>* steps) {
  steps->push_back(Write(pattern));
  steps->push_back(Check(pattern, 0, 0, /*invert=*/true, /*descending=*/false));
  steps->push_back(Check(pattern, 0, kAllOnes, /*invert=*/true, /*descending=*/true));
  steps->push_back(Check(pattern));
}

uint32_t WordAt(WordFunction function, uint64_t index, uint64_t address, uint32_t a, uint32_t b) {
  switch (function) {
    case WordFunction::kWalkingOnes: return memtest::WalkingOnesWord(index, address, a, b);
    case WordFunction::kWalkingZeros: return memtest::WalkingZerosWord(index, address, a, b);
    case WordFunction::kOwnAddress: return memtest::OwnAddressWord(index, address, a, b);
    case WordFunction::kConstant: return memtest::ConstantWord(index, address, a, b);
    case WordFunction::kModulo20: return memtest::Modulo20Word(index, address, a, b);
    case WordFunction::kRandomSequence: return memtest::RandomSequenceWord(index, address, a, b);
  }
  return 0;
}

}  // namespace

const char* WordFunctionName(WordFunction function) {
  switch (function) {
    case WordFunction::kWalkingOnes: return "walking_ones";
    case WordFunction::kWalkingZeros: return "walking_zeros";
    case WordFunction::kOwnAddress: return "own_address";
    case WordFunction::kConstant: return "constant";
    case WordFunction::kModulo20: return "modulo_20";
    case WordFunction::kRandomSequence: return "random_sequence";
  }
  return "unknown";
}

uint64_t MemTestPlan::TrafficFactor() const {
  uint64_t factor = 0;
  for (const MemTestStep& step : steps) factor += (step.kind == Kind::kCheck && step.invert) ? 2 : 1;
  return factor;
}

MemTestPlan PlanMemTest(MemPattern pattern, uint64_t seed) {
  const uint32_t seed_low = static_cast<uint32_t>(seed);
  const uint32_t seed_high = static_cast<uint32_t>(seed >> 32);
  const uint32_t random = memtest::Mix32(seed_low ^ memtest::Mix32(seed_high + 0x2545f491u));
  MemTestPlan plan;
  switch (pattern) {
    case MemPattern::kWalkingOnes:
    case MemPattern::kWalkingZeros:
      plan.function = pattern == MemPattern::kWalkingOnes ? WordFunction::kWalkingOnes
                                                          : WordFunction::kWalkingZeros;
      for (uint32_t bit = 0; bit < 32; ++bit) {
        plan.steps.push_back(Write(bit));
        plan.steps.push_back(Check(bit));
      }
      break;
    case MemPattern::kOwnAddress:
      plan.function = WordFunction::kOwnAddress;
      plan.steps = {Write(0), Check(0), Write(0, 0, kAllOnes), Check(0, 0, kAllOnes)};
      break;
    case MemPattern::kMovingInversions:
      plan.function = WordFunction::kConstant;
      AddMovingInversions(0, &plan.steps);
      AddMovingInversions(kAllOnes, &plan.steps);
      break;
    case MemPattern::kMovingInversions8Bit:
      plan.function = WordFunction::kConstant;
      for (int shift = 0; shift < 8; ++shift) {
        AddMovingInversions(0x01010101u << shift, &plan.steps);
      }
      break;
    case MemPattern::kMovingInversionsRandom:
      plan.function = WordFunction::kConstant;
      AddMovingInversions(random, &plan.steps);
      break;
    case MemPattern::kModulo20:
      plan.function = WordFunction::kModulo20;
      for (uint32_t offset = 0; offset < 20; ++offset) {
        plan.steps.push_back(Write(random, offset));
        plan.steps.push_back(Check(random, offset));
      }
      break;
    case MemPattern::kRandomSequence:
      plan.function = WordFunction::kRandomSequence;
      plan.steps = {Write(seed_low, seed_high), Check(seed_low, seed_high),
                    Write(seed_low, seed_high, kAllOnes), Check(seed_low, seed_high, kAllOnes)};
      break;
  }
  return plan;
}

uint64_t RunPlanOnHost(const MemTestPlan& plan, std::span<uint32_t> words, uint64_t base_address,
                       size_t max_errors, std::vector<MemError>* errors,
                       const std::function<void(std::span<uint32_t>)>& after_writes) {
  uint64_t error_count = 0;
  const uint64_t count = words.size();
  for (const MemTestStep& step : plan.steps) {
    bool wrote = step.kind == Kind::kWrite;
    for (uint64_t t = 0; t < count; ++t) {
      const uint64_t i = step.descending ? count - 1 - t : t;
      const uint64_t address = base_address + 4 * i;
      const uint32_t expected = WordAt(plan.function, i, address, step.a, step.b) ^ step.flip;
      if (step.kind == Kind::kWrite) {
        words[i] = expected;
        continue;
      }
      if (words[i] != expected) {
        if (error_count < max_errors && errors != nullptr) {
          errors->push_back({address, address - base_address, expected, words[i]});
        }
        ++error_count;
      }
      if (step.invert) {
        words[i] = ~expected;
        wrote = true;
      }
    }
    if (wrote && after_writes) after_writes(words);
  }
  return error_count;
}

}  // namespace gpuherd::gpu::cuda
