#include "daemon/metrics_intake.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/safe_file.h"
#include "pipeline/metric_line.h"

namespace gpuherd::daemon {
namespace {

// A job's share of a round is at least this much, so that a share always
// moves a file on.
constexpr size_t kMinShareBytes = 4096;
// Rounds of sharing in one poll: after the first, what quiet jobs left is
// shared again between the jobs still behind.
constexpr int kMaxSharingPasses = 4;

}  // namespace

void MetricsIntake::Watch(const Source& source, bool catch_up) {
  auto [it, inserted] = watched_.try_emplace(source.job_id);
  Watched& w = it->second;
  w.source = source;
  w.catch_up = catch_up;
  w.catch_up_until.reset();
  w.ended = w.final = false;
  w.detector = source.anomalies && source.anomalies->any()
                   ? std::make_unique<pipeline::AnomalyDetector>(*source.anomalies)
                   : nullptr;
  if (inserted && source.objective && source.early_stop &&
      source.early_stop->kind == pipeline::EarlyStopPolicy::Kind::kAsha) {
    w.next_rung = std::max<int64_t>(1, source.early_stop->grace);
  }
}

void MetricsIntake::Poll(TimeMs now, int64_t job_id, std::vector<store::MetricRecord>* rows,
                         std::vector<Found>* found) {
  if (job_id != 0) {
    auto it = watched_.find(job_id);
    if (it == watched_.end()) return;
    // A job's attempt ending (or many at once) takes no more than its share
    // of a round; the rest is read by the next polls.
    const size_t jobs = std::max<size_t>(watched_.size(), 8);
    Read(now, it->second, {std::max(options_.round_bytes / jobs, kMinShareBytes), std::max<size_t>(options_.round_lines / jobs, 1)},
         rows, found);
    if (!it->second.behind() && it->second.ended && Finish(it->second, rows)) Drop(it);
    return;
  }
  // Round-robin: the poll starts after the job that went first last time,
  // and each job still behind gets an equal share of what is left.
  std::vector<Watched*> wanting;
  wanting.reserve(watched_.size());
  for (auto it = watched_.upper_bound(first_served_); it != watched_.end(); ++it) wanting.push_back(&it->second);
  for (auto it = watched_.begin(); it != watched_.end() && it->first <= first_served_; ++it) {
    wanting.push_back(&it->second);
  }
  if (!wanting.empty()) first_served_ = wanting.front()->source.job_id;
  Budget left{options_.round_bytes, options_.round_lines};
  for (int pass = 0; pass < kMaxSharingPasses && !wanting.empty() && left.bytes > 0 && left.lines > 0; ++pass) {
    const Budget share{std::max(left.bytes / wanting.size(), kMinShareBytes),
                       std::max<size_t>(left.lines / wanting.size(), 1)};
    std::vector<Watched*> still;
    for (Watched* w : wanting) {
      if (left.bytes == 0 || left.lines == 0) break;
      const Budget took = Read(now, *w, {std::min(share.bytes, left.bytes), std::min(share.lines, left.lines)}, rows, found);
      left.bytes -= std::min(took.bytes, left.bytes);
      left.lines -= std::min(took.lines, left.lines);
      if (w->behind() && took.bytes > 0) still.push_back(w);
    }
    wanting = std::move(still);
  }
  for (auto it = watched_.begin(); it != watched_.end();) {
    if (it->second.ended && !it->second.behind() && Finish(it->second, rows)) {
      it = Drop(it);
    } else {
      ++it;
    }
  }
}

void MetricsIntake::EndAttempt(int64_t job_id, bool final, std::vector<store::MetricRecord>* rows) {
  auto it = watched_.find(job_id);
  if (it == watched_.end()) return;
  it->second.ended = true;
  it->second.final = final;
  if (!it->second.behind() && Finish(it->second, rows)) Drop(it);
}

std::map<int64_t, MetricsIntake::Watched>::iterator MetricsIntake::Drop(std::map<int64_t, Watched>::iterator it) {
  if (it->second.changed) dropped_.push_back(CountsRecord(it->first, it->second));
  return watched_.erase(it);
}

bool MetricsIntake::Finish(Watched& w, std::vector<store::MetricRecord>* rows) {
  // The best before the last: the order they were read in.
  if (w.best_held) StoreHeld(w, *std::exchange(w.best_held, std::nullopt), rows);
  if (w.last_held) StoreHeld(w, *std::exchange(w.last_held, std::nullopt), rows);
  return w.final;
}

bool MetricsIntake::behind() const {
  for (const auto& [id, w] : watched_) {
    if (w.behind()) return true;
  }
  return false;
}

std::optional<MetricsIntake::Counts> MetricsIntake::counts(int64_t job_id) const {
  auto it = watched_.find(job_id);
  if (it == watched_.end()) return std::nullopt;
  const Watched& w = it->second;
  return Counts{w.lines, w.kept, w.skipped_long, w.skipped_bad, w.behind()};
}

store::MetricIntakeRecord MetricsIntake::CountsRecord(int64_t job_id, const Watched& w) const {
  store::MetricIntakeRecord r;
  r.job_id = job_id;
  r.lines_read = static_cast<int64_t>(w.lines);
  r.lines_kept = static_cast<int64_t>(w.kept);
  r.lines_skipped = static_cast<int64_t>(w.skipped_long + w.skipped_bad);
  r.behind = w.behind();
  return r;
}

void MetricsIntake::TakeChangedCounts(TimeMs now, std::vector<store::MetricIntakeRecord>* out) {
  for (store::MetricIntakeRecord& r : dropped_) {
    r.updated = now;
    out->push_back(r);
  }
  dropped_.clear();
  for (auto& [id, w] : watched_) {
    if (!w.changed) continue;
    w.changed = false;
    out->push_back(CountsRecord(id, w));
    out->back().updated = now;
  }
}

std::vector<MetricsIntake::Found> MetricsIntake::Tick(TimeMs now) {
  std::vector<Found> found;
  for (auto& [id, w] : watched_) {
    if (!w.detector || w.ended) continue;
    for (pipeline::Anomaly& a : w.detector->Tick(now)) {
      found.push_back({id, w.source.run_id, w.source.node_id, std::move(a)});
    }
  }
  return found;
}

MetricsIntake::Budget MetricsIntake::Read(TimeMs now, Watched& w, Budget budget,
                                          std::vector<store::MetricRecord>* rows, std::vector<Found>* found) {
  // The job's user owns the file and its folder: it is opened below the
  // daemon's own folder without following links or blocking, and only as a
  // regular file (core/safe_file.h).
  const size_t slash = w.source.path.rfind('/');
  if (slash == std::string::npos || slash == 0) return {};
  const std::string dir = w.source.path.substr(0, slash), name = w.source.path.substr(slash + 1);
  auto chunk = ReadBeneath(dir, name, w.offset, budget.bytes);
  if (chunk.ok() && chunk->size < w.offset) {
    w.offset = 0;  // the file was replaced: start again
    w.partial.clear();
    w.skipping = false;
    chunk = ReadBeneath(dir, name, 0, budget.bytes);
  }
  if (!chunk.ok()) {
    if (chunk.status().code() != Code::kNotFound && !w.refused) {  // not written yet: quiet
      spdlog::warn("job {}: not reading its metrics file: {}", w.source.job_id, chunk.status().message());
      w.refused = true;
    }
    w.size = w.offset;  // nothing more can be read now
    return {};
  }
  w.refused = false;
  if (w.catch_up && !w.catch_up_until) w.catch_up_until = chunk->size;
  const std::string& data = chunk->data;
  size_t start = 0, lines = 0;
  for (size_t nl = data.find('\n', start); nl != std::string::npos; nl = data.find('\n', start)) {
    if (lines == budget.lines) break;  // the rest waits for the next read
    ++lines;
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
  // Bytes after the last newline are taken only when every line before
  // them was: otherwise they are read again with the rest.
  const bool all_lines = data.find('\n', start) == std::string::npos;
  if (all_lines) {
    if (!w.skipping) w.partial.append(data, start, std::string::npos);
    start = data.size();
  }
  w.offset += start;
  w.size = std::max(chunk->size, w.offset);
  if (w.partial.size() > pipeline::kMaxMetricLineBytes) {
    // Dropped up to its newline, however much more comes.
    ++w.skipped_long;
    w.changed = true;
    spdlog::warn("job {}: skipped a line of {} longer than {} bytes ({} so far)", w.source.job_id,
                 w.source.path, pipeline::kMaxMetricLineBytes, w.skipped_long);
    w.partial.clear();
    w.skipping = true;
  }
  if (w.catch_up && w.offset >= *w.catch_up_until) w.catch_up = false;
  if (start > 0) w.changed = true;
  return {start, lines};
}

store::MetricRecord MetricsIntake::Row(const Watched& w, const nlohmann::json& values, TimeMs read_at) const {
  store::MetricRecord r;
  r.job_id = w.source.job_id;
  r.run_id = w.source.run_id;
  r.node_id = w.source.node_id;
  r.attempt = w.source.attempt;
  if (auto step = values.find("step"); step != values.end() && step->is_number_integer()) {
    r.step = step->get<int64_t>();
  }
  r.time = read_at;
  if (auto t = values.find("time"); t != values.end() && t->is_number() && std::isfinite(t->get<double>())) {
    r.time = static_cast<TimeMs>(std::llround(t->get<double>() * 1000));
  }
  // Non-finite values are written as null: the stored line is plain JSON.
  r.line_json = values.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

void MetricsIntake::StoreHeld(Watched& w, const Held& held, std::vector<store::MetricRecord>* rows) {
  auto parsed = pipeline::ParseMetricLine(held.line);
  if (!parsed.ok()) return;  // it parsed when it was read
  rows->push_back(Row(w, *parsed, held.read_at));
  ++w.kept;
  w.changed = true;
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
  ++w.lines;
  std::optional<int64_t> step;
  if (auto s = values.find("step"); s != values.end() && s->is_number_integer()) step = s->get<int64_t>();
  const int64_t key = step ? *step : static_cast<int64_t>(w.lines);
  std::optional<double> objective;
  if (w.source.objective) objective = pipeline::MetricValue(values, w.source.objective->metric);

  // Whether to store the line (see the top of the header).
  bool rung = false;
  if (w.next_rung > 0 && objective && step && *step >= w.next_rung) {
    rung = true;
    const int64_t reduction = std::max(2, w.source.early_stop->reduction);
    while (w.next_rung > 0 && w.next_rung <= *step) {
      w.next_rung = w.next_rung > std::numeric_limits<int64_t>::max() / reduction ? 0 : w.next_rung * reduction;
    }
  }
  bool keep = rung || w.kept < options_.full_lines;
  if (!keep && w.kept < options_.max_kept_lines && key % static_cast<int64_t>(w.stride) == 0 &&
      (!w.last_key || key > *w.last_key)) {
    keep = true;
    if (++w.stride_kept >= options_.phase_lines && w.stride <= (uint64_t{1} << 62)) {
      w.stride *= 2;
      w.stride_kept = 0;
    }
  }
  const bool better = objective && (!w.best || pipeline::Better(*objective, *w.best, w.source.objective->mode));
  if (keep) {
    // A better value read before this line goes first.
    if (w.best_held) StoreHeld(w, *std::exchange(w.best_held, std::nullopt), rows);
    if (better) w.best = objective;
    w.last_held.reset();
    w.last_key = key;
    rows->push_back(Row(w, values, now));
    ++w.kept;
  } else {
    Held held{std::string(line), now};
    if (better) {
      w.best = objective;
      w.best_held = std::move(held);
      w.last_held.reset();  // this line is the latest, held as the best
    } else {
      w.last_held = std::move(held);
    }
  }
  if (!w.detector) return;
  for (pipeline::Anomaly& a : w.detector->Observe(now, values)) {
    if (!w.catch_up) found->push_back({w.source.job_id, w.source.run_id, w.source.node_id, std::move(a), w.ended});
  }
}

}  // namespace gpuherd::daemon
