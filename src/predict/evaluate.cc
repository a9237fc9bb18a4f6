#include "predict/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "alerts/engine.h"

namespace gpuherd::predict {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// When the window that ends with `minute` is complete and can be scored.
TimeMs ReadyAt(TimeMs minute) { return minute + kMinuteMs; }

// A minute rollup as one reading, for the alert rules: gauges at their mean
// (temperature at its highest, as a rule on it would see within the minute),
// counters as they stood, one XID entry per XID counted.
gpu::GpuSample ToSample(const store::RollupRecord& r) {
  using store::RollupMetric;
  gpu::GpuSample s;
  s.time = ReadyAt(r.minute) - 1;
  auto mean = [&](RollupMetric m) -> std::optional<double> {
    if (!r.stat(m)) return std::nullopt;
    return r.stat(m)->mean;
  };
  s.gpu_util_pct = mean(RollupMetric::kGpuUtil);
  if (r.stat(RollupMetric::kTempC)) s.temp_c = r.stat(RollupMetric::kTempC)->max;
  s.power_w = mean(RollupMetric::kPowerW);
  s.fan_pct = mean(RollupMetric::kFanPct);
  if (auto c = mean(RollupMetric::kSmClockMhz)) s.sm_clock_mhz = static_cast<int>(*c);
  s.pcie_tx_kbps = mean(RollupMetric::kPcieTxKbps);
  s.pcie_rx_kbps = mean(RollupMetric::kPcieRxKbps);
  s.pcie_replay_count = r.pcie_replay_count;
  s.ecc_sbe_volatile = r.ecc_sbe;
  s.ecc_dbe_volatile = r.ecc_dbe;
  s.throttle_reasons = r.throttle_reasons_seen;
  for (int i = 0; i < r.xid_count; ++i) s.xids.push_back({s.time, 0, ""});
  return s;
}

}  // namespace

bool FaultWithin(const Series& s, TimeMs minute, DurationMs horizon) {
  if (!s.fault_time) return false;
  const TimeMs ready = ReadyAt(minute);
  return *s.fault_time > ready - kMinuteMs && *s.fault_time <= ready + horizon;
}

Dataset BuildDataset(const History& history, const FeatureOptions& features, DurationMs horizon,
                     int stride) {
  Dataset data;
  stride = std::max(1, stride);
  for (const Series& s : history.series) {
    const CardFacts facts{s.slowdown_c};
    // Every minute within the horizon of a fault, every `stride`-th elsewhere:
    // faults are rare, and their windows are what the model must learn.
    for (size_t i = 0; i < s.minutes.size(); ++i) {
      const bool label = FaultWithin(s, s.minutes[i].minute, horizon);
      if (!label && i % stride != 0) continue;
      auto row = ExtractFeatures(s.minutes, i, facts, features);
      if (row) data.Add(*row, label);
    }
  }
  return data;
}

Result<SeriesScores> ScoreHistory(const RiskModel& model, const History& history,
                                  const FeatureOptions& features) {
  SeriesScores out;
  out.reserve(history.series.size());
  std::vector<float> x;
  std::vector<size_t> at;
  for (const Series& s : history.series) {
    const CardFacts facts{s.slowdown_c};
    x.clear();
    at.clear();
    for (size_t i = 0; i < s.minutes.size(); ++i) {
      if (auto row = ExtractFeatures(s.minutes, i, facts, features)) {
        x.insert(x.end(), row->begin(), row->end());
        at.push_back(i);
      }
    }
    std::vector<float> scores(s.minutes.size(), kNan);
    auto risk = model.Predict(x);
    if (!risk.ok()) return risk.status();
    for (size_t k = 0; k < at.size(); ++k) scores[at[k]] = (*risk)[k];
    out.push_back(std::move(scores));
  }
  return out;
}

std::vector<alerts::Rule> HardwareRules(const std::vector<alerts::Rule>& rules) {
  static const std::set<std::string> kNotHardware = {"gpu_util_pct", "mem_util_pct",
                                                     "mem_used_pct", "health_score"};
  std::vector<alerts::Rule> out;
  for (const alerts::Rule& r : rules) {
    if (r.scope != alerts::Scope::kGpu || r.while_job || r.action == alerts::Action::kNone ||
        kNotHardware.count(r.condition.series) || kNotHardware.count(r.condition.per)) {
      continue;
    }
    out.push_back(r);
  }
  return out;
}

