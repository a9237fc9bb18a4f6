#include "api/jobs.h"

#include <fmt/format.h>

namespace gpuherd::api {

using nlohmann::json;

void from_json(const json& j, JobView& v) {
  v.id = j.value("id", int64_t{0});
  v.name = j.value("name", std::string());
  v.user = j.value("user", std::string());
  v.state = j.value("state", std::string());
  v.reason = j.value("reason", std::string());
  v.priority = j.value("priority", 0);
  v.gpu_tenths = j.value("gpu_tenths", 0);
  v.assigned_gpus = j.value("assigned_gpus", std::vector<int>());
  v.command = j.value("command", std::vector<std::string>());
  v.submitted = j.value("submitted", TimeMs{0});
  v.started = j.value("started", TimeMs{0});
  v.ended = j.value("ended", TimeMs{0});
  v.attempt = j.value("attempt", 0);
  v.restarts = j.value("restarts", 0);
  v.max_restarts = j.value("max_restarts", 0);
  v.fault_restarts = j.value("fault_restarts", 0);
  v.exit_code.reset();
  v.exit_signal.reset();
  if (auto it = j.find("exit_code"); it != j.end() && it->is_number_integer()) v.exit_code = it->get<int>();
  if (auto it = j.find("exit_signal"); it != j.end() && it->is_number_integer()) v.exit_signal = it->get<int>();
  v.priority_explained = j.value("priority_explained", std::string());
  v.logs = j.value("logs", std::string());
  v.now = j.value("now", TimeMs{0});
}

std::string GpusRequested(const JobView& job) {
  if (job.gpu_tenths == 0) return "-";
  if (job.gpu_tenths % 10 == 0) return std::to_string(job.gpu_tenths / 10);
  return fmt::format("0.{}", job.gpu_tenths);
}

std::string GpusAssigned(const JobView& job) {
  std::string out;
  for (int g : job.assigned_gpus) out += (out.empty() ? "" : ",") + std::to_string(g);
  return out.empty() ? "-" : out;
}

std::string JobTime(const JobView& job, TimeMs now) {
  if (job.state == "pending" || job.state == "held") return FormatDuration(now - job.submitted);
  if (job.state == "running" || job.state == "stopping") return FormatDuration(now - job.started);
  return job.ended > 0 && job.started > 0 ? FormatDuration(job.ended - job.started) : "-";
}

}  // namespace gpuherd::api
