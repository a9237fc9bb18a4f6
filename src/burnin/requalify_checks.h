// Requalification checks that ex-mining cards need, beyond gpu-burn's steady
// load: power transients (a square wave of full and idle load at a few hertz,
// which trips weak power supplies and VRMs) and peer-relative checks (clocks
// and power under the same load against the median of the same model in this
// machine, as DCGM 4.5 added). Pure: the plan and the judgement; the driving
// of the load and the readings come from the caller.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "burnin/result.h"
#include "core/time.h"
#include "gpu/types.h"

namespace gpuherd::burnin {

struct TransientOptions {
  double frequency_hz = 4;               // full/idle cycles a second
  DurationMs duration = 20 * kSecondMs;  // of the square wave
};

// One phase of the square wave: from `start` (relative to its beginning) the
// card is driven at full load (`full`) or left idle, for half a period.
struct LoadPhase {
  DurationMs start = 0;
  bool full = false;
};
std::vector<LoadPhase> SquareWave(const TransientOptions& options);

// What was read while the square wave ran on one GPU.
struct TransientObservation {
  int readings = 0;          // readings that answered
  int failed_readings = 0;   // readings that did not
  std::vector<int> xids;     // XIDs reported during the wave
  std::optional<double> min_power_w, max_power_w;
};
// "power_transients": fails when the card stopped answering or reported a
// fatal XID under the swings; warns when the power never swung (the load did
// not reach the card, so nothing was tested).
Check JudgeTransients(const TransientObservation& o, const TransientOptions& options);

// One GPU's steady readings under the same load as its peers.
struct PeerReading {
  int gpu_index = 0;
  std::string model;
  std::optional<double> sm_clock_mhz;  // median over the load
  std::optional<double> power_w;
};

struct PeerOptions {
  // A card more than this far below the median of its model is held back
  // (DCGM's peer checks use a similar band; silicon and cooling spread cards
  // of one model by a few percent).
  double tolerance = 0.08;
};

// "peer_clock" and "peer_power" checks for every reading, in input order
// (two per GPU): skipped where fewer than 3 cards of the model ran (no
// median to trust), warn below the median by more than the tolerance.
std::vector<std::pair<int, Check>> PeerChecks(const std::vector<PeerReading>& readings,
                                              const PeerOptions& options = {});

}  // namespace gpuherd::burnin