SeriesScores BaselineScores(const History& history, const std::vector<alerts::Rule>& rules) {
  SeriesScores out;
  for (const Series& s : history.series) {
    alerts::AlertEngine engine(rules);
    const DurationMs keep = std::max<DurationMs>(engine.LongestWindow(), kMinuteMs) + 2 * kMinuteMs;
    gpu::GpuInfo info;
    info.uuid = s.uuid;
    info.temp_slowdown_c = s.slowdown_c;
    alerts::EvalInput in;
    in.gpus.push_back({&info, {}, false, true, {}});
    std::vector<gpu::GpuSample>& recent = in.gpus[0].recent;
    std::vector<float> firing(s.minutes.size(), 0);
    for (size_t i = 0; i < s.minutes.size(); ++i) {
      const store::RollupRecord& r = s.minutes[i];
      const TimeMs now = ReadyAt(r.minute);
      in.gpus[0].lost = r.samples == 0;
      if (r.samples > 0) recent.push_back(ToSample(r));
      while (!recent.empty() && recent.front().time < now - keep) recent.erase(recent.begin());
      engine.Evaluate(in, now);
      int n = 0;
      for (const alerts::Alert& a : engine.Active()) n += a.state == alerts::AlertState::kFiring;
      firing[i] = static_cast<float>(n);
    }
    out.push_back(std::move(firing));
  }
  return out;
}

double RocAuc(const std::vector<float>& scores, const std::vector<uint8_t>& labels) {
  std::vector<std::pair<float, uint8_t>> v;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!std::isnan(scores[i])) v.emplace_back(scores[i], labels[i]);
  }
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  double pos = 0, neg = 0, rank_sum = 0;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j < v.size() && v[j].first == v[i].first) ++j;
    const double mid_rank = (static_cast<double>(i) + static_cast<double>(j - 1)) / 2 + 1;
    for (size_t k = i; k < j; ++k) {
      if (v[k].second) rank_sum += mid_rank, ++pos;
      else ++neg;
    }
    i = j;
  }
  if (pos == 0 || neg == 0) return std::numeric_limits<double>::quiet_NaN();
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

EventMetrics ScoreEvents(const History& history, const SeriesScores& scores, double threshold,
                         const EventOptions& options) {
  EventMetrics m;
  m.threshold = threshold;
  std::vector<double> leads;
  std::vector<float> all_scores;
  std::vector<uint8_t> all_labels;
  for (size_t k = 0; k < history.series.size(); ++k) {
    const Series& s = history.series[k];
    const std::vector<float>& sc = scores[k];
    if (s.fault_time) ++m.faults;
    // Episodes as [first alarm, last alarm] times.
    std::vector<std::pair<TimeMs, TimeMs>> episodes;
    for (size_t i = 0; i < s.minutes.size(); ++i) {
      const bool labelled = FaultWithin(s, s.minutes[i].minute, options.horizon);
      all_scores.push_back(sc[i]);
      all_labels.push_back(labelled);
      const TimeMs t = ReadyAt(s.minutes[i].minute);
      const bool open = !episodes.empty() && t - episodes.back().second <= options.merge_gap;
      // An open episode holds while the risk stays above the release level.
      const double level = open ? threshold * options.release_factor : threshold;
      if (std::isnan(sc[i]) || sc[i] < level) continue;
      if (open) {
        episodes.back().second = t;
      } else {
        episodes.push_back({t, t});
      }
    }
    std::optional<double> lead;
    for (const auto& [first, last] : episodes) {
      ++m.episodes;
      if (s.fault_time && *s.fault_time >= first && *s.fault_time <= last + options.horizon) {
        ++m.true_episodes;
        if (!lead) lead = static_cast<double>(*s.fault_time - first) / kMinuteMs;
      }
    }
    if (lead) {
      ++m.detected;
      leads.push_back(*lead);
    }
  }
  m.precision = m.episodes ? static_cast<double>(m.true_episodes) / m.episodes : 0;
  m.recall = m.faults ? static_cast<double>(m.detected) / m.faults : 0;
  m.f1 = m.precision + m.recall > 0 ? 2 * m.precision * m.recall / (m.precision + m.recall) : 0;
  if (!leads.empty()) {
    m.mean_lead_min = std::accumulate(leads.begin(), leads.end(), 0.0) / leads.size();
    std::sort(leads.begin(), leads.end());
    m.median_lead_min = leads[leads.size() / 2];
  }
  m.roc_auc = RocAuc(all_scores, all_labels);
  return m;
}

double ChooseThreshold(const History& history, const SeriesScores& scores, double min_precision,
                       const EventOptions& options) {
  double best = 0.5, best_recall = -1, best_f1 = -1, f1_threshold = 0.5;
  for (int i = 1; i < 40; ++i) {
    const double t = i * 0.025;
    const EventMetrics m = ScoreEvents(history, scores, t, options);
    if (m.precision >= min_precision && m.recall > best_recall) best_recall = m.recall, best = t;
    if (m.f1 > best_f1) best_f1 = m.f1, f1_threshold = t;
  }
  return best_recall >= 0 ? best : f1_threshold;
}

}  // namespace gpuherd::predict
