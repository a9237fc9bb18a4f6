// Scenario files: which simulated GPUs a fleet has and which faults strike
// them when. The whole file is checked before anything runs; every error names
// the file, the line and what to fix. Format: docs/simulated-fleet.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "gpu/catalog.h"

namespace gpuherd::gpu::sim {

enum class FaultKind {
  kOverheat,       // temperature forced to a level at or over the slowdown limit
  kTempSlope,      // temperature climbs at a rate (°C/min): dust, dried paste
  kEccSbe,         // single-bit (corrected) ECC errors: a count or a rate
  kEccDbe,         // one double-bit error: DBE counter, XID 48, retired page/remapped row
  kPcieDownTrain,  // the link trains below its maximum width and/or generation
  kPcieReplay,     // PCIe replay counter growth
  kXid,            // an XID event; 79 means the GPU is gone for good
  kFanFailure,     // fan stuck at 0 %, cooling lost
  kThrottle,       // a clock throttle reason forced on
  kUnresponsive,   // the GPU does not answer, for a while or for good
  // Compute-side faults: the driver's readings do not show them; the
  // simulated compute device (sim_compute.h) does, as a burn-in finds them.
  kStuckBits,      // bits of one memory word that always read the same
  kComputeErrors,  // matrix results that differ from run to run
  kNan,            // NaN elements in matrix results
  kSlow,           // the card reaches only a share of its normal rates
  // Precursors: signs that come before a hardware fault (or fade without one,
  // `fades`), as failure prediction (src/predict) learns them.
  kFanWear,             // the fan falls short of its target speed and wobbles; cooling degrades
  kSbeAccelerating,     // single-bit ECC errors at a rate that doubles every `doubling`
  kReplayAccelerating,  // PCIe replays at a rate that doubles every `doubling`
  kClockUnstable,       // the SM clock and power swing under load by up to `amount`
  // Ex-mining cards: a weak power stage or a card that runs behind its peers.
  kTransientDrop,  // falls off the bus (XID 79) when the load swings full/idle `count` times within 1 s
  kUnderclock,     // under load, clocks and draws `factor` of what its peers do (e.g. 0.85)
};

// "overheat", "temp_slope", "ecc_sbe", ... as written in scenario files.
const char* FaultKindName(FaultKind kind);

struct Fault {
  FaultKind kind = FaultKind::kXid;
  int gpu = 0;
  DurationMs at = 0;                   // after the fleet's start
  std::optional<DurationMs> duration;  // unset: lasts until the end
  int xid = 0;                         // kXid
  std::optional<int> pcie_gen, pcie_width;  // kPcieDownTrain
  // kTempSlope: °C per minute; kEccSbe, kPcieReplay: events per minute;
  // kComputeErrors, kNan: wrong elements per minute of stress.
  double rate_per_min = 0;
  // kEccSbe, kPcieReplay: all at once at `at`; kComputeErrors, kNan: all in
  // the first stress batch from `at`.
  uint64_t count = 0;
  std::optional<double> temp_c;        // kOverheat; unset: 1 °C over the slowdown limit
  uint64_t throttle_reason = 0;        // kThrottle: one throttle:: bit
  // kStuckBits: the 32-bit word at byte `address` of the card's memory reads
  // back with the `mask` bits as in `value`, whatever was written.
  uint64_t address = 0;
  uint32_t mask = 0, value = 0;
  double factor = 1;                   // kSlow, kUnderclock: share of the normal rates, < 1
  // Precursors. kFanWear: the wear (0..1) reached after `duration`; 1 cools
  // like a failed fan. kClockUnstable: `amount` is the largest swing (share
  // of the clock) reached after `duration`. kSbeAccelerating and
  // kReplayAccelerating: `rate_per_min` at `at`, doubling every `doubling`.
  double peak = 1;
  double amount = 0.15;
  DurationMs doubling = 15 * kMinuteMs;
  // A false alarm: after `duration` the sign recedes over the same time
  // instead of staying (fan wear, clock swings) or stopping (error rates).
  bool fades = false;
  int line = 0;                        // 1-based line in the scenario source
};

// `count` GPUs of one model, side by side in the fleet.
struct GpuGroup {
  std::string model;           // catalogue key or NVML name, as written
  int count = 1;
  // Multiplies the model's thermal resistance: 1.3-1.6 for a card with worn
  // thermal paste or clogged fins, which runs hotter under the same load.
  double thermal_scale = 1.0;
  int line = 0;
};

struct Scenario {
  std::string source;          // the file path, or the name given to ParseScenario
  std::string description;
  std::optional<uint64_t> seed;
  std::optional<double> ambient_c;  // air temperature at the cards' inlets
  std::vector<GpuGroup> gpus;       // empty: the fleet comes from the options
  std::vector<Fault> faults;        // in the order written
};

// Parses and checks a scenario. `source` names it in error messages.
Result<Scenario> ParseScenario(std::string_view text, const std::string& source);
// Reads and parses a scenario file.
Result<Scenario> LoadScenario(const std::string& path);

// Number of GPUs the scenario's `gpus` list names (0 when it has none).
int ScenarioGpuCount(const Scenario& scenario);

// Checks the faults against the fleet they will run on (fleet[i] is GPU i's
// model): GPU indices in range, ECC faults only on ECC cards, a down-train
// below the card's maximum link, stuck bits inside the card's memory.
Status CheckFaultsFitFleet(const Scenario& scenario, std::span<const GpuModel* const> fleet);

}  // namespace gpuherd::gpu::sim
