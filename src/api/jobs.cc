#include "api/jobs.h"

#include <fmt/format.h>

namespace gpuherd::api {

using nlohmann::json;

void to_json(json& j, const MemoryFenceView& v) {
  j = {{"state", v.state}, {"share_bytes", v.share_bytes}};
  if (!v.detail.empty()) j["detail"] = v.detail;
  if (v.used_bytes) j["used_bytes"] = *v.used_bytes;
  if (v.fence_share_bytes) j["fence_share_bytes"] = *v.fence_share_bytes;
}

void to_json(json& j, const JobView& v) {
  j = {{"id", v.id},
       {"name", v.name},
       {"user", v.user},
       {"state", v.state},
       {"priority", v.priority},
       {"gpu_twentieths", v.gpu_twentieths},
       {"gpu_mem_bytes", v.gpu_mem_bytes},
       {"assigned_gpus", v.assigned_gpus},
       {"gpu_uuids", v.gpu_uuids},
       {"submitted", v.submitted},
       {"started", v.started},
       {"ended", v.ended},
       {"attempt", v.attempt},
       {"restarts", v.restarts},
       {"fault_restarts", v.fault_restarts},
       {"max_restarts", v.max_restarts},
       {"preemptible", v.preemptible},
       {"time_limit_ms", v.time_limit_ms},
       {"command", v.command},
       {"reason", v.reason},
       {"now", v.now}};
  if (v.exit_code) j["exit_code"] = *v.exit_code;
  if (v.exit_signal) j["exit_signal"] = *v.exit_signal;
  if (!v.logs.empty()) j["logs"] = v.logs;
  if (!v.after.empty()) j["after"] = v.after;
  if (!v.after_any.empty()) j["after_any"] = v.after_any;
  if (!v.after_not_ok.empty()) j["after_not_ok"] = v.after_not_ok;
  if (!v.priority_explained.empty()) j["priority_explained"] = v.priority_explained;
  if (v.memory_fence) j["memory_fence"] = *v.memory_fence;
  if (!v.containment.empty()) j["containment"] = v.containment;
}

void to_json(json& j, const LogChunk& v) {
  j = {{"data", v.data}, {"next_offset", v.next_offset}, {"final", v.final}, {"truncated", v.truncated}};
}

void to_json(json& j, const CancelOutcome& v) {
  json skipped = json::array();
  for (const auto& s : v.skipped) skipped.push_back({{"id", s.id}, {"reason", s.reason}});
  j = {{"cancelled", v.cancelled}, {"stopping", v.stopping}, {"skipped", std::move(skipped)}};
}

void from_json(const json& j, JobView& v) {
  v.id = j.value("id", int64_t{0});
  v.name = j.value("name", std::string());
  v.user = j.value("user", std::string());
  v.state = j.value("state", std::string());
  v.reason = j.value("reason", std::string());
  v.priority = j.value("priority", 0);
  v.gpu_twentieths = j.value("gpu_twentieths", 0);
  v.gpu_mem_bytes = j.value("gpu_mem_bytes", uint64_t{0});
  v.assigned_gpus = j.value("assigned_gpus", std::vector<int>());
  v.gpu_uuids = j.value("gpu_uuids", std::vector<std::string>());
  v.preemptible = j.value("preemptible", false);
  v.time_limit_ms = j.value("time_limit_ms", DurationMs{0});
  v.after = j.value("after", std::vector<int64_t>());
  v.after_any = j.value("after_any", std::vector<int64_t>());
  v.after_not_ok = j.value("after_not_ok", std::vector<int64_t>());
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
  v.containment = j.value("containment", std::string());
  v.now = j.value("now", TimeMs{0});
}

std::string GpusRequested(const JobView& job) {
  if (job.gpu_twentieths == 0) return "-";
  // 20 → "1", 10 → "0.5", 5 → "0.25", 1 → "0.05".
  if (job.gpu_twentieths % 20 == 0) return std::to_string(job.gpu_twentieths / 20);
  return fmt::format("{:g}", job.gpu_twentieths / 20.0);
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
