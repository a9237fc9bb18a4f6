#include "telemetry/prometheus.h"

#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace gpuherd::telemetry {
namespace {

using Buffer = fmt::memory_buffer;
constexpr double kMib = 1024.0 * 1024.0;
// NVML reports PCIe throughput in KB/s of 1024 bytes.
constexpr double kPcieKb = 1024.0;

void Append(Buffer& out, std::string_view text) { out.append(text.data(), text.data() + text.size()); }

void AppendEscaped(Buffer& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\': Append(out, "\\\\"); break;
      case '"': Append(out, "\\\""); break;
      case '\n': Append(out, "\\n"); break;
      default: out.push_back(c);
    }
  }
}

void AppendLabel(Buffer& out, std::string_view name, std::string_view value, bool first = false) {
  if (!first) out.push_back(',');
  Append(out, name);
  Append(out, "=\"");
  AppendEscaped(out, value);
  out.push_back('"');
}

void AppendValue(Buffer& out, double v) {
  if (std::isnan(v)) {
    Append(out, "NaN");
  } else if (std::isinf(v)) {
    Append(out, v > 0 ? "+Inf" : "-Inf");
  } else {
    fmt::format_to(std::back_inserter(out), "{}", v);
  }
}

// HELP text escapes only backslash and newline.
void AppendHeader(Buffer& out, std::string_view name, std::string_view type, std::string_view help) {
  Append(out, "# HELP ");
  Append(out, name);
  out.push_back(' ');
  for (char c : help) {
    if (c == '\\') {
      Append(out, "\\\\");
    } else if (c == '\n') {
      Append(out, "\\n");
    } else {
      out.push_back(c);
    }
  }
  Append(out, "\n# TYPE ");
  Append(out, name);
  out.push_back(' ');
  Append(out, type);
  out.push_back('\n');
}

// `labels` is the inside of the braces, already escaped; empty for none.
void AppendSeries(Buffer& out, std::string_view name, std::string_view labels, double value) {
  Append(out, name);
  if (!labels.empty()) {
    out.push_back('{');
    Append(out, labels);
    out.push_back('}');
  }
  out.push_back(' ');
  AppendValue(out, value);
  out.push_back('\n');
}

// Writes a family's HELP and TYPE lines before its first series only, so that
// a family no GPU reports is left out.
class Family {
 public:
  Family(Buffer& out, std::string_view name, std::string_view type, std::string_view help)
      : out_(out), name_(name), type_(type), help_(help) {}

  void Add(std::string_view labels, double value) {
    if (!started_) {
      AppendHeader(out_, name_, type_, help_);
      started_ = true;
    }
    AppendSeries(out_, name_, labels, value);
  }
  void Add(std::string_view labels, std::optional<double> value) {
    if (value) Add(labels, *value);
  }

 private:
  Buffer& out_;
  std::string_view name_, type_, help_;
  bool started_ = false;
};

template <typename T>
std::optional<double> AsDouble(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return static_cast<double>(*v);
}

std::optional<double> FbFreeMib(const gpu::GpuInfo& info, const gpu::GpuSample& s) {
  if (!s.mem_used_bytes) return std::nullopt;
  uint64_t total = s.mem_total_bytes.value_or(info.memory_total_bytes);
  if (total == 0) return std::nullopt;
  uint64_t free = total > *s.mem_used_bytes ? total - *s.mem_used_bytes : 0;
  return std::floor(static_cast<double>(free) / kMib);
}

using Extract = std::optional<double> (*)(const gpu::GpuInfo&, const gpu::GpuSample&);

struct DcgmField {
  const char* name;
  const char* help;
  Extract extract;
};

// Names and HELP texts as dcgm-exporter's etc/default-counters.csv and
// dcp-metrics-included.csv. dcgm-exporter declares its cumulative fields
// (energy, PCIe replays, ECC, retired pages, remapped rows) as counters, but
// promtool requires a counter's name to end in _total and these names are
// fixed for compatibility, so every DCGM field is declared a gauge. A TYPE
// line is metadata only: queries, rate() included, work the same.
const DcgmField kDcgmFields[] = {
    {"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.sm_clock_mhz); }},
    {"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.mem_clock_mhz); }},
    {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.temp_c; }},
    {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.power_w; }},
    {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.energy_mj); }},
    {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.pcie_replay_count); }},
    {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.gpu_util_pct; }},
    {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.mem_util_pct; }},
    {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", &FbFreeMib},
    {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
       if (!s.mem_used_bytes) return std::nullopt;
       return std::floor(static_cast<double>(*s.mem_used_bytes) / kMib);
     }},
    {"DCGM_FI_DEV_FAN_SPEED", "Fan speed for the device in percent 0-100.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.fan_pct; }},
    {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.ecc_sbe_volatile); }},
    {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.ecc_dbe_volatile); }},
    {"DCGM_FI_DEV_RETIRED_SBE", "Total number of retired pages due to single-bit errors.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.retired_pages_sbe); }},
    {"DCGM_FI_DEV_RETIRED_DBE", "Total number of retired pages due to double-bit errors.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.retired_pages_dbe); }},
    {"DCGM_FI_DEV_RETIRED_PENDING", "Total number of pages pending retirement.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.retired_pages_pending); }},
    {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.remapped_rows_uncorrectable); }},
    {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.remapped_rows_correctable); }},
    {"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.remapped_rows_failure); }},
    // NVML has no profiling counters; the graphics engine's activity is
    // approximated by its utilisation (the share of time a kernel ran), so
    // NVIDIA's dashboard's "GPU Utilization" panel shows data.
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
     [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
       if (!s.gpu_util_pct) return std::nullopt;
       return *s.gpu_util_pct / 100.0;
     }},
};

