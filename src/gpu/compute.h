// What the burn-in asks of a GPU's compute side: memory test passes, copy
// bandwidth, checked matrix work. Two implementations, like gpu::Driver: the
// CUDA driver API (gpu/cuda, loaded at run time) and the simulated fleet
// (gpu/sim, with injectable faults), so detection and scoring are tested
// without a GPU.
//
// Threading: a ComputeDevice belongs to one thread (one per GPU in a burn-in);
// a ComputeBackend may be called from any thread. Every long call checks its
// std::stop_token between kernel launches and fails with kAborted when asked
// to stop; device memory is freed on every path.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/types.h"

namespace gpuherd::gpu {

// cuda_memtest's patterns. Each pass writes the whole region, then reads it
// back and compares on the device.
enum class MemPattern {
  kWalkingOnes,          // one set bit walks through each 32-bit word
  kWalkingZeros,         // one clear bit walks through each word
  kOwnAddress,           // each word holds its own address, then its complement
  kMovingInversions,     // all zeros / all ones, up then down, inverted in place
  kMovingInversions8Bit, // a walking 8-bit pattern, inverted in place
  kMovingInversionsRandom,  // a random 32-bit pattern, inverted in place
  kModulo20,             // a pattern every 20th word, its complement elsewhere
  kRandomSequence,       // a seeded pseudo-random word per address
};
// "walking_ones", "walking_zeros", "own_address", "moving_inversions",
// "moving_inversions_8bit", "moving_inversions_random", "modulo_20",
// "random_sequence".
const char* MemPatternName(MemPattern pattern);
// Every pattern, in the order a level 2 runs them.
std::vector<MemPattern> AllMemPatterns();

// One word that read back wrong.
struct MemError {
  uint64_t address = 0;   // device virtual address of the 32-bit word
  uint64_t offset = 0;    // bytes from the start of the tested region
  uint32_t expected = 0;
  uint32_t read = 0;
  uint32_t xor_bits() const { return expected ^ read; }
};

struct MemTestPass {
  MemPattern pattern = MemPattern::kWalkingOnes;
  uint64_t bytes_tested = 0;
  uint64_t error_count = 0;            // every mismatching word
  std::vector<MemError> errors;        // the first ones, at most max_errors
  double seconds = 0;
  double bandwidth_gbs = 0;            // bytes written + read per second
};

enum class CopyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };
const char* CopyKindName(CopyKind kind);  // "h2d", "d2h", "d2d"

enum class Precision { kFp32, kFp16, kBf16, kFp64 };
const char* PrecisionName(Precision precision);  // "fp32", "fp16", "bf16", "fp64"

struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

// A small GEMM checked element by element against a CPU reference.
struct GemmCheck {
  int n = 0;                    // n x n x n
  uint64_t mismatches = 0;      // elements beyond the tolerance
  uint64_t nans = 0;            // NaN or Inf elements, counted apart
  double max_rel_error = 0;
};

// One batch of stress work: the same matrix product computed `iterations`
// times, each result compared with the first one on the device (identical
// computations must agree bit for bit, as gpu-burn checks).
struct StressBatch {
  Precision precision = Precision::kFp32;
  int iterations = 0;
  double flops = 0;             // floating-point operations done
  double seconds = 0;           // device time of the batch
  uint64_t mismatches = 0;      // elements that differ from the first result
  uint64_t nans = 0;            // NaN or Inf elements, counted apart
};

class ComputeDevice {
 public:
  virtual ~ComputeDevice() = default;

  virtual bool Supports(Precision precision) const = 0;
  virtual Result<MemoryInfo> Memory() = 0;

  // Allocates `bytes`, copies a known pattern host → device → host and compares.
  // Ok with the number of mismatching bytes (0 on a good card).
  virtual Result<uint64_t> RoundTrip(uint64_t bytes) = 0;

  // One pattern over `bytes` of device memory (allocated here, freed here).
  virtual Result<MemTestPass> MemTest(MemPattern pattern, uint64_t bytes, uint64_t seed,
                                      size_t max_errors, std::stop_token stop) = 0;

  // Copy bandwidth in GB/s (1e9 bytes/s) over `bytes` (pinned host memory).
  virtual Result<double> CopyBandwidth(CopyKind kind, uint64_t bytes, int repeats) = 0;

  // Device memory bandwidth of a read-write kernel, GB/s (each byte read and
  // written counts once).
  virtual Result<double> MemoryBandwidth(uint64_t bytes, int repeats) = 0;

  virtual Result<GemmCheck> CheckedGemm(int n) = 0;

  // Matrices of n x n stay allocated between batches: call PrepareStress once,
  // then Stress as often as the duration allows.
  virtual Status PrepareStress(Precision precision, int n) = 0;
  virtual Result<StressBatch> Stress(Precision precision, int iterations,
                                     std::stop_token stop) = 0;
  // Leaves the card without work until the next call (the idle half of the
  // power-transient square wave). A real device is idle once its last call
  // returned (every call synchronizes), so only a model needs to be told.
  virtual void Idle() {}
};

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;
  virtual std::string name() const = 0;  // "cuda" or "sim"
  virtual bool simulated() const = 0;
  // Opens the compute side of `gpu` (matched by UUID, not by index: the CUDA
  // order can differ from NVML's). kUnavailable when there is no way to run
  // work on it (no CUDA driver, a context that cannot be created); the
  // message says why.
  virtual Result<std::unique_ptr<ComputeDevice>> Open(const GpuInfo& gpu) = 0;
};

}  // namespace gpuherd::gpu
