// Random fleet histories from a seed: minute rollups of simulated GPUs over
// days, with hardware faults, the signs that come before them (the simulated
// fleet's precursor kinds: fan_wear, temp_slope, sbe_accelerating,
// replay_accelerating, clock_unstable), noise, and false alarms (the same
// signs, weaker, fading without a fault). What failure prediction trains and
// is judged on. Pure and deterministic: the same options give the same
// history on any machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "gpu/sim/scenario.h"
#include "store/records.h"

namespace gpuherd::predict {

struct HistoryOptions {
  uint64_t seed = 1;
  int gpus = 64;
  int days = 30;
  // Models, cycled over the fleet; empty: a lab's mix (datacenter cards with
  // ECC and no fan, GeForce cards with fans and no ECC).
  std::vector<std::string> models;
  TimeMs start = 1767225600000;     // 2026-01-01T00:00:00Z
  double faults_per_gpu_day = 0.12;
  double false_alarms_per_gpu_day = 0.25;
  double sudden_share = 0.08;       // faults that come without any sign
  int samples_per_minute = 3;       // readings rolled up into each minute
};

// A sign in a series (for tests, reports and the scenario it came from).
struct Sign {
  gpu::sim::FaultKind kind = gpu::sim::FaultKind::kFanWear;
  TimeMs start = 0;
  TimeMs peak = 0;       // when it is strongest: the fault, or where it starts to fade
  bool fades = false;
};

// One life of one GPU slot: from a fresh card to its fault (or the end of
// the history). After a fault the card is repaired or replaced and a new
// series starts, so a series never holds minutes after its fault.
struct Series {
  std::string uuid;
  int gpu = 0;                      // slot in the fleet
  std::string model;                // catalogue key
  std::optional<double> slowdown_c; // the card's slowdown temperature
  std::vector<store::RollupRecord> minutes;  // oldest first, one per minute
  std::optional<TimeMs> fault_time; // the hardware fault that ends it
  std::string fault_kind;           // "fan_failure", "overheat", "ecc_dbe", "xid_79", "xid_62"
  bool sudden = false;              // the fault came without a sign
  std::vector<Sign> signs;
};

struct History {
  std::vector<Series> series;       // by slot, then time
  int faults = 0, false_alarms = 0;
};

Result<History> GenerateHistory(const HistoryOptions& options);

}  // namespace gpuherd::predict
