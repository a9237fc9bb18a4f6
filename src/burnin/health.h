// The health score: pure functions from a finished run (and the rates the
// same model reached before) to a 0-100 score and a verdict. The factors and
// their weights are documented in the docs/gpu-health.md ("Health score").
#pragma once

#include <optional>
#include <span>
#include <string>

#include "burnin/result.h"

namespace gpuherd::burnin {

inline constexpr int kHealthyMin = 80;    // healthy >= 80
inline constexpr int kDegradedMin = 60;   // degraded 60-79, unhealthy < 60

// What a model should reach: the median of earlier passed runs of the same
// model in this fleet, and the catalogue's nominal figures.
struct ModelReference {
  std::optional<double> fleet_fp32_tflops, fleet_mem_bandwidth_gbs;
  int fleet_runs = 0;
  std::optional<double> nominal_fp32_tflops, nominal_mem_bandwidth_gbs;
};

// Median over `history` of finished (passed or faults-found, not
// disqualified) runs whose gpu_name is `model`; nominal figures from the
// catalogue of known models where `model` is in it.
ModelReference ReferenceFromHistory(const std::string& model, std::span<const BurnInRun> history);

// Scores a run. Could-not-run and aborted runs get Verdict::kUnknown.
Health ScoreRun(const BurnInRun& run, const ModelReference& reference);

Verdict VerdictForScore(int score);

}  // namespace gpuherd::burnin
