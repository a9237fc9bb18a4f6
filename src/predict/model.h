// The failure-risk model: gradient-boosted trees (XGBoost's C API) over the
// window features, giving the probability of a hardware fault within the
// horizon. Saved in the state directory as one JSON file with a version
// header (format, features, window, horizon, alarm threshold) around the
// XGBoost model, so that a file from another gpuherd is refused with a
// reason instead of being scored wrongly.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/state_dir.h"
#include "core/status.h"
#include "core/time.h"
#include "predict/features.h"

namespace gpuherd::predict {

// Bumped whenever the features (their list or what they measure) or the file
// layout change. 2: power and clock swings only over minutes loaded throughout.
constexpr int kModelFormatVersion = 2;

// <home>/predict/risk-model.json
std::string ModelPath(const StateDir& home);

// Rows of features (row-major, kFeatureCount per row) with 0/1 labels.
struct Dataset {
  std::vector<float> x;
  std::vector<float> y;
  size_t rows() const { return y.size(); }
  void Add(const FeatureRow& row, bool label) {
    x.insert(x.end(), row.begin(), row.end());
    y.push_back(label ? 1.0f : 0.0f);
  }
};

struct TrainParams {
  int rounds = 200;
  int max_depth = 5;
  double eta = 0.1;
  int threads = 2;
  uint64_t seed = 1;
};

// What the header of a model file says.
struct ModelInfo {
  int version = kModelFormatVersion;
  DurationMs window = 60 * kMinuteMs;
  DurationMs horizon = 60 * kMinuteMs;
  double threshold = 0.5;     // risk at or above which an alarm is raised
  std::string trained_on;     // for people: which histories
  TimeMs trained_at = 0;
  size_t rows = 0, positives = 0;
};

class RiskModel {
 public:
  RiskModel(RiskModel&&) noexcept;
  RiskModel& operator=(RiskModel&&) noexcept;
  ~RiskModel();

  static Result<RiskModel> Train(const Dataset& data, const TrainParams& params, ModelInfo info);
  // Reads a model file; refuses other formats, versions and feature lists.
  static Result<RiskModel> Load(const std::string& path);
  // Writes atomically (temp file, fsync, rename), creating the directory.
  Status Save(const std::string& path) const;

  // Risk (0..1) for each row of `x` (kFeatureCount floats per row).
  Result<std::vector<float>> Predict(std::span<const float> x) const;
  Result<float> Score(const FeatureRow& row) const;

  const ModelInfo& info() const { return info_; }
  ModelInfo& mutable_info() { return info_; }

 private:
  RiskModel(void* booster, ModelInfo info) : booster_(booster), info_(std::move(info)) {}
  void* booster_ = nullptr;  // BoosterHandle
  ModelInfo info_;
};

}  // namespace gpuherd::predict
