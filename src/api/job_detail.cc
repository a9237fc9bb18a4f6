#include "api/job_detail.h"

#include <algorithm>

namespace gpuherd::api {

using nlohmann::json;

void to_json(json& j, const JobSpecView& s) {
  j = json{{"command", s.command},
           {"cwd", s.cwd},
           {"env", s.env},
           {"labels", s.labels},
           {"depends_on", s.depends_on},
           {"gpu_twentieths", s.gpu_twentieths},
           {"gpu_mem_bytes", s.gpu_mem_bytes},
           {"model", s.model},
           {"min_cc", s.min_cc ? json(*s.min_cc) : json(nullptr)},
           {"cpus", s.cpus},
           {"mem_bytes", s.mem_bytes},
           {"priority", s.priority},
           {"time_limit_ms", s.time_limit_ms},
           {"checkpoint_grace_ms", s.checkpoint_grace_ms},
           {"preemptible", s.preemptible},
           {"mixed_models", s.mixed_models},
           {"max_restarts", s.max_restarts}};
}

void from_json(const json& j, JobSpecView& s) {
  s.command = j.value("command", std::vector<std::string>());
  s.cwd = j.value("cwd", std::string());
  s.env = j.value("env", std::map<std::string, std::string>());
  s.labels = j.value("labels", std::map<std::string, std::string>());
  s.depends_on = j.value("depends_on", std::vector<int64_t>());
  s.gpu_twentieths = j.value("gpu_twentieths", 0);
  s.gpu_mem_bytes = j.value("gpu_mem_bytes", uint64_t{0});
  s.model = j.value("model", std::string());
  s.min_cc.reset();
  if (auto it = j.find("min_cc"); it != j.end() && it->is_number_integer()) s.min_cc = it->get<int>();
  s.cpus = j.value("cpus", 0);
  s.mem_bytes = j.value("mem_bytes", uint64_t{0});
  s.priority = j.value("priority", 0);
  s.time_limit_ms = j.value("time_limit_ms", DurationMs{0});
  s.checkpoint_grace_ms = j.value("checkpoint_grace_ms", DurationMs{0});
  s.preemptible = j.value("preemptible", false);
  s.mixed_models = j.value("mixed_models", false);
  s.max_restarts = j.value("max_restarts", 0);
}

void to_json(json& j, const AttemptView& a) {
  j = json{{"attempt", a.attempt},
           {"gpu_uuids", a.gpu_uuids},
           {"gpus", a.gpus},
           {"gpu_twentieths", a.gpu_twentieths},
           {"started", a.started},
           {"ended", a.ended},
           {"end_cause", a.end_cause},
           {"reason", a.reason},
           {"util_samples", a.util_samples},
           {"gpu_util_mean", a.gpu_util_mean ? json(*a.gpu_util_mean) : json(nullptr)},
           {"peak_gpu_mem_bytes", a.peak_gpu_mem_bytes ? json(*a.peak_gpu_mem_bytes) : json(nullptr)}};
  if (a.exit_code) j["exit_code"] = *a.exit_code;
  if (a.exit_signal) j["exit_signal"] = *a.exit_signal;
  if (!a.logs.empty()) j["logs"] = a.logs;
}

void from_json(const json& j, AttemptView& a) {
  a.attempt = j.value("attempt", 0);
  a.gpu_uuids = j.value("gpu_uuids", std::vector<std::string>());
  a.gpus = j.value("gpus", std::vector<int>());
  a.gpu_twentieths = j.value("gpu_twentieths", 0);
  a.started = j.value("started", TimeMs{0});
  a.ended = j.value("ended", TimeMs{0});
  a.end_cause = j.value("end_cause", std::string());
  a.reason = j.value("reason", std::string());
  a.util_samples = j.value("util_samples", 0);
  a.logs = j.value("logs", std::string());
  a.exit_code.reset();
  a.exit_signal.reset();
  a.gpu_util_mean.reset();
  a.peak_gpu_mem_bytes.reset();
  if (auto it = j.find("exit_code"); it != j.end() && it->is_number_integer()) a.exit_code = it->get<int>();
  if (auto it = j.find("exit_signal"); it != j.end() && it->is_number_integer()) a.exit_signal = it->get<int>();
  if (auto it = j.find("gpu_util_mean"); it != j.end() && it->is_number()) a.gpu_util_mean = it->get<double>();
  if (auto it = j.find("peak_gpu_mem_bytes"); it != j.end() && it->is_number_unsigned()) {
    a.peak_gpu_mem_bytes = it->get<uint64_t>();
  }
}

void to_json(json& j, const MetricIntakeView& m) {
  j = json{{"lines_read", m.lines_read},
           {"lines_kept", m.lines_kept},
           {"lines_thinned", std::max<int64_t>(0, m.lines_read - m.lines_kept)},
           {"lines_skipped", m.lines_skipped},
           {"behind", m.behind}};
}

void from_json(const json& j, MetricIntakeView& m) {
  m.lines_read = j.value("lines_read", int64_t{0});
  m.lines_kept = j.value("lines_kept", int64_t{0});
  m.lines_skipped = j.value("lines_skipped", int64_t{0});
  m.behind = j.value("behind", false);
}

namespace {

std::string Grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

}  // namespace

std::string MetricIntakeText(const MetricIntakeView& m) {
  std::string text = Grouped(m.lines_read) + (m.lines_read == 1 ? " line" : " lines") + " read, " +
                     Grouped(m.lines_kept) + " kept";
  if (m.lines_kept < m.lines_read) text += " (thinned)";
  if (m.lines_skipped > 0) text += "; " + Grouped(m.lines_skipped) + " skipped (too long or not a metric line)";
  if (m.behind) text += "; reading behind the file (a flood is read over several rounds)";
  return text;
}

std::vector<std::string> AttemptGpuUuids(const store::AttemptRecord& r) {
  std::vector<std::string> uuids;
  json parsed = json::parse(r.gpus_json, nullptr, false);
  if (!parsed.is_array()) return uuids;
  for (const auto& u : parsed) {
    if (u.is_string()) uuids.push_back(u.get<std::string>());
  }
  return uuids;
}

AttemptView AttemptViewOf(const store::AttemptRecord& r, const std::vector<int>& positions) {
  AttemptView a;
  a.attempt = r.attempt;
  a.gpu_uuids = AttemptGpuUuids(r);
  a.gpus = positions;
  a.gpu_twentieths = r.gpu_twentieths;
  a.started = r.started;
  a.ended = r.ended;
  a.end_cause = r.end_cause;
  a.exit_code = r.exit_code;
  a.exit_signal = r.exit_signal;
  a.reason = r.reason;
  a.util_samples = r.util_samples;
  a.gpu_util_mean = r.gpu_util_mean;
  a.peak_gpu_mem_bytes = r.peak_gpu_mem_bytes;
  return a;
}

std::string EndCauseText(const std::string& cause) {
  if (cause.empty()) return "running";
  if (cause == "gpu_fault") return "GPU fault";
  if (cause == "gpu_memory") return "over its GPU memory share";
  if (cause == "out_of_memory") return "out of memory";
  std::string text = cause;
  for (char& c : text) {
    if (c == '_') c = ' ';
  }
  return text;
}

}  // namespace gpuherd::api