std::optional<double> LastXid(const GpuMetrics& g) {
  if (g.last_xid) return *g.last_xid;
  if (g.latest == nullptr) return std::nullopt;
  if (!g.latest->xids.empty()) return g.latest->xids.back().xid;
  return 0.0;
}

constexpr const char* kVerdicts[] = {"healthy", "degraded", "unhealthy", "unknown"};
constexpr const char* kHealthStates[] = {"in_service", "suspect", "quarantined", "requalifying", "retired"};

constexpr uint64_t kThrottleBits[] = {
    gpu::throttle::kGpuIdle,           gpu::throttle::kApplicationsClocksSetting,
    gpu::throttle::kSwPowerCap,        gpu::throttle::kHwSlowdown,
    gpu::throttle::kSyncBoost,         gpu::throttle::kSwThermalSlowdown,
    gpu::throttle::kHwThermalSlowdown, gpu::throttle::kHwPowerBrakeSlowdown,
    gpu::throttle::kDisplayClockSetting,
};

// The labels of every series of one GPU, built once per render.
struct GpuLabels {
  std::string dcgm;     // gpu, UUID, pci_bus_id, device, modelName, Hostname
  std::string herd;     // gpu, uuid
};

GpuLabels LabelsOf(const gpu::GpuInfo& info, const std::string& hostname) {
  Buffer b;
  std::string index = std::to_string(info.index);
  AppendLabel(b, "gpu", index, /*first=*/true);
  AppendLabel(b, "UUID", info.uuid);
  AppendLabel(b, "pci_bus_id", info.pci_bus_id);
  // dcgm-exporter names the device node; gpuherd's index stands for its minor.
  AppendLabel(b, "device", "nvidia" + index);
  AppendLabel(b, "modelName", info.name);
  AppendLabel(b, "Hostname", hostname);
  GpuLabels labels;
  labels.dcgm = fmt::to_string(b);
  b.clear();
  AppendLabel(b, "gpu", index, /*first=*/true);
  AppendLabel(b, "uuid", info.uuid);
  labels.herd = fmt::to_string(b);
  return labels;
}

// The labels of one GPU plus one more.
std::string WithLabel(const std::string& base, std::string_view name, std::string_view value) {
  Buffer b;
  Append(b, base);
  AppendLabel(b, name, value, base.empty());
  return fmt::to_string(b);
}

bool Fresh(const GpuMetrics& g) { return g.latest != nullptr && !g.lost; }

void RenderDcgm(const MetricsInput& in, const std::vector<GpuLabels>& labels, Buffer& out) {
  for (const DcgmField& field : kDcgmFields) {
    Family family(out, field.name, "gauge", field.help);
    for (size_t i = 0; i < in.gpus.size(); ++i) {
      const GpuMetrics& g = in.gpus[i];
      if (Fresh(g)) family.Add(labels[i].dcgm, field.extract(*g.info, *g.latest));
    }
  }
  // An event, not a reading: the last XID is shown for a lost GPU too.
  Family xid(out, "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.");
  for (size_t i = 0; i < in.gpus.size(); ++i) xid.Add(labels[i].dcgm, LastXid(in.gpus[i]));
}

// A gpuherd_* family of one value per GPU taken from its latest reading.
void RenderSampleGauge(const MetricsInput& in, const std::vector<GpuLabels>& labels, Buffer& out,
                       std::string_view name, std::string_view help, Extract extract) {
  Family family(out, name, "gauge", help);
  for (size_t i = 0; i < in.gpus.size(); ++i) {
    const GpuMetrics& g = in.gpus[i];
    if (Fresh(g)) family.Add(labels[i].herd, extract(*g.info, *g.latest));
  }
}

