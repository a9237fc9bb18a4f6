#include "daemon/dashboard_api.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "daemon/api.h"
#include "pipeline/report.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;

constexpr int64_t kMaxHistorySeconds = 24 * 3600;

// A positive integer id from a path part; 0 when it is not one.
int64_t ParseId(const std::string& text) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  return ec == std::errc() && ptr == text.data() + text.size() && id > 0 ? id : 0;
}

// One decimal is all a chart shows; it keeps an hour of 8 GPUs near 200 KB.
json Rounded(double v) { return std::round(v * 10.0) / 10.0; }
json Value(const std::optional<double>& v) { return v ? Rounded(*v) : json(nullptr); }

// One GPU's series as columns; each reading appends one row.
struct Columns {
  json time = json::array(), util = json::array(), mem = json::array(), temp = json::array(),
       power = json::array();
  void Add(TimeMs t, json u, json m, json c, json p) {
    time.push_back(t);
    util.push_back(std::move(u));
    mem.push_back(std::move(m));
    temp.push_back(std::move(c));
    power.push_back(std::move(p));
  }
};

}  // namespace

std::optional<http::Response> DashboardApi::Handle(const http::Request& request, const Caller& caller) {
  if (request.method != "GET" && request.method != "HEAD") return std::nullopt;
  const std::vector<std::string> parts = SplitPath(request.path);
  if (parts.size() < 3 || parts[0] != "v1") return std::nullopt;
  if (parts.size() == 3 && parts[1] == "gpus" && parts[2] == "history") return History(request);
  if (parts.size() == 4 && parts[1] == "jobs" && parts[3] == "metrics") {
    const int64_t id = ParseId(parts[2]);
    if (id == 0) return http::ErrorResponse(400, "job id must be a positive integer, got '" + parts[2] + "'");
    return JobMetrics(id);
  }
  if (parts.size() == 4 && parts[1] == "pipelines" && parts[3] == "report" && pipelines_) {
    const int64_t id = ParseId(parts[2]);
    if (id == 0) return http::ErrorResponse(400, "pipeline run id must be a positive integer, got '" + parts[2] + "'");
    return Report(id, request, caller);
  }
  return std::nullopt;
}

http::Response DashboardApi::History(const http::Request& request) {
  int64_t seconds = 3600, since = 0;
  std::string error;
  if (!QueryInt(request, "seconds", &seconds, &error) || !QueryInt(request, "since", &since, &error)) {
    return http::ErrorResponse(400, error);
  }
  if (seconds < 1 || seconds > kMaxHistorySeconds) {
    return http::ErrorResponse(400, "seconds must be between 1 and " + std::to_string(kMaxHistorySeconds));
  }
  const TimeMs now = state_->clock->Now();
  const TimeMs window_start = now - seconds * 1000;
  const TimeMs from = std::max(window_start, since + 1);
  const DurationMs interval = std::max<DurationMs>(state_->sample_interval, 1);
  // Readings lie on a fixed grid, so the window holds at most this many.
  const size_t wanted = static_cast<size_t>(std::max<int64_t>(0, now - from) / interval + 2);

  json gpus = json::array();
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    const gpu::GpuInfo& info = state_->fleet.gpus[i];
    std::vector<gpu::GpuSample> recent = state_->telemetry->Recent(static_cast<int>(i), wanted);
    Columns c;
    // A ring that starts well after the window's start (the daemon restarted
    // within the hour) is preceded by the stored minutes' means.
    const TimeMs ring_start = recent.empty() ? now : recent.front().time;
    if (since == 0 && ring_start - from > 2 * interval) {
      auto rollups = state_->store->QueryRollups(info.uuid, from - 60 * 1000, ring_start, 1440);
      if (rollups.ok()) {
        for (const store::RollupRecord& r : *rollups) {
          const TimeMs t = r.minute + 30 * 1000;  // the minute's middle
          if (t < from || t >= ring_start) continue;
          auto mean = [&](store::RollupMetric m) {
            const auto& stat = r.stat(m);
            return stat ? Rounded(stat->mean) : json(nullptr);
          };
          json mem = nullptr;
          if (const auto& used = r.stat(store::RollupMetric::kMemUsedMib); used && info.memory_total_bytes > 0) {
            mem = Rounded(used->mean * 1048576.0 * 100.0 / static_cast<double>(info.memory_total_bytes));
          }
          c.Add(t, mean(store::RollupMetric::kGpuUtil), mem, mean(store::RollupMetric::kTempC),
                mean(store::RollupMetric::kPowerW));
        }
      }
    }
    for (const gpu::GpuSample& s : recent) {
      if (s.time < from) continue;
      json mem = nullptr;
      const uint64_t total = s.mem_total_bytes.value_or(info.memory_total_bytes);
      if (s.mem_used_bytes && total > 0) mem = Rounded(static_cast<double>(*s.mem_used_bytes) * 100.0 / total);
      c.Add(s.time, Value(s.gpu_util_pct), mem, Value(s.temp_c), Value(s.power_w));
    }
    gpus.push_back({{"index", info.index},
                    {"uuid", info.uuid},
                    {"time", std::move(c.time)},
                    {"gpu_util_pct", std::move(c.util)},
                    {"mem_used_pct", std::move(c.mem)},
                    {"temp_c", std::move(c.temp)},
                    {"power_w", std::move(c.power)}});
  }
  return JsonResponse({{"now", now}, {"from", from}, {"interval_ms", interval}, {"gpus", std::move(gpus)}});
}

