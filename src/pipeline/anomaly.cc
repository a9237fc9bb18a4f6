#include "pipeline/anomaly.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gpuherd::pipeline {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool Listed(const std::vector<std::string>& metrics, const std::string& name) {
  return std::find(metrics.begin(), metrics.end(), name) != metrics.end();
}

double Median(std::vector<double> values) {
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

std::string NonFiniteName(double value) {
  if (std::isnan(value)) return "NaN";
  return value > 0 ? "+Inf" : "-Inf";
}

}  // namespace

const char* AnomalyKindName(AnomalyKind kind) {
  switch (kind) {
    case AnomalyKind::kNan: return "nan";
    case AnomalyKind::kSpike: return "spike";
    case AnomalyKind::kStall: return "stall";
  }
  return "unknown";
}

const char* AnomalyActionName(AnomalyAction action) {
  switch (action) {
    case AnomalyAction::kNone: return "none";
    case AnomalyAction::kCheckpoint: return "checkpoint";
    case AnomalyAction::kStop: return "stop";
    case AnomalyAction::kRestart: return "restart";
  }
  return "unknown";
}

std::optional<AnomalyAction> ParseAnomalyAction(const std::string& name) {
  for (AnomalyAction a : {AnomalyAction::kNone, AnomalyAction::kCheckpoint, AnomalyAction::kStop,
                          AnomalyAction::kRestart}) {
    if (name == AnomalyActionName(a)) return a;
  }
  return std::nullopt;
}

AnomalyDetector::AnomalyDetector(AnomalyConfig config) : config_(std::move(config)) {}

std::vector<Anomaly> AnomalyDetector::Observe(TimeMs t, const nlohmann::json& line) {
  last_line_ = t;
  stalled_ = false;
  std::vector<Anomaly> out;
  if (!line.is_object()) return out;
  // "at step 120" makes a message findable in the job's own log.
  std::string where;
  auto step = line.find("step");
  if (step != line.end() && step->is_number_integer()) {
    where = fmt::format(" at step {}", step->get<int64_t>());
  }
  for (const auto& [key, value] : line.items()) Walk(t, key, value, where, &out);
  return out;
}

void AnomalyDetector::Walk(TimeMs t, const std::string& name, const nlohmann::json& value,
                           const std::string& where, std::vector<Anomaly>* out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) Walk(t, name + "." + key, child, where, out);
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      Walk(t, fmt::format("{}[{}]", name, i), value[i], where, out);
    }
  } else if (value.is_number()) {
    CheckValue(t, name, value.get<double>(), where, out);
  }
}

void AnomalyDetector::CheckValue(TimeMs t, const std::string& name, double value,
                                 const std::string& where, std::vector<Anomaly>* out) {
  const NanRule& nan = config_.nan;
  if (nan.enabled && (nan.metrics.empty() || Listed(nan.metrics, name))) {
    bool& in_episode = non_finite_[name];
    if (!std::isfinite(value) && !in_episode) {
      out->push_back({AnomalyKind::kNan, name, value, 0, nan.action, t,
                      fmt::format("metric '{}' is {}{}", name, NonFiniteName(value), where)});
    }
    in_episode = !std::isfinite(value);
  }

  const SpikeRule& spike = config_.spike;
  const bool watched = spike.metrics.empty() ? EndsWith(name, "loss") : Listed(spike.metrics, name);
  if (!spike.enabled || !watched || !std::isfinite(value) || value <= 0) return;
  Series& series = series_[name];
  if (static_cast<int>(series.recent.size()) >= spike.window) {
    const double median = Median({series.recent.begin(), series.recent.end()});
    const double threshold = spike.k * median;
    const bool above = value > threshold;
    if (above && !series.spiking) {
      out->push_back({AnomalyKind::kSpike, name, value, threshold, spike.action, t,
                      fmt::format("metric '{}' = {:g}{} is more than {:g} × the median {:g} of its "
                                  "last {} values (threshold {:g})",
                                  name, value, where, spike.k, median, spike.window, threshold)});
    }
    series.spiking = above;
  }
  // Spiking values are remembered too, so a lasting change of level becomes
  // the new normal instead of one endless episode.
  series.recent.push_back(value);
  while (static_cast<int>(series.recent.size()) > spike.window) series.recent.pop_front();
}

std::vector<Anomaly> AnomalyDetector::Tick(TimeMs now) {
  std::vector<Anomaly> out;
  const StallRule& stall = config_.stall;
  if (!stall.enabled || !last_line_ || stalled_) return out;
  const DurationMs silent = now - *last_line_;
  if (silent < stall.after) return out;
  stalled_ = true;
  out.push_back({AnomalyKind::kStall, "", silent / 1000.0, stall.after / 1000.0, stall.action, now,
                 fmt::format("no metric line for {} (the stall limit is {})",
                             FormatDuration(silent), FormatDuration(stall.after))});
  return out;
}

}  // namespace gpuherd::pipeline
