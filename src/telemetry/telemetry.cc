#include "telemetry/telemetry.h"

#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpu/xid.h"

namespace gpuherd::telemetry {
namespace {

using nlohmann::json;
using store::Severity;

store::EventRecord MakeEvent(const gpu::GpuInfo& info, TimeMs time, const char* kind,
                             Severity severity, std::string message, json data) {
  store::EventRecord e;
  e.time = time;
  e.kind = kind;
  e.severity = severity;
  e.gpu_uuid = info.uuid;
  e.message = fmt::format("GPU {}: {}", info.index, message);
  data["index"] = info.index;
  e.data_json = data.dump();
  return e;
}

// "gen3 x8": the parts of a PCIe link that are known.
std::string LinkText(std::optional<int> gen, std::optional<int> width, bool show_gen,
                     bool show_width) {
  std::string out;
  if (show_gen && gen) out += fmt::format("gen{}", *gen);
  if (show_width && width) out += fmt::format("{}x{}", out.empty() ? "" : " ", *width);
  return out;
}

// "an x16", "a gen4 x16".
std::string WithArticle(const std::string& noun) {
  return (noun.starts_with('x') ? "an " : "a ") + noun;
}

}  // namespace

const char* GpuStateName(GpuState state) {
  switch (state) {
    case GpuState::kOk: return "ok";
    case GpuState::kLost: return "lost";
  }
  return "ok";
}

Telemetry::Telemetry(TelemetryOptions options) : options_(options) {}

void Telemetry::SetFleet(const gpu::Fleet& fleet) {
  std::map<std::string, Gpu> kept;
  uuid_by_index_.clear();
  for (const gpu::GpuInfo& info : fleet.gpus) {
    uuid_by_index_[info.index] = info.uuid;
    auto it = gpus_.find(info.uuid);
    if (it != gpus_.end()) {
      it->second.info = info;
      kept.emplace(info.uuid, std::move(it->second));
      gpus_.erase(it);
    } else {
      kept.emplace(info.uuid, Gpu(info, options_.ring_capacity));
    }
  }
  for (auto& [uuid, gone] : gpus_) {
    if (auto closed = gone.rollup.Flush()) orphaned_rollups_.push_back(std::move(*closed));
  }
  gpus_ = std::move(kept);
}

const Telemetry::Gpu* Telemetry::Find(int index) const {
  auto it = uuid_by_index_.find(index);
  if (it == uuid_by_index_.end()) return nullptr;
  auto g = gpus_.find(it->second);
  return g == gpus_.end() ? nullptr : &g->second;
}

Telemetry::Gpu* Telemetry::Find(int index) {
  return const_cast<Gpu*>(std::as_const(*this).Find(index));
}

IngestResult Telemetry::Ingest(const SampleRound& round) {
  IngestResult out;
  out.rollups = std::move(orphaned_rollups_);
  orphaned_rollups_.clear();
  for (const GpuReading& reading : round.readings) {
    Gpu* g = Find(reading.index);
    if (g == nullptr) continue;
    if (reading.sample.ok()) {
      gpu::GpuSample sample = reading.sample.value();
      if (sample.time == 0) sample.time = round.time;
      TakeSample(*g, std::move(sample), out);
    } else {
      TakeFailure(*g, round.time, reading.sample.status(), out);
    }
  }
  return out;
}

void Telemetry::TakeFailure(Gpu& g, TimeMs time, const Status& error, IngestResult& out) {
  if (auto closed = g.rollup.AddFailure(time)) out.rollups.push_back(std::move(*closed));
  if (g.state == GpuState::kLost) return;
  g.state = GpuState::kLost;
  g.lost_reason = error.ToString();
  g.lost_since = time;
  out.events.push_back(MakeEvent(
      g.info, time, kEventGpuLost, Severity::kCritical,
      fmt::format("stopped answering ({}): {}", g.info.pci_bus_id, g.lost_reason),
      {{"error", g.lost_reason}, {"pci_bus_id", g.info.pci_bus_id}}));
}

void Telemetry::TakeSample(Gpu& g, gpu::GpuSample s, IngestResult& out) {
  if (g.state == GpuState::kLost) {
    g.state = GpuState::kOk;
    g.lost_reason.clear();
    out.events.push_back(MakeEvent(
        g.info, s.time, kEventGpuFound, Severity::kInfo,
        fmt::format("answers again after {}", FormatDuration(s.time - g.lost_since)),
        {{"lost_ms", s.time - g.lost_since}}));
  }
  for (const gpu::XidEvent& x : s.xids) {
    bool fatal = gpu::XidIsFatal(x.xid);
    std::string description = x.description.empty() ? gpu::XidDescription(x.xid) : x.description;
    out.events.push_back(MakeEvent(
        g.info, x.time != 0 ? x.time : s.time, kEventGpuXid,
        fatal ? Severity::kCritical : Severity::kWarning,
        fmt::format("XID {}: {}", x.xid, description),
        {{"xid", x.xid}, {"fatal", fatal}, {"description", description}}));
  }
  CheckCounters(g, s, out);
  CheckPcie(g, s, out);
  CheckThermal(g, s, out);
  CheckFan(g, s, out);
  CheckRetirement(g, s, out);
  if (auto closed = g.rollup.AddSample(s)) out.rollups.push_back(std::move(*closed));
  g.ring.Push(std::move(s));
}

void Telemetry::CheckCounters(Gpu& g, const gpu::GpuSample& s, IngestResult& out) {
  // A double-bit error is reported on every rise: each one may have corrupted
  // a job's data.
  if (s.ecc_dbe_volatile) {
    uint64_t now_count = *s.ecc_dbe_volatile;
    if (g.ecc_dbe && now_count > *g.ecc_dbe) {
      out.events.push_back(MakeEvent(
          g.info, s.time, kEventGpuEcc, Severity::kCritical,
          fmt::format("{} new uncorrectable (double-bit) ECC error(s), {} since the driver loaded",
                      now_count - *g.ecc_dbe, now_count),
          {{"type", "dbe"}, {"new", now_count - *g.ecc_dbe}, {"count", now_count}}));
    }
    g.ecc_dbe = now_count;
  }

  // Correctable errors and PCIe replays come in bursts, so they are reported at
  // most once per kCounterEventInterval. The baseline moves only when an event
  // is raised (or the counter resets with the driver), so the next event counts
  // every rise that was held back.
  auto rate_limited = [&](const std::optional<uint64_t>& reading, std::optional<uint64_t>& base,
                          std::optional<TimeMs>& last_event, const char* kind,
                          const std::string& what, const char* type) {
    if (!reading) return;
    if (!base || *reading < *base) {
      base = reading;
      return;
    }
    if (*reading == *base) return;
    if (last_event && s.time - *last_event < kCounterEventInterval) return;
    uint64_t rise = *reading - *base;
    json data = {{"new", rise}, {"count", *reading}};
    if (type != nullptr) data["type"] = type;
    out.events.push_back(MakeEvent(g.info, s.time, kind, Severity::kWarning,
                                   fmt::format("{} new {}, {} in all", rise, what, *reading),
                                   std::move(data)));
    base = reading;
    last_event = s.time;
  };
  rate_limited(s.ecc_sbe_volatile, g.ecc_sbe, g.last_sbe_event, kEventGpuEcc,
               "correctable (single-bit) ECC error(s)", "sbe");
  rate_limited(s.pcie_replay_count, g.pcie_replay, g.last_replay_event, kEventGpuPcieReplay,
               "PCIe replay(s), a sign of a poor link", nullptr);
}

void Telemetry::CheckPcie(Gpu& g, const gpu::GpuSample& s, IngestResult& out) {
  const gpu::GpuInfo& info = g.info;
  bool was_low = g.pcie_width_low || g.pcie_gen_low;
  if (info.max_pcie_width && s.pcie_width) g.pcie_width_low = *s.pcie_width < *info.max_pcie_width;
  // Idle GPUs lower their PCIe generation to save power and train back up
  // under load, so a lower gen at idle is normal and an idle reading neither
  // raises nor clears it. A narrower link is never power management: a lane
  // is lost (a bad riser or slot), so width counts at any load. A GPU that does
  // not report its utilisation is treated as idle.
  bool idle = !s.gpu_util_pct || *s.gpu_util_pct < kIdleUtilPct;
  if (info.max_pcie_gen && s.pcie_gen && !idle) g.pcie_gen_low = *s.pcie_gen < *info.max_pcie_gen;
  bool low = g.pcie_width_low || g.pcie_gen_low;
  if (low == was_low) return;

  json data = {{"degraded", low}};
  if (s.pcie_gen) data["gen"] = *s.pcie_gen;
  if (s.pcie_width) data["width"] = *s.pcie_width;
  if (info.max_pcie_gen) data["max_gen"] = *info.max_pcie_gen;
  if (info.max_pcie_width) data["max_width"] = *info.max_pcie_width;
  if (low) {
    std::string message =
        fmt::format("PCIe link {} on {} card",
                    LinkText(s.pcie_gen, s.pcie_width, g.pcie_gen_low, g.pcie_width_low),
                    WithArticle(LinkText(info.max_pcie_gen, info.max_pcie_width,
                                         g.pcie_gen_low, g.pcie_width_low)));
    out.events.push_back(MakeEvent(info, s.time, kEventGpuPcie, Severity::kWarning,
                                   std::move(message), std::move(data)));
  } else {
    out.events.push_back(MakeEvent(
        info, s.time, kEventGpuPcie, Severity::kInfo,
        fmt::format("PCIe link back to {}", LinkText(s.pcie_gen, s.pcie_width, true, true)),
        std::move(data)));
  }
}

void Telemetry::CheckThermal(Gpu& g, const gpu::GpuSample& s, IngestResult& out) {
  const std::optional<double>& slowdown = g.info.temp_slowdown_c;
  bool hw_throttle = s.throttle_reasons && (*s.throttle_reasons & gpu::throttle::kHwThermalSlowdown);
  json data = {{"hw_thermal_throttle", hw_throttle}};
  if (s.temp_c) data["temp_c"] = *s.temp_c;
  if (slowdown) data["slowdown_c"] = *slowdown;

  if (!g.hot) {
    bool over = slowdown && s.temp_c && *s.temp_c >= *slowdown;
    if (!over && !hw_throttle) return;
    g.hot = true;
    data["hot"] = true;
    std::string message =
        over ? fmt::format("{:.0f} °C, at or above its slowdown threshold of {:.0f} °C{}",
                           *s.temp_c, *slowdown, hw_throttle ? ", hardware thermal throttling" : "")
             : "hardware thermal throttling";
    out.events.push_back(MakeEvent(g.info, s.time, kEventGpuThermal, Severity::kCritical,
                                   std::move(message), std::move(data)));
    return;
  }
  // Without a temperature reading the episode cannot be said to be over.
  bool cooled = !slowdown || (s.temp_c && *s.temp_c < *slowdown - kThermalHysteresisC);
  if (hw_throttle || !cooled) return;
  g.hot = false;
  data["hot"] = false;
  out.events.push_back(MakeEvent(
      g.info, s.time, kEventGpuThermal, Severity::kInfo,
      s.temp_c ? fmt::format("cooled to {:.0f} °C, no thermal throttling", *s.temp_c)
               : std::string("no thermal throttling"),
      std::move(data)));
}

void Telemetry::CheckFan(Gpu& g, const gpu::GpuSample& s, IngestResult& out) {
  // A card with a fan (passive cards report none) that shows 0% while warm
  // has a dead or stuck fan. Latched until the fan turns again, so a stopped
  // fan on a card that cools down is not reported twice.
  if (!s.fan_pct) return;
  if (!g.fan_stopped && *s.fan_pct <= 0.0 && s.temp_c && *s.temp_c > kFanStoppedAboveC) {
    g.fan_stopped = true;
    out.events.push_back(MakeEvent(
        g.info, s.time, kEventGpuFan, Severity::kCritical,
        fmt::format("fan at 0% while the GPU is at {:.0f} °C: the fan has stopped", *s.temp_c),
        {{"fan_pct", *s.fan_pct}, {"temp_c", *s.temp_c}, {"stopped", true}}));
  } else if (g.fan_stopped && *s.fan_pct > 0.0) {
    g.fan_stopped = false;
    out.events.push_back(MakeEvent(g.info, s.time, kEventGpuFan, Severity::kInfo,
                                   fmt::format("fan turning again at {:.0f}%", *s.fan_pct),
                                   {{"fan_pct", *s.fan_pct}, {"stopped", false}}));
  }
}

void Telemetry::CheckRetirement(Gpu& g, const gpu::GpuSample& s, IngestResult& out) {
  if (!s.retired_pages_pending && !s.remapped_rows_pending && !s.remapped_rows_failure) return;
  bool pages_pending = s.retired_pages_pending.value_or(false);
  bool rows_pending = s.remapped_rows_pending.value_or(false);
  bool rows_failure = s.remapped_rows_failure.value_or(false);
  bool pending = pages_pending || rows_pending || rows_failure;
  if (pending == g.retirement_pending) return;
  g.retirement_pending = pending;

  json data = {{"pending", pending},
               {"retired_pages_pending", pages_pending},
               {"remapped_rows_pending", rows_pending},
               {"remapped_rows_failure", rows_failure}};
  if (!pending) {
    out.events.push_back(MakeEvent(g.info, s.time, kEventGpuRetired, Severity::kInfo,
                                   "memory page retirement / row remapping applied",
                                   std::move(data)));
    return;
  }
  std::string message;
  if (rows_failure) {
    message = "row remapping failed: the GPU's memory is out of spare rows and needs service";
  } else {
    message = fmt::format("{} pending: reset the GPU to apply it",
                          pages_pending ? "page retirement" : "row remapping");
  }
  out.events.push_back(MakeEvent(g.info, s.time, kEventGpuRetired, Severity::kCritical,
                                 std::move(message), std::move(data)));
}

const gpu::GpuSample* Telemetry::Latest(int index) const {
  const Gpu* g = Find(index);
  if (g == nullptr || g->ring.empty()) return nullptr;
  return &g->ring.Newest();
}

std::vector<gpu::GpuSample> Telemetry::Recent(int index, size_t n) const {
  const Gpu* g = Find(index);
  if (g == nullptr) return {};
  return g->ring.Last(n);
}

GpuState Telemetry::State(int index) const {
  const Gpu* g = Find(index);
  return g == nullptr ? GpuState::kOk : g->state;
}

std::string Telemetry::LostReason(int index) const {
  const Gpu* g = Find(index);
  return g == nullptr ? std::string() : g->lost_reason;
}

std::vector<store::RollupRecord> Telemetry::Flush() {
  std::vector<store::RollupRecord> out = std::move(orphaned_rollups_);
  orphaned_rollups_.clear();
  for (auto& [uuid, g] : gpus_) {
    if (auto closed = g.rollup.Flush()) out.push_back(std::move(*closed));
  }
  return out;
}

}  // namespace gpuherd::telemetry