http::Response DashboardApi::JobMetrics(int64_t id) {
  auto job = jobs_->Show(id);
  if (!job.ok()) return StatusResponse(job.status());
  auto rows = state_->store->ListJobMetrics(id);
  if (!rows.ok()) return StatusResponse(rows.status());
  json lines = json::array();
  for (const store::MetricRecord& m : *rows) {
    json values = json::parse(m.line_json, nullptr, /*allow_exceptions=*/false);
    if (!values.is_object()) continue;
    lines.push_back({{"step", m.step ? json(*m.step) : json(nullptr)},
                     {"time", m.time},
                     {"attempt", m.attempt},
                     {"values", std::move(values)}});
  }
  return JsonResponse({{"job_id", id}, {"metrics", std::move(lines)}});
}

http::Response DashboardApi::Report(int64_t id, const http::Request& request, const Caller& caller) {
  std::string format = "html";
  if (auto it = request.query.find("format"); it != request.query.end()) format = it->second;
  if (format != "html" && format != "md" && format != "csv") {
    return http::ErrorResponse(400, "format must be html, md or csv, got '" + format + "'");
  }
  auto run = pipelines_->Show(id, caller);
  if (!run.ok()) return StatusResponse(run.status());
  auto metrics = pipelines_->Metrics(id, "", caller);
  if (!metrics.ok()) return StatusResponse(metrics.status());
  pipeline::ReportData data;
  data.pipeline = std::move(*run);
  // GPU-hours count a node's share of a GPU, which its job knows.
  if (data.pipeline.contains("nodes") && data.pipeline["nodes"].is_array()) {
    for (json& node : data.pipeline["nodes"]) {
      const int64_t job_id = node.value("job_id", int64_t{0});
      if (job_id <= 0 || node.contains("gpu_tenths")) continue;
      if (auto job = jobs_->Show(job_id); job.ok() && job->contains("gpu_tenths")) {
        node["gpu_tenths"] = (*job)["gpu_tenths"];
      }
    }
  }
  data.metrics = metrics->value("metrics", json::array());
  data.now = state_->clock->Now();
  auto report = pipeline::Summarize(data);
  if (!report.ok()) return StatusResponse(report.status());
  http::Response response;
  const std::string file = "pipeline-" + std::to_string(id) + "-report." + format;
  if (format == "html") {
    response.content_type = "text/html; charset=utf-8";
    response.body = pipeline::RenderHtml(*report, pipeline::EmbeddedChartLibrary());
  } else if (format == "md") {
    response.content_type = "text/markdown; charset=utf-8";
    response.body = pipeline::RenderMarkdown(*report);
  } else {
    response.content_type = "text/csv; charset=utf-8";
    response.body = pipeline::RenderCsv(*report);
  }
  response.headers = {{"Content-Disposition", "attachment; filename=\"" + file + "\""}};
  return response;
}

}  // namespace gpuherd::daemon
