#include "cli/fleet_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/table.h"
#include "core/time.h"

namespace gpuherd::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Or(const std::optional<std::string>& v) { return v ? *v : "-"; }

std::string Gib(uint64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / kGiB); }

// "#12 alice 3.1/8.0G" for a fraction, "#12 alice 30.2G" for whole GPUs.
std::string JobCell(const api::GpuJob& job) {
  std::string used = job.used_bytes ? Gib(*job.used_bytes) : "?";
  std::string memory = job.share_bytes > 0 ? used + "/" + Gib(job.share_bytes) + "G" : (job.used_bytes ? used + "G" : "");
  std::string cell = fmt::format("#{} {}", job.id, Printable(job.user));
  if (!memory.empty()) cell += " " + memory;
  return cell;
}

// The latest reading of a GPU that answers; nullopt for a lost one.
std::optional<gpu::GpuSample> Reading(const api::Gpu& g) {
  if (g.state == "lost") return std::nullopt;
  return g.sample.value_or(gpu::GpuSample{});
}

std::optional<double> MemPct(const api::Gpu& g, const gpu::GpuSample& s) {
  const uint64_t total = s.mem_total_bytes.value_or(g.info.memory_total_bytes);
  if (!s.mem_used_bytes || total == 0) return std::nullopt;
  return 100.0 * static_cast<double>(*s.mem_used_bytes) / static_cast<double>(total);
}

template <typename T>
std::string Field(const std::optional<T>& v, const char* format = "{}") {
  return v ? fmt::format(fmt::runtime(format), *v) : "";
}

}  // namespace