void RenderGpuherd(const MetricsInput& in, const std::vector<GpuLabels>& labels, Buffer& out) {
  {
    Family info(out, "gpuherd_info", "gauge", "gpuherd's version and GPU driver; always 1.");
    Buffer b;
    AppendLabel(b, "version", in.version, /*first=*/true);
    AppendLabel(b, "driver", in.driver);
    AppendLabel(b, "hostname", in.hostname);
    AppendLabel(b, "simulated", in.simulated ? "true" : "false");
    info.Add(fmt::to_string(b), 1.0);
  }
  {
    Family up(out, "gpuherd_gpu_up", "gauge", "1 when the GPU answered its last reading, 0 when it is lost.");
    for (size_t i = 0; i < in.gpus.size(); ++i) {
      const GpuMetrics& g = in.gpus[i];
      if (g.latest != nullptr || g.lost) up.Add(labels[i].herd, g.lost ? 0.0 : 1.0);
    }
  }
  {
    Family score(out, "gpuherd_gpu_health_score", "gauge", "Health score of the GPU's last burn-in, 0 to 100.");
    for (size_t i = 0; i < in.gpus.size(); ++i) score.Add(labels[i].herd, AsDouble(in.gpus[i].health_score));
  }
  {
    Family risk(out, "gpuherd_gpu_failure_risk", "gauge",
                "Probability of a hardware fault within the model's horizon, from the failure-risk model.");
    for (size_t i = 0; i < in.gpus.size(); ++i) risk.Add(labels[i].herd, in.gpus[i].failure_risk);
  }
  {
    Family verdict(out, "gpuherd_gpu_verdict", "gauge",
                   "The verdict of the GPU's last burn-in: 1 for the current verdict, 0 for the others.");
    for (size_t i = 0; i < in.gpus.size(); ++i) {
      const GpuMetrics& g = in.gpus[i];
      if (g.verdict.empty()) continue;
      bool known = false;
      for (const char* v : kVerdicts) {
        known = known || g.verdict == v;
        verdict.Add(WithLabel(labels[i].herd, "verdict", v), g.verdict == v ? 1.0 : 0.0);
      }
      if (!known) verdict.Add(WithLabel(labels[i].herd, "verdict", g.verdict), 1.0);
    }
  }
  {
    // One series per state, as kube-state-metrics does for phases: a query
    // picks the state (gpuherd_gpu_state{state="retired"} == 1).
    Family state(out, "gpuherd_gpu_state", "gauge",
                 "Self-healing state of the GPU: 1 for its current state (in_service, suspect, quarantined, "
                 "requalifying, retired), 0 for the others.");
    for (size_t i = 0; i < in.gpus.size(); ++i) {
      const GpuMetrics& g = in.gpus[i];
      if (g.health_state.empty()) continue;
      for (const char* s : kHealthStates) {
        state.Add(WithLabel(labels[i].herd, "state", s), g.health_state == s ? 1.0 : 0.0);
      }
    }
  }
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_pcie_link_gen", "Current PCIe link generation.",
                    [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.pcie_gen); });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_pcie_link_width", "Current PCIe link width (lanes).",
                    [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return AsDouble(s.pcie_width); });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_pcie_link_gen_max", "Maximum PCIe link generation of the GPU.",
                    [](const gpu::GpuInfo& info, const gpu::GpuSample&) { return AsDouble(info.max_pcie_gen); });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_pcie_link_width_max", "Maximum PCIe link width of the GPU (lanes).",
                    [](const gpu::GpuInfo& info, const gpu::GpuSample&) { return AsDouble(info.max_pcie_width); });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_pcie_tx_bytes_per_second", "PCIe transmit throughput.",
                    [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
                      if (!s.pcie_tx_kbps) return std::nullopt;
                      return *s.pcie_tx_kbps * kPcieKb;
                    });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_pcie_rx_bytes_per_second", "PCIe receive throughput.",
                    [](const gpu::GpuInfo&, const gpu::GpuSample& s) -> std::optional<double> {
                      if (!s.pcie_rx_kbps) return std::nullopt;
                      return *s.pcie_rx_kbps * kPcieKb;
                    });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_temp_slowdown_celsius",
                    "Temperature at which the GPU slows itself down.",
                    [](const gpu::GpuInfo& info, const gpu::GpuSample&) { return info.temp_slowdown_c; });
  RenderSampleGauge(in, labels, out, "gpuherd_gpu_power_limit_watts", "Power limit in force.",
                    [](const gpu::GpuInfo&, const gpu::GpuSample& s) { return s.power_limit_w; });
  {
    Family throttle(out, "gpuherd_gpu_throttle_reason", "gauge",
                    "1 while the GPU's clocks are held back for the reason, 0 otherwise.");
    for (size_t i = 0; i < in.gpus.size(); ++i) {
      const GpuMetrics& g = in.gpus[i];
      if (!Fresh(g) || !g.latest->throttle_reasons) continue;
      for (uint64_t bit : kThrottleBits) {
        throttle.Add(WithLabel(labels[i].herd, "reason", gpu::throttle::Describe(bit)),
                     (*g.latest->throttle_reasons & bit) ? 1.0 : 0.0);
      }
    }
  }
  {
    Family xids(out, "gpuherd_gpu_xid_errors_total", "counter", "XID errors seen since the daemon started.");
    for (size_t i = 0; i < in.gpus.size(); ++i) xids.Add(labels[i].herd, AsDouble(in.gpus[i].xid_count));
  }
  {
    Family jobs(out, "gpuherd_gpu_jobs", "gauge", "Jobs holding the GPU now.");
    for (size_t i = 0; i < in.gpus.size(); ++i) jobs.Add(labels[i].herd, AsDouble(in.gpus[i].jobs));
  }
  {
    Family jobs(out, "gpuherd_jobs", "gauge", "Jobs of the queue by state.");
    for (const auto& [state, count] : in.jobs_by_state) {
      jobs.Add(WithLabel("", "state", state), static_cast<double>(count));
    }
  }
  {
    // Seconds, Prometheus' base unit; a dashboard divides by 3600 for GPU-hours.
    Family usage(out, "gpuherd_user_gpu_seconds_total", "counter", "GPU time used by the user's jobs.");
    for (const auto& [user, seconds] : in.gpu_seconds_by_user) usage.Add(WithLabel("", "user", user), seconds);
  }
  {
    Family alerts(out, "gpuherd_alerts_firing", "gauge", "Alerts firing now by rule and severity.");
    for (const AlertsFiring& a : in.alerts_firing) {
      Buffer b;
      AppendLabel(b, "rule", a.rule, /*first=*/true);
      AppendLabel(b, "severity", a.severity);
      alerts.Add(fmt::to_string(b), static_cast<double>(a.count));
    }
  }
  {
    Family pass(out, "gpuherd_scheduler_pass_seconds", "gauge", "Duration of the last scheduling pass.");
    pass.Add("", in.scheduler_pass_seconds);
  }
  if (in.connections) {
    const ConnectionMetrics& c = *in.connections;
    Family open(out, "gpuherd_http_connections", "gauge", "HTTP connections open to the daemon now.");
    open.Add("", static_cast<double>(c.open));
    Family limit(out, "gpuherd_http_connections_limit", "gauge",
                 "The most HTTP connections the daemon holds at once (--max-connections).");
    limit.Add("", static_cast<double>(c.limit));
    // Every limit always has its series, so that rate() sees the first refusal.
    Family refused(out, "gpuherd_http_connections_refused_total", "counter",
                   "HTTP connections answered 503 and closed because a limit was reached: per_user (a uid on "
                   "the unix socket), per_address (over TCP) or total.");
    refused.Add(WithLabel("", "limit", "per_user"), static_cast<double>(c.refused_per_user));
    refused.Add(WithLabel("", "limit", "per_address"), static_cast<double>(c.refused_per_address));
    refused.Add(WithLabel("", "limit", "total"), static_cast<double>(c.refused_total));
    Family errors(out, "gpuherd_http_accept_errors_total", "counter",
                  "Failed accept() calls on the daemon's HTTP listeners (mostly out of file descriptors).");
    errors.Add("", static_cast<double>(c.accept_errors));
  }
  {
    Family ib(out, "gpuherd_infiniband_port_errors_total", "counter",
              "InfiniBand port error counters from /sys/class/infiniband.");
    for (const IbPortMetrics& port : in.ib_ports) {
      for (const auto& [counter, value] : port.counters) {
        Buffer b;
        AppendLabel(b, "device", port.device, /*first=*/true);
        AppendLabel(b, "port", port.port);
        AppendLabel(b, "counter", counter);
        ib.Add(fmt::to_string(b), static_cast<double>(value));
      }
    }
  }
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  Buffer b;
  AppendEscaped(b, value);
  return fmt::to_string(b);
}

std::string RenderMetrics(const MetricsInput& in) {
  std::vector<GpuLabels> labels;
  labels.reserve(in.gpus.size());
  for (const GpuMetrics& g : in.gpus) labels.push_back(LabelsOf(*g.info, in.hostname));

  Buffer out;
  out.reserve(4096 + in.gpus.size() * 8192);
  RenderDcgm(in, labels, out);
  RenderGpuherd(in, labels, out);
  return fmt::to_string(out);
}

}  // namespace gpuherd::telemetry
