// Training and held-out evaluation as `gpuherd predict train|eval` and the
// benchmark run them: histories generated from seeds (plus, for training, the
// stored telemetry history with its fault events), the model, the alarm
// threshold chosen on a validation history from other seeds, and the
// comparison with the threshold alert rules.
#pragma once

#include <string>

#include "core/status.h"
#include "predict/evaluate.h"
#include "predict/history.h"
#include "predict/model.h"
#include "store/store.h"

namespace gpuherd::predict {

// The stored history: each GPU's minute rollups, split into series at its
// fault events (gpu.lost, fatal XIDs, critical ECC and thermal events, as the
// job service counts them).
Result<History> LoadStoredHistory(store::Store& db);

struct TrainOptions {
  HistoryOptions generated;            // the generated part (gpus = 0: none)
  std::string db_path;                 // stored history; empty: none
  TrainParams params;
  FeatureOptions features;
  DurationMs horizon = 60 * kMinuteMs;
  int stride = 5;                      // a training row every `stride` minutes
  double min_precision = 0.9;          // the threshold is chosen to reach it
};

struct TrainReport {
  size_t rows = 0, positives = 0;
  int generated_series = 0, generated_faults = 0;
  int stored_series = 0, stored_faults = 0;
  uint64_t validation_seed = 0;
  EventMetrics validation;             // at the chosen threshold
  double generate_s = 0, train_s = 0, validate_s = 0;
};

Result<RiskModel> TrainModel(const TrainOptions& options, TrainReport* report);

// The seed of the validation history for a training seed: different from it
// and from the evaluation seeds people pick (1000 apart).
uint64_t ValidationSeed(uint64_t training_seed);

struct EvalReport {
  HistoryOptions history;
  int faults = 0, false_alarm_signs = 0, sudden_faults = 0;
  EventMetrics model, baseline;
  double seconds = 0;
};

// Scores `model` and the hardware alert rules on a history generated from
// `history` (held-out: give it seeds the model was not trained on).
Result<EvalReport> EvaluateModel(const RiskModel& model, const HistoryOptions& history,
                                 const FeatureOptions& features = {});

}  // namespace gpuherd::predict
