#include "cli/fleet_table.h"

#include <fmt/format.h>

#include "cli/table.h"

namespace gpuherd::cli {
namespace {

using nlohmann::json;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

template <typename T>
std::optional<T> Field(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return it->get<T>();
}

std::string Or(const std::optional<std::string>& v) { return v ? *v : "-"; }

}  // namespace

std::string RenderFleetTable(const json& fleet, bool color) {
  std::string out;
  if (fleet.value("simulated", false)) {
    out += Colored("SIMULATED FLEET", kYellow, color) + " (" + fleet.value("sim_reason", std::string()) +
           "): these are not real GPUs.\n";
  }
  // RISK only where the daemon has a failure-risk model to score with.
  bool risk_shown = false;
  for (const json& g : fleet.value("gpus", json::array())) risk_shown |= g.contains("failure_risk");
  std::vector<std::string> headers = {"IDX", "MODEL", "UTIL", "MEMORY", "TEMP", "POWER", "PCIE", "FAN", "THROTTLE"};
  if (risk_shown) headers.push_back("RISK");
  headers.push_back("STATE");
  Table table(headers);
  for (const json& g : fleet.value("gpus", json::array())) {
    json s = g.value("sample", json::object());
    std::optional<std::string> util, mem, temp, power, pcie, fan;
    if (auto u = Field<double>(s, "gpu_util_pct")) util = fmt::format("{:.0f}%", *u);
    if (auto used = Field<double>(s, "mem_used_bytes")) {
      double total = Field<double>(s, "mem_total_bytes").value_or(g.value("memory_total_bytes", 0.0));
      mem = fmt::format("{:.1f}/{:.1f} GiB", *used / kGiB, total / kGiB);
    }
    if (auto t = Field<double>(s, "temp_c")) {
      temp = fmt::format("{:.0f}°C", *t);
      auto slowdown = Field<double>(g, "temp_slowdown_c");
      if (slowdown && *t >= *slowdown) temp = Colored(*temp, kRed, color);
    }
    if (auto p = Field<double>(s, "power_w")) {
      auto limit = Field<double>(s, "power_limit_w");
      power = limit ? fmt::format("{:.0f}/{:.0f} W", *p, *limit) : fmt::format("{:.0f} W", *p);
    }
    auto gen = Field<int>(s, "pcie_gen");
    auto width = Field<int>(s, "pcie_width");
    if (gen || width) {
      auto max_gen = Field<int>(g, "max_pcie_gen");
      auto max_width = Field<int>(g, "max_pcie_width");
      std::string text = fmt::format("Gen{} x{}", gen ? std::to_string(*gen) : "?",
                                     width ? std::to_string(*width) : "?");
      bool below = (gen && max_gen && *gen < *max_gen) || (width && max_width && *width < *max_width);
      if (below) {
        text += fmt::format(" ! (max Gen{} x{})", max_gen.value_or(0), max_width.value_or(0));
        text = Colored(text, kYellow, color);
      }
      pcie = text;
    }
    if (auto f = Field<double>(s, "fan_pct")) fan = fmt::format("{:.0f}%", *f);
    std::string throttle = s.value("throttle", std::string());
    if (throttle == "idle" || throttle.empty()) throttle = "-";
    std::string state = g.value("state", std::string("ok"));
    std::string state_cell = state == "ok" ? Colored(state, kGreen, color) : Colored(state, kRed, color);
    if (!s.value("xids", json::array()).empty()) {
      std::string xids;
      for (const json& x : s["xids"]) xids += (xids.empty() ? "" : ",") + std::to_string(x.value("xid", 0));
      state_cell += Colored(" xid " + xids, kRed, color);
    }
    std::vector<std::string> row = {std::to_string(g.value("index", 0)), g.value("name", std::string("?")),
                                    Or(util), Or(mem), Or(temp), Or(power), Or(pcie), Or(fan), throttle};
    if (risk_shown) {
      auto risk = Field<double>(g, "failure_risk");
      std::string cell = risk ? fmt::format("{:.2f}", *risk) : "-";
      if (risk && *risk >= 0.5) cell = Colored(cell, kRed, color);
      row.push_back(cell);
    }
    row.push_back(state_cell);
    table.AddRow(std::move(row));
  }
  if (risk_shown) return out + table.Render({0, 2, 3, 4, 5, 7, 9});
  return out + table.Render({0, 2, 3, 4, 5, 7});
}

}  // namespace gpuherd::cli
