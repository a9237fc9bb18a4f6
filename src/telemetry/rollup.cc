#include "telemetry/rollup.h"

#include <algorithm>
#include <utility>

namespace gpuherd::telemetry {
namespace {

using store::RollupMetric;

constexpr double kBytesPerMib = 1024.0 * 1024.0;

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

}  // namespace

std::optional<store::RollupRecord> Rollup::Advance(TimeMs time) {
  TimeMs minute = FloorTo(time, kMinuteMs);
  std::optional<store::RollupRecord> closed;
  if (open_ && minute > open_->minute) closed = Flush();
  if (!open_) {
    open_.emplace();
    open_->uuid = uuid_;
    open_->minute = minute;
  }
  return closed;
}

void Rollup::Accumulate(RollupMetric metric, std::optional<double> value) {
  if (!value) return;
  Accumulator& a = acc_[static_cast<int>(metric)];
  if (a.count == 0) {
    a.min = a.max = *value;
  } else {
    a.min = std::min(a.min, *value);
    a.max = std::max(a.max, *value);
  }
  a.sum += *value;
  ++a.count;
}

std::optional<store::RollupRecord> Rollup::AddSample(const gpu::GpuSample& s) {
  std::optional<store::RollupRecord> closed = Advance(s.time);
  store::RollupRecord& r = *open_;
  ++r.samples;
  Accumulate(RollupMetric::kGpuUtil, s.gpu_util_pct);
  Accumulate(RollupMetric::kMemUtil, s.mem_util_pct);
  if (s.mem_used_bytes) {
    Accumulate(RollupMetric::kMemUsedMib, static_cast<double>(*s.mem_used_bytes) / kBytesPerMib);
  }
  Accumulate(RollupMetric::kTempC, s.temp_c);
  Accumulate(RollupMetric::kPowerW, s.power_w);
  Accumulate(RollupMetric::kSmClockMhz, AsDouble(s.sm_clock_mhz));
  Accumulate(RollupMetric::kMemClockMhz, AsDouble(s.mem_clock_mhz));
  Accumulate(RollupMetric::kFanPct, s.fan_pct);
  Accumulate(RollupMetric::kPcieTxKbps, s.pcie_tx_kbps);
  Accumulate(RollupMetric::kPcieRxKbps, s.pcie_rx_kbps);
  // Counters keep the latest value the GPU reported within the minute.
  if (s.pcie_replay_count) r.pcie_replay_count = s.pcie_replay_count;
  if (s.ecc_sbe_volatile) r.ecc_sbe = s.ecc_sbe_volatile;
  if (s.ecc_dbe_volatile) r.ecc_dbe = s.ecc_dbe_volatile;
  if (s.throttle_reasons) r.throttle_reasons_seen |= *s.throttle_reasons;
  r.xid_count += static_cast<int>(s.xids.size());
  return closed;
}

std::optional<store::RollupRecord> Rollup::AddFailure(TimeMs time) {
  std::optional<store::RollupRecord> closed = Advance(time);
  ++open_->failures;
  return closed;
}

std::optional<store::RollupRecord> Rollup::Flush() {
  if (!open_) return std::nullopt;
  store::RollupRecord out = std::move(*open_);
  open_.reset();
  for (int m = 0; m < store::kRollupMetricCount; ++m) {
    const Accumulator& a = acc_[m];
    if (a.count > 0) out.stats[m] = store::RollupStat{a.min, a.sum / a.count, a.max};
  }
  acc_.fill(Accumulator{});
  return out;
}

}  // namespace gpuherd::telemetry
