#include "daemon/metrics_intake.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include "core/safe_file.h"
#include "pipeline/metric_line.h"

namespace gpuherd::daemon {
namespace {

// Bounds one read of one file, so a job that floods its metrics file cannot
// hold the loop; the rest is read at the next poll.
constexpr size_t kMaxReadBytes = 4 << 20;

}  // namespace

void MetricsIntake::Watch(const Source& source, bool catch_up) {
  auto [it, inserted] = watched_.try_emplace(source.job_id);
  Watched& w = it->second;
  w.source = source;
  w.catch_up = catch_up;
  w.detector = source.anomalies && source.anomalies->any()
                   ? std::make_unique<pipeline::AnomalyDetector>(*source.anomalies)
                   : nullptr;
}

void MetricsIntake::Poll(TimeMs now, int64_t job_id, std::vector<store::MetricRecord>* rows,
                         std::vector<Found>* found) {
  if (job_id != 0) {
    auto it = watched_.find(job_id);
    if (it != watched_.end()) Read(now, it->second, rows, found);
    return;
  }
  for (auto& [id, w] : watched_) Read(now, w, rows, found);
}

std::vector<MetricsIntake::Found> MetricsIntake::Tick(TimeMs now) {
  std::vector<Found> found;
  for (auto& [id, w] : watched_) {
    if (!w.detector) continue;
    for (pipeline::Anomaly& a : w.detector->Tick(now)) {
      found.push_back({id, w.source.run_id, w.source.node_id, std::move(a)});
    }
  }
  return found;
}

void MetricsIntake::Read(TimeMs now, Watched& w, std::vector<store::MetricRecord>* rows,
                         std::vector<Found>* found) {
  // The job's user owns the file and its folder: it is opened below the
  // daemon's own folder without following links or blocking, and only as a
  // regular file (core/safe_file.h).
  const size_t slash = w.source.path.rfind('/');
  if (slash == std::string::npos || slash == 0) return;
  const std::string dir = w.source.path.substr(0, slash), name = w.source.path.substr(slash + 1);
  auto chunk = ReadBeneath(dir, name, w.offset, kMaxReadBytes);
  if (chunk.ok() && chunk->size < w.offset) {
    w.offset = 0;  // the file was replaced: start again
    w.partial.clear();
    w.skipping = false;
    chunk = ReadBeneath(dir, name, 0, kMaxReadBytes);
  }
  if (!chunk.ok()) {
    if (chunk.status().code() != Code::kNotFound && !w.refused) {  // not written yet: quiet
      spdlog::warn("job {}: not reading its metrics file: {}", w.source.job_id, chunk.status().message());
      w.refused = true;
    }
    return;
  }
  w.refused = false;
  const std::string& data = chunk->data;
  w.offset += data.size();
  size_t start = 0;
  for (size_t nl = data.find('\n', start); nl != std::string::npos; nl = data.find('\n', start)) {
    if (w.skipping) {
      w.skipping = false;  // the end of an over-long line
    } else if (w.partial.empty()) {
      Take(now, w, std::string_view(data).substr(start, nl - start), rows, found);
    } else {
      w.partial.append(data, start, nl - start);
      Take(now, w, w.partial, rows, found);
      w.partial.clear();
    }
    start = nl + 1;
  }
  if (!w.skipping) w.partial.append(data, start, std::string::npos);
  if (w.partial.size() > pipeline::kMaxMetricLineBytes) {
    // Dropped up to its newline, however much more comes.
    ++w.skipped_long;
    spdlog::warn("job {}: skipped a line of {} longer than {} bytes ({} so far)", w.source.job_id,
                 w.source.path, pipeline::kMaxMetricLineBytes, w.skipped_long);
    w.partial.clear();
    w.skipping = true;
  }
  w.catch_up = false;
}

void MetricsIntake::Take(TimeMs now, Watched& w, std::string_view line, std::vector<store::MetricRecord>* rows,
                         std::vector<Found>* found) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;
  if (line.size() > pipeline::kMaxMetricLineBytes) {
    ++w.skipped_long;
    return;
  }
  auto parsed = pipeline::ParseMetricLine(line);
  if (!parsed.ok()) {
    ++w.skipped_bad;
    if (!w.warned) {
      spdlog::warn("job {}: skipping lines of {} that are not metric lines: {}", w.source.job_id, w.source.path,
                   parsed.status().message());
      w.warned = true;
    }
    return;
  }
  const nlohmann::json& values = *parsed;
  store::MetricRecord r;
  r.job_id = w.source.job_id;
  r.run_id = w.source.run_id;
  r.node_id = w.source.node_id;
  r.attempt = w.source.attempt;
  if (auto step = values.find("step"); step != values.end() && step->is_number_integer()) {
    r.step = step->get<int64_t>();
  }
  r.time = now;
  if (auto t = values.find("time"); t != values.end() && t->is_number() && std::isfinite(t->get<double>())) {
    r.time = static_cast<TimeMs>(std::llround(t->get<double>() * 1000));
  }
  // Non-finite values are written as null: the stored line is plain JSON.
  r.line_json = values.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  rows->push_back(std::move(r));
  if (!w.detector) return;
  for (pipeline::Anomaly& a : w.detector->Observe(now, values)) {
    if (!w.catch_up) found->push_back({w.source.job_id, w.source.run_id, w.source.node_id, std::move(a)});
  }
}

}  // namespace gpuherd::daemon
