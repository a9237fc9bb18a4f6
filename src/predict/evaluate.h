// Judging failure prediction on histories whose faults are known: builds the
// labelled rows a model trains on, scores every minute, and counts alarm
// episodes against faults, side by side with the plain threshold alert rules
// (src/alerts, the defaults) on the same series.
//
// The event metric: an alarm is a minute whose risk is at or above the
// threshold (at or above threshold x release_factor while an episode is
// open); alarms no more than `merge_gap` apart form one episode. An episode
// is true when its GPU's fault comes after its first alarm and no later than
// `horizon` after its last; otherwise it is a false alarm. Precision = true
// episodes / episodes; recall = faults with a true episode / faults; lead time
// = fault - the first alarm of the first true episode. ROC-AUC is over
// minutes, the label being "a fault within the horizon".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "alerts/rules.h"
#include "core/status.h"
#include "predict/features.h"
#include "predict/history.h"
#include "predict/model.h"

namespace gpuherd::predict {

// Whether the window ending with `minute` (its start) lies within `horizon`
// before the series' fault: the window is complete one minute later.
bool FaultWithin(const Series& s, TimeMs minute, DurationMs horizon);

// Rows of every minute within the horizon of a fault and of every
// `stride`-th minute elsewhere, labelled FaultWithin.
Dataset BuildDataset(const History& history, const FeatureOptions& features, DurationMs horizon,
                     int stride);

// Risk per series per minute; NaN where the window is too short for features.
using SeriesScores = std::vector<std::vector<float>>;
Result<SeriesScores> ScoreHistory(const RiskModel& model, const History& history,
                                  const FeatureOptions& features);

// The default alert rules that watch hardware (not utilisation, memory use or
// burn-in scores), evaluated minute by minute: the number firing, per series
// per minute.
SeriesScores BaselineScores(const History& history, const std::vector<alerts::Rule>& rules);
std::vector<alerts::Rule> HardwareRules(const std::vector<alerts::Rule>& rules);

struct EventMetrics {
  int faults = 0;             // faults in the histories
  int detected = 0;           // faults with a true episode
  int episodes = 0;           // alarm episodes
  int true_episodes = 0;
  double precision = 0, recall = 0, f1 = 0;
  double mean_lead_min = 0;   // over detected faults
  double median_lead_min = 0;
  double roc_auc = 0;
  double threshold = 0;
};

struct EventOptions {
  DurationMs horizon = 60 * kMinuteMs;
  DurationMs merge_gap = 10 * kMinuteMs;
  // Once an episode is open it holds while the risk stays at or above
  // threshold x release_factor, as the daemon's risk alert resolves only
  // below that; 1 turns this off.
  double release_factor = 0.5;
};

// Counts episodes of `scores >= threshold` against the faults.
EventMetrics ScoreEvents(const History& history, const SeriesScores& scores, double threshold,
                         const EventOptions& options = {});

// ROC-AUC of scores against labels (ties count half); NaN scores are left out.
double RocAuc(const std::vector<float>& scores, const std::vector<uint8_t>& labels);

// The threshold with the best recall among those reaching `min_precision`
// (the best F1 when none does), from a grid over (0, 1).
double ChooseThreshold(const History& history, const SeriesScores& scores, double min_precision,
                       const EventOptions& options = {});

}  // namespace gpuherd::predict
