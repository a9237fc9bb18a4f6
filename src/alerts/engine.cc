#include "alerts/engine.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu/xid.h"

namespace gpuherd::alerts {
namespace {

// PCIe traffic in packets is estimated at this many bytes per packet: NVML
// gives throughput, not packet counts.
constexpr double kBytesPerPcieTlp = 256.0;
constexpr double kMinuteSeconds = 60.0;

struct Point {
  TimeMs time;
  double value;
};

using Extract = std::optional<double> (*)(const gpu::GpuInfo&, const gpu::GpuSample&);

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

struct GpuSeries {
  const char* name;
  Extract extract;
};

// health_score is not in a reading; it is read from GpuInput::health.
const GpuSeries kGpuSeries[] = {
    {"gpu_util_pct", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.gpu_util_pct; }},
    {"mem_util_pct", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.mem_util_pct; }},
    {"mem_used_pct",
     [](const gpu::GpuInfo& info, const gpu::GpuSample& s) -> std::optional<double> {
       uint64_t total = s.mem_total_bytes.value_or(info.memory_total_bytes);
       if (!s.mem_used_bytes || total == 0) return std::nullopt;
       return 100.0 * static_cast<double>(*s.mem_used_bytes) / static_cast<double>(total);
     }},
    {"temp_c", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.temp_c; }},
    {"temp_over_slowdown_c",
     [](const gpu::GpuInfo& info, const gpu::GpuSample& s) -> std::optional<double> {
       if (!s.temp_c || !info.temp_slowdown_c) return std::nullopt;
       return *s.temp_c - *info.temp_slowdown_c;
     }},
    {"power_w", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.power_w; }},
    {"fan_pct", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.fan_pct; }},
    {"sm_clock_mhz", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.sm_clock_mhz); }},
    {"pcie_replays", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.pcie_replay_count); }},
    {"pcie_packets",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
       if (!s.pcie_tx_kbps && !s.pcie_rx_kbps) return std::nullopt;
       return (s.pcie_tx_kbps.value_or(0) + s.pcie_rx_kbps.value_or(0)) * 1024.0 / kBytesPerPcieTlp;
     }},
    {"ecc_sbe", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.ecc_sbe_volatile); }},
    {"ecc_dbe", [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.ecc_dbe_volatile); }},
    {"retired_pending",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.retired_pages_pending); }},
    {"xids",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
       return static_cast<double>(s.xids.size());
     }},
    {"xids_fatal",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
       return static_cast<double>(std::count_if(s.xids.begin(), s.xids.end(), [](const gpu::XidEvent& x) {
         return gpu::XidIsFatal(x.xid);
       }));
     }},
    {"pcie_downtrained",
     [](const gpu::GpuInfo& info, const gpu::GpuSample& s) -> std::optional<double> {
       if (!s.pcie_width || !info.max_pcie_width) return std::nullopt;
       if (*s.pcie_width < *info.max_pcie_width) return 1.0;
       bool busy = s.gpu_util_pct && *s.gpu_util_pct > 50;
       if (busy && s.pcie_gen && info.max_pcie_gen && *s.pcie_gen < *info.max_pcie_gen) return 1.0;
       return 0.0;
     }},
};

Extract FindExtract(const std::string& series) {
  for (const GpuSeries& s : kGpuSeries) {
    if (series == s.name) return s.extract;
  }
  return nullptr;
}

bool InWindow(TimeMs t, TimeMs now, DurationMs window) { return t <= now && t >= now - window; }

std::vector<Point> GpuPoints(const std::string& series, const GpuInput& gpu, TimeMs now, DurationMs window) {
  std::vector<Point> points;
  if (series == "health_score") {
    for (const HealthPoint& h : gpu.health) {
      if (InWindow(h.time, now, window)) points.push_back({h.time, static_cast<double>(h.score)});
    }
    return points;
  }
  Extract extract = FindExtract(series);
  if (extract == nullptr) return points;
  points.reserve(gpu.recent.size());
  for (const gpu::GpuSample& s : gpu.recent) {
    if (!InWindow(s.time, now, window)) continue;
    std::optional<double> v = extract(*gpu.info, s);
    if (v) points.push_back({s.time, *v});
  }
  return points;
}

std::optional<double> IbValue(const std::string& series, const IbReading& reading) {
  if (series == "ib_packet_loss") {
    auto rcv = reading.counters.find("port_rcv_errors");
    auto discards = reading.counters.find("port_xmit_discards");
    if (rcv == reading.counters.end() && discards == reading.counters.end()) return std::nullopt;
    double sum = 0;
    if (rcv != reading.counters.end()) sum += static_cast<double>(rcv->second);
    if (discards != reading.counters.end()) sum += static_cast<double>(discards->second);
    return sum;
  }
  auto it = reading.counters.find(series.substr(std::strlen("ib_")));
  if (it == reading.counters.end()) return std::nullopt;
  return static_cast<double>(it->second);
}

