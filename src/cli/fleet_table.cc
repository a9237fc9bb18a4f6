#include "cli/fleet_table.h"

#include <fmt/format.h>

#include "cli/table.h"

namespace gpuherd::cli {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string Or(const std::optional<std::string>& v) { return v ? *v : "-"; }

}  // namespace

std::string RenderFleetTable(const api::Fleet& fleet, bool color) {
  std::string out;
  if (fleet.simulated) {
    out += Colored("SIMULATED FLEET", kYellow, color) + " (" + fleet.sim_reason + "): these are not real GPUs.\n";
  }
  // RISK only where the daemon has a failure-risk model to score with.
  bool risk_shown = false;
  for (const api::Gpu& g : fleet.gpus) risk_shown |= g.failure_risk.has_value();
  std::vector<std::string> headers = {"IDX", "MODEL", "UTIL", "MEMORY", "TEMP", "POWER", "PCIE", "FAN", "THROTTLE"};
  if (risk_shown) headers.push_back("RISK");
  headers.push_back("STATE");
  Table table(headers);
  for (const api::Gpu& g : fleet.gpus) {
    const gpu::GpuInfo& info = g.info;
    const gpu::GpuSample s = g.sample.value_or(gpu::GpuSample{});
    std::optional<std::string> util, mem, temp, power, pcie, fan;
    if (s.gpu_util_pct) util = fmt::format("{:.0f}%", *s.gpu_util_pct);
    if (s.mem_used_bytes) {
      double total = static_cast<double>(s.mem_total_bytes.value_or(info.memory_total_bytes));
      mem = fmt::format("{:.1f}/{:.1f} GiB", static_cast<double>(*s.mem_used_bytes) / kGiB, total / kGiB);
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
    std::string state_cell = g.state == "ok" ? Colored(g.state, kGreen, color) : Colored(g.state, kRed, color);
    if (!s.xids.empty()) {
      std::string xids;
      for (const gpu::XidEvent& x : s.xids) xids += (xids.empty() ? "" : ",") + std::to_string(x.xid);
      state_cell += Colored(" xid " + xids, kRed, color);
    }
    std::vector<std::string> row = {std::to_string(info.index), info.name.empty() ? "?" : info.name,
                                    Or(util), Or(mem), Or(temp), Or(power), Or(pcie), Or(fan), throttle};
    if (risk_shown) {
      std::string cell = g.failure_risk ? fmt::format("{:.2f}", *g.failure_risk) : "-";
      if (g.failure_risk && *g.failure_risk >= 0.5) cell = Colored(cell, kRed, color);
      row.push_back(cell);
    }
    row.push_back(state_cell);
    table.AddRow(std::move(row));
  }
  if (risk_shown) return out + table.Render({0, 2, 3, 4, 5, 7, 9});
  return out + table.Render({0, 2, 3, 4, 5, 7});
}

}  // namespace gpuherd::cli
