#include "gpu/compute.h"

namespace gpuherd::gpu {

const char* MemPatternName(MemPattern pattern) {
  switch (pattern) {
    case MemPattern::kWalkingOnes: return "walking_ones";
    case MemPattern::kWalkingZeros: return "walking_zeros";
    case MemPattern::kOwnAddress: return "own_address";
    case MemPattern::kMovingInversions: return "moving_inversions";
    case MemPattern::kMovingInversions8Bit: return "moving_inversions_8bit";
    case MemPattern::kMovingInversionsRandom: return "moving_inversions_random";
    case MemPattern::kModulo20: return "modulo_20";
    case MemPattern::kRandomSequence: return "random_sequence";
  }
  return "unknown";
}

std::vector<MemPattern> AllMemPatterns() {
  return {MemPattern::kWalkingOnes,          MemPattern::kWalkingZeros,
          MemPattern::kOwnAddress,           MemPattern::kMovingInversions,
          MemPattern::kMovingInversions8Bit, MemPattern::kMovingInversionsRandom,
          MemPattern::kModulo20,             MemPattern::kRandomSequence};
}

const char* CopyKindName(CopyKind kind) {
  switch (kind) {
    case CopyKind::kHostToDevice: return "h2d";
    case CopyKind::kDeviceToHost: return "d2h";
    case CopyKind::kDeviceToDevice: return "d2d";
  }
  return "unknown";
}

const char* PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kFp64: return "fp64";
  }
  return "unknown";
}

}  // namespace gpuherd::gpu