std::vector<Point> IbPoints(const std::string& series, const IbPortInput& port, TimeMs now, DurationMs window) {
  std::vector<Point> points;
  for (const IbReading& r : port.recent) {
    if (!InWindow(r.time, now, window)) continue;
    std::optional<double> v = IbValue(series, r);
    if (v) points.push_back({r.time, *v});
  }
  return points;
}

// A counter's growth; a drop means it was reset, and the new value is growth.
std::optional<double> Increase(const std::vector<Point>& p) {
  if (p.size() < 2) return std::nullopt;
  double total = 0;
  for (size_t i = 1; i < p.size(); ++i) {
    double d = p[i].value - p[i - 1].value;
    total += d >= 0 ? d : p[i].value;
  }
  return total;
}

std::optional<double> SlopePerMinute(const std::vector<Point>& p) {
  if (p.size() < 2) return std::nullopt;
  double n = static_cast<double>(p.size());
  double mean_t = 0, mean_v = 0;
  for (const Point& x : p) {
    mean_t += static_cast<double>(x.time - p.front().time) / 1000.0;
    mean_v += x.value;
  }
  mean_t /= n;
  mean_v /= n;
  double cov = 0, var = 0;
  for (const Point& x : p) {
    double dt = static_cast<double>(x.time - p.front().time) / 1000.0 - mean_t;
    cov += dt * (x.value - mean_v);
    var += dt * dt;
  }
  if (var <= 0) return std::nullopt;
  return cov / var * kMinuteSeconds;
}

// The integral over time of a per-second rate, by the step rule.
std::optional<double> Integral(const std::vector<Point>& p) {
  if (p.size() < 2) return std::nullopt;
  double total = 0;
  for (size_t i = 1; i < p.size(); ++i) total += p[i].value * static_cast<double>(p[i].time - p[i - 1].time) / 1000.0;
  return total;
}

std::optional<double> Reduce(const Condition& c, const std::vector<Point>& p, const std::vector<Point>& per) {
  switch (c.function) {
    case Function::kValue:
      if (p.empty()) return std::nullopt;
      return p.back().value;
    case Function::kIncrease:
      return Increase(p);
    case Function::kRate: {
      std::optional<double> inc = Increase(p);
      if (!inc || p.back().time <= p.front().time) return std::nullopt;
      return *inc / (static_cast<double>(p.back().time - p.front().time) / 1000.0) * kMinuteSeconds;
    }
    case Function::kSlope:
      return SlopePerMinute(p);
    case Function::kDrop: {
      if (p.empty()) return std::nullopt;
      double highest = p.front().value;
      for (const Point& x : p) highest = std::max(highest, x.value);
      return highest - p.back().value;
    }
    case Function::kSum: {
      if (p.empty()) return std::nullopt;
      double sum = 0;
      for (const Point& x : p) sum += x.value;
      return sum;
    }
    case Function::kRatio: {
      std::optional<double> inc = Increase(p);
      std::optional<double> traffic = Integral(per);
      if (!inc || !traffic || *traffic <= 0) return std::nullopt;
      return *inc / *traffic;
    }
  }
  return std::nullopt;
}

}  // namespace

const char* AlertStateName(AlertState state) {
  switch (state) {
    case AlertState::kInactive: return "inactive";
    case AlertState::kPending: return "pending";
    case AlertState::kFiring: return "firing";
    case AlertState::kResolved: return "resolved";
  }
  return "inactive";
}

std::optional<AlertState> ParseAlertState(const std::string& text) {
  for (AlertState s : {AlertState::kInactive, AlertState::kPending, AlertState::kFiring, AlertState::kResolved}) {
    if (text == AlertStateName(s)) return s;
  }
  return std::nullopt;
}

std::optional<double> EvaluateGpu(const Condition& c, const GpuInput& gpu, TimeMs now) {
  if (gpu.info == nullptr) return std::nullopt;
  if (c.function == Function::kValue) {
    if (c.series == "health_score") {
      if (gpu.health.empty()) return std::nullopt;
      return static_cast<double>(gpu.health.back().score);
    }
    // The newest reading; a lost GPU has none that is current.
    Extract extract = FindExtract(c.series);
    if (gpu.lost || gpu.recent.empty() || extract == nullptr) return std::nullopt;
    return extract(*gpu.info, gpu.recent.back());
  }
  std::vector<Point> per;
  if (c.function == Function::kRatio) per = GpuPoints(c.per, gpu, now, c.window);
  return Reduce(c, GpuPoints(c.series, gpu, now, c.window), per);
}

std::optional<double> EvaluateIbPort(const Condition& c, const IbPortInput& port, TimeMs now) {
  DurationMs window = c.function == Function::kValue ? now : c.window;
  std::vector<Point> per;
  if (c.function == Function::kRatio) per = IbPoints(c.per, port, now, window);
  return Reduce(c, IbPoints(c.series, port, now, window), per);
}