std::string Bar(double pct, int width) {
  static const char* const kEighths[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  if (!std::isfinite(pct)) pct = 0;
  const int eighths = static_cast<int>(std::lround(std::clamp(pct, 0.0, 100.0) / 100.0 * width * 8));
  std::string bar = "[";
  int cells = 0;
  for (; cells < eighths / 8; ++cells) bar += "█";
  if (eighths % 8 != 0) {
    bar += kEighths[eighths % 8];
    ++cells;
  }
  bar.append(static_cast<size_t>(width - cells), ' ');
  return bar + "]";
}

namespace {

// The fleet table drawn at one level of detail; RenderFleetTable tries them
// from the widest down until one fits the terminal.
struct Layout {
  int bar_cells = 10;         // with bars
  bool short_model = false;   // "H100 80GB HBM3" for "NVIDIA H100 80GB HBM3"
  bool short_memory = false;  // "0.5/79.6G"
  std::vector<std::string> dropped;  // columns left out, by header
};

// Layouts from the widest to the narrowest: columns go in the order of what
// an operator glancing at top needs least (fan, throttle reasons, PCIe,
// power, then health and risk, which `gpuherd health` shows anyway).
std::vector<Layout> Layouts() {
  std::vector<Layout> out = {Layout{}};
  Layout l;
  l.short_model = true;
  out.push_back(l);
  for (const char* column : {"FAN", "THROTTLE", "PCIE"}) {
    l.dropped.push_back(column);
    out.push_back(l);
  }
  l.bar_cells = 5;
  l.short_memory = true;
  out.push_back(l);
  for (const char* column : {"POWER", "RISK", "HEALTH"}) {
    l.dropped.push_back(column);
    out.push_back(l);
  }
  return out;
}

std::string ShortModel(std::string name) {
  for (const char* prefix : {"NVIDIA GeForce ", "NVIDIA "}) {
    if (name.rfind(prefix, 0) == 0) return name.substr(std::strlen(prefix));
  }
  return name;
}

std::string RenderFleetTableAs(const api::Fleet& fleet, bool color, bool bars, const Layout& layout) {
  std::string out;
  if (fleet.simulated) {
    out += Colored("SIMULATED FLEET", kYellow, color) + " (" + Printable(fleet.sim_reason) +
           "): these are not real GPUs.\n";
  }
  // RISK only where the daemon has a failure-risk model to score with.
  bool risk_shown = false;
  for (const api::Gpu& g : fleet.gpus) risk_shown |= g.failure_risk.has_value();
  std::vector<std::string> headers = {"IDX", "MODEL", "UTIL", "MEMORY", "TEMP", "POWER", "PCIE", "FAN", "THROTTLE", "HEALTH"};
  if (risk_shown) headers.push_back("RISK");
  headers.push_back("STATE");
  // The legend of the JOBS column goes with the long model names.
  headers.push_back(layout.short_model ? "JOBS" : "JOBS (id user GiB used/share)");
  std::vector<std::vector<std::string>> rows;
  std::string notes;
  for (const api::Gpu& g : fleet.gpus) {
    const gpu::GpuInfo& info = g.info;
    const std::optional<gpu::GpuSample> reading = Reading(g);
    const gpu::GpuSample s = reading.value_or(gpu::GpuSample{});
    std::optional<std::string> util, mem, temp, power, pcie, fan;
    if (s.gpu_util_pct) util = bars ? fmt::format("{} {:3.0f}%", Bar(*s.gpu_util_pct, layout.bar_cells), *s.gpu_util_pct)
                                    : fmt::format("{:.0f}%", *s.gpu_util_pct);
    if (s.mem_used_bytes) {
      double total = static_cast<double>(s.mem_total_bytes.value_or(info.memory_total_bytes));
      mem = fmt::format("{:.1f}/{:.1f}{}", static_cast<double>(*s.mem_used_bytes) / kGiB, total / kGiB,
                        layout.short_memory ? "G" : " GiB");
      if (bars) mem = Bar(MemPct(g, s).value_or(0), layout.bar_cells) + " " + *mem;
    }
    if (s.temp_c) {
      temp = fmt::format("{:.0f}°C", *s.temp_c);
      if (info.temp_slowdown_c && *s.temp_c >= *info.temp_slowdown_c) temp = Colored(*temp, kRed, color);
    }
    if (s.power_w) {
      power = s.power_limit_w ? fmt::format("{:.0f}/{:.0f} W", *s.power_w, *s.power_limit_w)
                              : fmt::format("{:.0f} W", *s.power_w);
    }
    if (s.pcie_gen || s.pcie_width) {
      std::string text = fmt::format("Gen{} x{}", s.pcie_gen ? std::to_string(*s.pcie_gen) : "?",
                                     s.pcie_width ? std::to_string(*s.pcie_width) : "?");
      bool below = (s.pcie_gen && info.max_pcie_gen && *s.pcie_gen < *info.max_pcie_gen) ||
                   (s.pcie_width && info.max_pcie_width && *s.pcie_width < *info.max_pcie_width);
      if (below) {
        text += fmt::format(" ! (max Gen{} x{})", info.max_pcie_gen.value_or(0), info.max_pcie_width.value_or(0));
        text = Colored(text, kYellow, color);
      }
      pcie = text;
    }
    if (s.fan_pct) fan = fmt::format("{:.0f}%", *s.fan_pct);
    std::string throttle = s.throttle_reasons ? gpu::throttle::Describe(*s.throttle_reasons) : "";
    if (throttle == "idle" || throttle.empty()) throttle = "-";
    std::string health = "-";
    if (g.health_score) {
      health = fmt::format("{} {}", *g.health_score, Printable(g.health_verdict));
      if (g.health_verdict == "unhealthy") health = Colored(health, kRed, color);
      else if (g.health_verdict == "degraded") health = Colored(health, kYellow, color);
    }
    std::string state_cell = Colored(Printable(g.state), g.state == "ok" ? kGreen : kRed, color);
    // Self-healing's state (docs/gpu-health.md "Self-healing in the daemon") where it is
    // not plainly in service: suspect, quarantined, requalifying, retired.
    if (g.health_state && !g.health_state->state.empty() && g.health_state->state != "in_service") {
      const std::string& hs = g.health_state->state;
      state_cell += " " + Colored(Printable(hs), hs == "suspect" || hs == "requalifying" ? kYellow : kRed, color);
    }
    if (!s.xids.empty()) {
      std::string xids;
      for (const gpu::XidEvent& x : s.xids) xids += (xids.empty() ? "" : ",") + std::to_string(x.xid);
      state_cell += Colored(" xid " + xids, kRed, color);
    }
    std::string jobs;
    for (const api::GpuJob& job : g.jobs) jobs += (jobs.empty() ? "" : ", ") + JobCell(job);
    std::vector<std::string> row;
    const std::string model =
        info.name.empty() ? "?" : Printable(layout.short_model ? ShortModel(info.name) : info.name);
    if (reading) {
      row = {std::to_string(info.index), model, Or(util), Or(mem), Or(temp), Or(power), Or(pcie), Or(fan), throttle, health};
    } else {
      row = {std::to_string(info.index), model};
      for (int i = 0; i < 7; ++i) row.push_back(kNoReading);
      row.push_back(health);
    }
    if (risk_shown) {
      std::string cell = g.failure_risk ? fmt::format("{:.2f}", *g.failure_risk) : "-";
      if (g.failure_risk && *g.failure_risk >= 0.5) cell = Colored(cell, kRed, color);
      row.push_back(cell);
    }
    row.push_back(state_cell);
    row.push_back(jobs.empty() ? "-" : jobs);
    rows.push_back(std::move(row));
    if (g.state == "lost") {
      notes += fmt::format("GPU {} lost{}{}\n", info.index, g.last_error.empty() ? "" : ": " + Printable(g.last_error),
                           g.last_seen ? " (last answered " + FormatTimeUtc(g.last_seen).substr(0, 19) + " UTC)" : "");
    }
    if (g.health_state && !g.health_state->state.empty() && g.health_state->state != "in_service") {
      notes += fmt::format("GPU {} {} since {} UTC: {}\n", info.index, Printable(g.health_state->state),
                           FormatTimeUtc(g.health_state->since).substr(0, 19),
                           g.health_state->reason.empty() ? "(no reason given)" : Printable(g.health_state->reason));
    }
    if (g.drained) {
      notes += fmt::format("GPU {} drained{}: {}\n", info.index,
                           g.drain_origin.empty() ? "" : " (" + Printable(g.drain_origin) + ")",
                           g.drain_reason.empty() ? "(no reason given)" : Printable(g.drain_reason));
    }
  }
  // The columns this layout keeps; numbers are right-aligned.
  const std::set<std::string> right_named = {"IDX", "UTIL", "MEMORY", "TEMP", "POWER", "FAN", "RISK"};
  std::vector<size_t> keep, right;
  std::vector<std::string> kept_headers;
  for (size_t c = 0; c < headers.size(); ++c) {
    if (std::find(layout.dropped.begin(), layout.dropped.end(), headers[c]) != layout.dropped.end()) continue;
    if (right_named.count(headers[c])) right.push_back(kept_headers.size());
    keep.push_back(c);
    kept_headers.push_back(headers[c]);
  }
  Table table(kept_headers);
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (size_t c : keep) cells.push_back(row[c]);
    table.AddRow(std::move(cells));
  }
  out += table.Render(right);
  return notes.empty() ? out : out + "\n" + notes;
}

size_t WidestLine(const std::string& text) {
  size_t widest = 0, begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    widest = std::max(widest, DisplayWidth(text.substr(begin, end - begin)));
    begin = end + 1;
  }
  return widest;
}

}  // namespace

