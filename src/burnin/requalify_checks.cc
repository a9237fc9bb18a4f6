#include "burnin/requalify_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "gpu/xid.h"

namespace gpuherd::burnin {
namespace {

Check Make(const char* name, CheckOutcome outcome, std::string reason, std::string message) {
  Check c;
  c.name = name;
  c.level = 2;
  c.outcome = outcome;
  c.reason = std::move(reason);
  c.message = std::move(message);
  return c;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

std::vector<LoadPhase> SquareWave(const TransientOptions& options) {
  std::vector<LoadPhase> phases;
  if (options.frequency_hz <= 0 || options.duration <= 0) return phases;
  const double half_ms = 500.0 / options.frequency_hz;
  for (int i = 0;; ++i) {
    const auto start = static_cast<DurationMs>(i * half_ms);
    if (start >= options.duration) break;
    phases.push_back({start, i % 2 == 0});
  }
  return phases;
}

Check JudgeTransients(const TransientObservation& o, const TransientOptions& options) {
  const std::string wave = fmt::format("{:g} Hz full/idle for {}", options.frequency_hz,
                                       FormatDuration(options.duration));
  for (int xid : o.xids) {
    if (gpu::XidIsFatal(xid)) {
      Check c = Make("power_transients", CheckOutcome::kFail, "xid_under_transients",
                     fmt::format("XID {} ({}) under {}: the power stage does not hold load swings", xid,
                                 gpu::XidDescription(xid), wave));
      c.values["xid"] = xid;
      return c;
    }
  }
  if (o.failed_readings > 0) {
    Check c = Make("power_transients", CheckOutcome::kFail, "lost_under_transients",
                   fmt::format("stopped answering under {} ({} readings failed): a weak power supply "
                               "or VRM", wave, o.failed_readings));
    c.values["failed_readings"] = o.failed_readings;
    return c;
  }
  Check c = Make("power_transients", CheckOutcome::kPass, "", wave);
  if (o.min_power_w && o.max_power_w) {
    c.values["min_power_w"] = *o.min_power_w;
    c.values["max_power_w"] = *o.max_power_w;
    if (*o.max_power_w - *o.min_power_w < 0.2 * *o.max_power_w) {
      c.outcome = CheckOutcome::kWarn;
      c.reason = "no_power_swing";
      c.message = fmt::format("the power stayed between {:.0f} and {:.0f} W under {}: the swings did "
                              "not reach the card, so its power stage was not tested",
                              *o.min_power_w, *o.max_power_w, wave);
    }
  }
  return c;
}

std::vector<std::pair<int, Check>> PeerChecks(const std::vector<PeerReading>& readings,
                                              const PeerOptions& options) {
  std::map<std::string, std::vector<double>> clocks, powers;
  for (const PeerReading& r : readings) {
    if (r.sm_clock_mhz) clocks[r.model].push_back(*r.sm_clock_mhz);
    if (r.power_w) powers[r.model].push_back(*r.power_w);
  }
  auto judge = [&](const char* name, const char* what, const char* unit, std::optional<double> value,
                   const std::vector<double>& peers) {
    if (!value || peers.size() < 3) {
      return Make(name, CheckOutcome::kSkipped, "too_few_peers",
                  fmt::format("{} card(s) of this model ran; a median needs 3", peers.size()));
    }
    const double median = Median(peers);
    Check c = Make(name, CheckOutcome::kPass, "", "");
    c.values["value"] = *value;
    c.values["peer_median"] = median;
    c.values["ratio"] = median > 0 ? *value / median : 1;
    if (median > 0 && *value < median * (1 - options.tolerance)) {
      c.outcome = CheckOutcome::kWarn;
      c.reason = std::string("below_peers_") + what;
      c.message = fmt::format("{} {:.0f} {} under load, {:.0f}% below the median {:.0f} {} of its {} "
                              "peers of the same model", what, *value, unit,
                              100 * (1 - *value / median), median, unit, peers.size() - 1);
    }
    return c;
  };
  std::vector<std::pair<int, Check>> out;
  for (const PeerReading& r : readings) {
    out.push_back({r.gpu_index, judge("peer_clock", "clock", "MHz", r.sm_clock_mhz, clocks[r.model])});
    out.push_back({r.gpu_index, judge("peer_power", "power", "W", r.power_w, powers[r.model])});
  }
  return out;
}

}  // namespace gpuherd::burnin