AlertEngine::AlertEngine(std::vector<Rule> rules) : rules_(std::move(rules)) {}

DurationMs AlertEngine::LongestWindow() const {
  DurationMs longest = 0;
  for (const Rule& r : rules_) {
    if (r.condition.series != "health_score") longest = std::max(longest, r.condition.window);
  }
  return longest;
}

std::vector<AlertTransition> AlertEngine::Evaluate(const EvalInput& in, TimeMs now) {
  std::vector<AlertTransition> out;
  std::set<Key> seen;
  // When a job came onto each GPU (first seen running), for rules' settle.
  for (const GpuInput& gpu : in.gpus) {
    if (gpu.info == nullptr) continue;
    if (gpu.job_running) {
      job_since_.emplace(gpu.info->uuid, now);
    } else {
      job_since_.erase(gpu.info->uuid);
    }
  }
  for (const Rule& rule : rules_) {
    if (rule.scope == Scope::kGpu) {
      for (const GpuInput& gpu : in.gpus) {
        if (gpu.info == nullptr) continue;
        std::optional<double> value = EvaluateGpu(rule.condition, gpu, now);
        if (rule.while_job && !gpu.job_running) value.reset();
        if (rule.settle > 0 && gpu.job_running) {
          auto since = job_since_.find(gpu.info->uuid);
          if (since != job_since_.end() && now - since->second < rule.settle) value.reset();
        }
        seen.insert({rule.name, gpu.info->uuid});
        Step(rule, gpu.info->uuid, gpu.info->index, value, now, out);
      }
    } else {
      for (const IbPortInput& port : in.ib_ports) {
        std::string subject = port.device + "/" + port.port;
        seen.insert({rule.name, subject});
        Step(rule, subject, -1, EvaluateIbPort(rule.condition, port, now), now, out);
      }
    }
  }
  // Subjects that left the input: their conditions no longer hold.
  std::vector<std::pair<Key, int>> gone;
  for (const auto& [key, alert] : active_) {
    if (!seen.count(key)) gone.push_back({key, alert.gpu_index});
  }
  for (const auto& [key, gpu_index] : gone) {
    for (const Rule& rule : rules_) {
      if (rule.name == key.first) Step(rule, key.second, gpu_index, std::nullopt, now, out);
    }
  }
  return out;
}

void AlertEngine::Step(const Rule& rule, const std::string& subject, int gpu_index, std::optional<double> value,
                       TimeMs now, std::vector<AlertTransition>& out) {
  bool holds = value && Compare(*value, rule.condition.comparison, rule.condition.threshold);
  Key key{rule.name, subject};
  auto it = active_.find(key);
  if (!holds) {
    if (it == active_.end()) return;
    Alert alert = std::move(it->second);
    active_.erase(it);
    AlertState from = alert.state;
    alert.state = from == AlertState::kFiring ? AlertState::kResolved : AlertState::kInactive;
    if (alert.state == AlertState::kResolved) alert.resolved_at = now;
    out.push_back({from, alert.state, now, std::move(alert)});
    return;
  }
  if (it == active_.end()) {
    Alert alert;
    alert.rule = rule.name;
    alert.subject = subject;
    alert.gpu_index = gpu_index;
    alert.state = AlertState::kPending;
    alert.pending_since = now;
    alert.severity = rule.severity;
    alert.action = rule.action;
    alert.summary = rule.summary;
    it = active_.emplace(key, std::move(alert)).first;
    if (rule.for_duration > 0) {
      it->second.value = *value;
      out.push_back({AlertState::kInactive, AlertState::kPending, now, it->second});
      return;
    }
  }
  Alert& alert = it->second;
  alert.value = *value;
  if (alert.state == AlertState::kPending && now - alert.pending_since >= rule.for_duration) {
    AlertState from = rule.for_duration > 0 ? AlertState::kPending : AlertState::kInactive;
    alert.state = AlertState::kFiring;
    alert.fired_at = now;
    out.push_back({from, AlertState::kFiring, now, alert});
  }
}

std::vector<Alert> AlertEngine::Active() const {
  std::vector<Alert> out;
  out.reserve(active_.size());
  for (const auto& [key, alert] : active_) out.push_back(alert);
  return out;
}

void AlertEngine::Restore(const std::vector<Alert>& active) {
  for (const Alert& a : active) {
    if (a.state != AlertState::kPending && a.state != AlertState::kFiring) continue;
    bool known_rule = std::any_of(rules_.begin(), rules_.end(), [&](const Rule& r) { return r.name == a.rule; });
    if (known_rule) active_[{a.rule, a.subject}] = a;
  }
}

}  // namespace gpuherd::alerts
