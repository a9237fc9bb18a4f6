// Anomaly checks on a training job's metric stream: NaN or Inf values, loss
// spikes and stalls. Pure rules: the detector is fed metric lines and the
// time, and returns what it found; the daemon raises the events and alerts
// and carries out the actions.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"

namespace gpuherd::pipeline {

enum class AnomalyKind { kNan, kSpike, kStall };
// What the daemon does to the job besides the event and the alert: nothing,
// SIGUSR1 (write a checkpoint and go on), stop it (SIGTERM, grace, SIGKILL),
// or stop it and start it again from its last checkpoint.
enum class AnomalyAction { kNone, kCheckpoint, kStop, kRestart };

const char* AnomalyKindName(AnomalyKind kind);        // "nan", "spike", "stall"
const char* AnomalyActionName(AnomalyAction action);  // "none", "checkpoint", "stop", "restart"
std::optional<AnomalyAction> ParseAnomalyAction(const std::string& name);

// A metric value that is NaN, +Inf or -Inf. `metrics` empty: every numeric
// field, nested ones included ("eval.loss", "losses[2]").
struct NanRule {
  bool enabled = false;
  AnomalyAction action = AnomalyAction::kStop;
  std::vector<std::string> metrics;
};

// A value above k times the median of the previous `window` values of the
// same metric. Meant for positive quantities such as a loss: values <= 0 are
// neither checked nor remembered, and nothing is checked until `window`
// values are known. `metrics` empty: every field whose name ends in "loss".
struct SpikeRule {
  bool enabled = false;
  double k = 10;
  int window = 20;
  AnomalyAction action = AnomalyAction::kCheckpoint;
  std::vector<std::string> metrics;
};

// No metric line for `after`. The clock starts at the job's first line, so a
// step that writes no metrics (a data preparation, a report) is never stopped
// by this rule; a job that hangs before its first line is bounded by its
// time_limit instead.
struct StallRule {
  bool enabled = false;
  DurationMs after = 15 * kMinuteMs;
  AnomalyAction action = AnomalyAction::kStop;
};

struct AnomalyConfig {
  NanRule nan;
  SpikeRule spike;
  StallRule stall;

  bool any() const { return nan.enabled || spike.enabled || stall.enabled; }
};

struct Anomaly {
  AnomalyKind kind = AnomalyKind::kNan;
  std::string metric;     // the field ("loss", "eval.loss"); empty for a stall
  double value = 0;       // the value seen; for a stall, the seconds without a line
  double threshold = 0;   // k × median for a spike; `after` in seconds for a stall; 0 for NaN
  AnomalyAction action = AnomalyAction::kNone;
  TimeMs at = 0;
  std::string message;    // for people: what was seen and what the rule is
};

// The checks for one job attempt; a restarted attempt gets a new detector.
// Each anomaly fires once per episode: a metric that stays NaN, or stays
// above the spike threshold, fires on its first bad value only and again
// only after a good value of that metric; a stall fires once and is over at
// the next line. Not thread-safe; one owner feeds it.
class AnomalyDetector {
 public:
  explicit AnomalyDetector(AnomalyConfig config);

  // One parsed metric line (see ParseMetricLine) written at time t.
  std::vector<Anomaly> Observe(TimeMs t, const nlohmann::json& line);
  // Whether the stream has gone silent; call it periodically.
  std::vector<Anomaly> Tick(TimeMs now);

  const AnomalyConfig& config() const { return config_; }

 private:
  struct Series {
    std::deque<double> recent;  // the last `window` positive values
    bool spiking = false;
  };

  void Walk(TimeMs t, const std::string& name, const nlohmann::json& value,
            const std::string& where, std::vector<Anomaly>* out);
  void CheckValue(TimeMs t, const std::string& name, double value, const std::string& where,
                  std::vector<Anomaly>* out);

  AnomalyConfig config_;
  std::map<std::string, Series> series_;
  std::map<std::string, bool> non_finite_;  // metric → in a NaN episode
  std::optional<TimeMs> last_line_;
  bool stalled_ = false;
};

}  // namespace gpuherd::pipeline