std::string RenderFleetTable(const api::Fleet& fleet, bool color, bool bars, size_t width) {
  const std::vector<Layout> layouts = Layouts();
  std::string text = RenderFleetTableAs(fleet, color, bars, layouts.front());
  if (width == 0) return text;
  // Only the table's rows need to fit: the notes below it wrap as text does.
  for (size_t i = 1; i < layouts.size() && WidestLine(text.substr(0, text.find("\n\n"))) > width; ++i) {
    text = RenderFleetTableAs(fleet, color, bars, layouts[i]);
  }
  return text;
}

std::string RenderFleetCsv(const api::Fleet& fleet) {
  std::string out =
      "index,uuid,name,state,util_pct,mem_used_mib,mem_total_mib,temp_c,power_w,power_limit_w,pcie_gen,pcie_width,"
      "fan_pct,throttle,health_score,health_verdict,drained,drain_origin,drain_reason,failure_risk,jobs\n";
  for (const api::Gpu& g : fleet.gpus) {
    const std::optional<gpu::GpuSample> reading = Reading(g);
    const gpu::GpuSample s = reading.value_or(gpu::GpuSample{});
    std::optional<uint64_t> used_mib, total_mib;
    if (s.mem_used_bytes) used_mib = *s.mem_used_bytes >> 20;
    if (reading) total_mib = s.mem_total_bytes.value_or(g.info.memory_total_bytes) >> 20;
    std::string jobs;
    for (const api::GpuJob& job : g.jobs) {
      jobs += fmt::format("{}{}:{}:{}:{}", jobs.empty() ? "" : ";", job.id, job.user,
                          job.used_bytes ? std::to_string(*job.used_bytes >> 20) : "", job.share_bytes >> 20);
    }
    std::vector<std::string> fields = {
        std::to_string(g.info.index), g.info.uuid, g.info.name, g.state, Field(s.gpu_util_pct, "{:.0f}"),
        Field(used_mib), Field(total_mib), Field(s.temp_c, "{:.0f}"), Field(s.power_w, "{:.1f}"),
        Field(s.power_limit_w, "{:.0f}"), Field(s.pcie_gen), Field(s.pcie_width), Field(s.fan_pct, "{:.0f}"),
        s.throttle_reasons ? gpu::throttle::Describe(*s.throttle_reasons) : "",
        Field(g.health_score), g.health_verdict, g.drained ? "yes" : "no", g.drain_origin, g.drain_reason,
        Field(g.failure_risk, "{:.3f}"), jobs};
    for (size_t i = 0; i < fields.size(); ++i) out += (i == 0 ? "" : ",") + CsvField(fields[i]);
    out += "\n";
  }
  return out;
}

