// Runs a burn-in of one level on several GPUs at once: one thread per GPU
// drives its ComputeDevice, while the calling thread samples the Driver (the
// driver has one owner) for the level-1 checks and the temperature curve, and
// reports progress.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "burnin/health.h"
#include "burnin/requalify_checks.h"
#include "burnin/result.h"
#include "core/status.h"
#include "core/time.h"
#include "gpu/compute.h"
#include "gpu/driver.h"
#include "host/clock.h"

namespace gpuherd::burnin {

struct BurnInOptions {
  int level = 1;                                // 1, 2 or 3; a level runs the ones below it too
  DurationMs stress_duration = 15 * 60 * 1000;  // level 3's sustained stress
  double memtest_fraction = 0.90;               // of free memory, level 2
  uint64_t seed = 1;                            // memory-test random patterns
  size_t max_memory_error_samples = 64;
  DurationMs sample_interval = 1000;            // temperature curve
  // Level 2 and up, after the memory work: a full/idle square wave that
  // trips weak power stages ("power_transients"; duration 0 leaves it out),
  // then a steady load whose clocks and power are held against the median of
  // the same model in this run ("peer_clock", "peer_power").
  TransientOptions transients{4, 10 * kSecondMs};
  DurationMs peer_load = 5 * kSecondMs;         // 0 leaves the peer checks out
  PeerOptions peers;
  // Reference rates per GPU model name for the throughput ratio: the fleet's
  // history (see ReferenceFromHistory). Missing models score against the
  // catalogue only.
  std::map<std::string, ModelReference> references;
};

// Checks options and returns kInvalidArgument with what to fix.
Status ValidateOptions(const BurnInOptions& options);

struct Progress {
  int gpu_index = 0;
  std::string phase;         // "level1", "memtest.walking_ones", "stress.fp32", "done"
  double fraction = 0;       // 0..1 of the whole run for this GPU
  std::optional<double> rate;
  std::string rate_unit;     // "GB/s", "TFLOPS"
  std::optional<double> temp_c;
  uint64_t errors = 0;       // memory + compute errors so far
};
// Called on the calling thread of Run, at least once per sample interval.
using ProgressCallback = std::function<void(const std::vector<Progress>&)>;

// `gpu_indices` are indices into `fleet` (as the driver enumerated them).
// Returns one run per GPU, scored, in the order given; a GPU that could not be
// tested has outcome kCouldNotRun with the reason, and the others go on. When
// `stop` is requested every GPU stops within about a second and the unfinished
// runs are kAborted. Fails only on bad options or an unknown index.
Result<std::vector<BurnInRun>> RunBurnIn(gpu::Driver& driver, const gpu::Fleet& fleet,
                                         const std::vector<int>& gpu_indices,
                                         gpu::ComputeBackend& compute, host::Clock& clock,
                                         const BurnInOptions& options, std::stop_token stop,
                                         const ProgressCallback& progress);

}  // namespace gpuherd::burnin
