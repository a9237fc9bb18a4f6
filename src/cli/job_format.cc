#include "cli/job_format.h"

#include <fmt/format.h>

#include "cli/table.h"

namespace gpuherd::cli {

std::string StateCell(const std::string& state, bool color) {
  if (state == "failed") return Colored(state, kRed, color);
  if (state == "running") return Colored(state, kGreen, color);
  if (state == "stopping" || state == "held") return Colored(state, kYellow, color);
  return state;
}

std::string GpusRequested(const nlohmann::json& job) {
  int tenths = job.value("gpu_tenths", 0);
  if (tenths == 0) return "-";
  if (tenths % 10 == 0) return std::to_string(tenths / 10);
  return fmt::format("0.{}", tenths);
}

std::string GpusAssigned(const nlohmann::json& job) {
  std::string out;
  for (const auto& g : job.value("assigned_gpus", nlohmann::json::array())) {
    out += (out.empty() ? "" : ",") + std::to_string(g.get<int>());
  }
  return out.empty() ? "-" : out;
}

std::string JobTime(const nlohmann::json& job, TimeMs now) {
  std::string state = job.value("state", std::string());
  TimeMs submitted = job.value("submitted", int64_t{0});
  TimeMs started = job.value("started", int64_t{0});
  TimeMs ended = job.value("ended", int64_t{0});
  if (state == "pending" || state == "held") return FormatDuration(now - submitted);
  if (state == "running" || state == "stopping") return FormatDuration(now - started);
  return ended > 0 && started > 0 ? FormatDuration(ended - started) : "-";
}

}  // namespace gpuherd::cli