Status SelectGpus(const std::string& ids, api::Fleet* fleet) {
  std::vector<bool> keep(fleet->gpus.size(), false);
  size_t start = 0;
  while (start <= ids.size()) {
    size_t comma = ids.find(',', start);
    std::string id = ids.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? ids.size() + 1 : comma + 1;
    if (id.empty()) return InvalidArgument("--gpu takes GPU indexes or UUIDs separated by commas, like 0,2; got '" +
                                           Printable(ids) + "'");
    bool found = false;
    for (size_t i = 0; i < fleet->gpus.size(); ++i) {
      if (gpu::NamesGpu(id, fleet->gpus[i].info.index, fleet->gpus[i].info.uuid)) keep[i] = found = true;
    }
    if (!found) {
      return InvalidArgument(fmt::format("no GPU '{}' here; this machine has GPUs 0 to {}", Printable(id),
                                         static_cast<int>(fleet->gpus.size()) - 1));
    }
  }
  std::vector<api::Gpu> kept;
  for (size_t i = 0; i < fleet->gpus.size(); ++i) {
    if (keep[i]) kept.push_back(std::move(fleet->gpus[i]));
  }
  fleet->gpus = std::move(kept);
  return Status::Ok();
}

void SortGpus(const std::string& key, api::Fleet* fleet) {
  std::function<std::optional<double>(const api::Gpu&)> value;
  auto reading = [](const api::Gpu& g, auto field) -> std::optional<double> {
    auto s = Reading(g);
    return s ? field(g, *s) : std::nullopt;
  };
  if (key == "util") {
    value = [&](const api::Gpu& g) { return reading(g, [](const api::Gpu&, const gpu::GpuSample& s) { return s.gpu_util_pct; }); };
  } else if (key == "mem") {
    value = [&](const api::Gpu& g) { return reading(g, [](const api::Gpu& x, const gpu::GpuSample& s) { return MemPct(x, s); }); };
  } else if (key == "temp") {
    value = [&](const api::Gpu& g) { return reading(g, [](const api::Gpu&, const gpu::GpuSample& s) { return s.temp_c; }); };
  } else if (key == "power") {
    value = [&](const api::Gpu& g) { return reading(g, [](const api::Gpu&, const gpu::GpuSample& s) { return s.power_w; }); };
  } else if (key == "jobs") {
    value = [](const api::Gpu& g) { return std::optional<double>(static_cast<double>(g.jobs.size())); };
  } else {
    value = [](const api::Gpu& g) { return std::optional<double>(-static_cast<double>(g.info.index)); };
  }
  std::stable_sort(fleet->gpus.begin(), fleet->gpus.end(), [&](const api::Gpu& a, const api::Gpu& b) {
    auto va = value(a), vb = value(b);
    if (va.has_value() != vb.has_value()) return va.has_value();
    if (va && vb && *va != *vb) return *va > *vb;
    return a.info.index < b.info.index;
  });
}

}  // namespace gpuherd::cli
