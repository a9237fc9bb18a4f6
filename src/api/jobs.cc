#include "api/jobs.h"

#include <array>
#include <limits>

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
  if (v.array_id > 0) {
    j["array_id"] = v.array_id;
    j["array_index"] = v.array_index;
    j["array_size"] = v.array_size;
  }
  if (!v.priority_explained.empty()) j["priority_explained"] = v.priority_explained;
  if (v.memory_fence) j["memory_fence"] = *v.memory_fence;
  if (!v.containment.empty()) j["containment"] = v.containment;
}

void to_json(json& j, const LogChunk& v) {
  j = {{"data", v.data},         {"next_offset", v.next_offset}, {"final", v.final},
       {"truncated", v.truncated}, {"attempt", v.attempt},         {"attempts", v.attempts}};
}

void to_json(json& j, const ArraySummary& v) {
  json tasks = json::array();
  for (const auto& t : v.tasks) {
    if (tasks.size() >= static_cast<size_t>(kMaxArrayTasksListed)) break;  // the counts cover the rest
    tasks.push_back({{"id", t.id}, {"index", t.index}, {"state", t.state}});
  }
  j = {{"id", v.id}, {"name", v.name}, {"size", v.size}, {"states", v.states}, {"tasks", std::move(tasks)}};
}

void from_json(const json& j, ArraySummary& v) {
  v.id = j.value("id", int64_t{0});
  v.name = j.value("name", std::string());
  v.size = j.value("size", 0);
  v.states = j.value("states", std::map<std::string, int>());
  v.tasks.clear();
  for (const auto& t : j.value("tasks", json::array())) {
    if (!t.is_object()) continue;
    v.tasks.push_back({t.value("id", int64_t{0}), t.value("index", 0), t.value("state", std::string())});
  }
}

std::string ArrayTaskId(int64_t array_id, int index) { return std::to_string(array_id) + "_" + std::to_string(index); }

std::string JobIdText(const JobRow& job) {
  return job.array_id > 0 ? ArrayTaskId(job.array_id, job.array_index) : std::to_string(job.id);
}

void to_json(json& j, const CancelOutcome& v) {
  json skipped = json::array();
  for (const auto& s : v.skipped) skipped.push_back({{"id", s.id}, {"reason", s.reason}});
  j = {{"cancelled", v.cancelled}, {"stopping", v.stopping}, {"skipped", std::move(skipped)}};
}

namespace {

enum class Column { kUnknown, kId, kName, kUser, kState, kGpuTwentieths, kAssignedGpus, kPriority, kSubmitted,
                    kStarted, kEnded, kReason, kArrayId, kArrayIndex };

Column ColumnNamed(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, Column>, 13> kNames = {{
      {"id", Column::kId},
      {"name", Column::kName},
      {"user", Column::kUser},
      {"state", Column::kState},
      {"gpu_twentieths", Column::kGpuTwentieths},
      {"assigned_gpus", Column::kAssignedGpus},
      {"priority", Column::kPriority},
      {"submitted", Column::kSubmitted},
      {"started", Column::kStarted},
      {"ended", Column::kEnded},
      {"reason", Column::kReason},
      {"array_id", Column::kArrayId},
      {"array_index", Column::kArrayIndex},
  }};
  for (const auto& [n, c] : kNames) {
    if (n == name) return c;
  }
  return Column::kUnknown;
}

// nlohmann's SAX interface over the compact listing. Depth counts the open
// containers: 1 the body, 2 "columns" or "rows", 3 a row, 4 a row's GPU list.
class TableReader : public nlohmann::json_sax<json> {
 public:
  JobTable table;
  std::string error;
  bool saw_columns = false, saw_rows = false, saw_now = false;

  bool null() override { return Scalar(std::nullopt, nullptr, "null", /*is_null=*/true); }
  bool boolean(bool) override { return Scalar(std::nullopt, nullptr, "a boolean"); }
  bool number_integer(number_integer_t v) override { return Scalar(v, nullptr, "a number"); }
  bool number_unsigned(number_unsigned_t v) override {
    if (v > static_cast<number_unsigned_t>(std::numeric_limits<int64_t>::max())) return Fail("a number out of range");
    return Scalar(static_cast<int64_t>(v), nullptr, "a number");
  }
  bool number_float(number_float_t, const string_t&) override { return Scalar(std::nullopt, nullptr, "a fraction"); }
  bool string(string_t& v) override { return Scalar(std::nullopt, &v, "a string"); }
  bool binary(binary_t&) override { return Fail("binary data"); }

  bool start_object(std::size_t) override {
    if (skip_ != 0 || SkipsCell()) return Open();
    if (depth_ != 0 && section_ != Section::kOther) return Fail("an object inside the listing's " + key_);
    return Open();
  }
  bool end_object() override { return Close(); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      key_ = k;
      section_ = k == "columns" ? Section::kColumns : k == "rows" ? Section::kRows : k == "now" ? Section::kNow
                                                                                             : Section::kOther;
    }
    return true;
  }
  bool start_array(std::size_t) override {
    if (skip_ != 0 || SkipsCell()) return Open();
    if (depth_ == 0) return Fail("an array where the listing's object belongs");
    if (section_ == Section::kRows) {
      if (depth_ == 2) {
        if (!saw_columns) return Fail("rows before the columns");
        table.jobs.emplace_back();
        column_ = 0;
      } else if (depth_ == 3) {
        if (ColumnAt(column_) != Column::kAssignedGpus) return Fail("a list in column " + std::to_string(column_));
      } else if (depth_ != 1) {
        return Fail("a list inside a row's GPU list");
      }
    } else if (section_ == Section::kColumns && depth_ != 1) {
      return Fail("a list among the columns");
    }
    return Open();
  }
  bool end_array() override {
    if (skip_ == 0 && section_ == Section::kRows && depth_ == 4) ++column_;  // the GPU list was one cell
    if (depth_ == 2 && section_ == Section::kColumns) saw_columns = true;
    if (depth_ == 2 && section_ == Section::kRows) saw_rows = true;
    return Close();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    if (error.empty()) error = fmt::format("not JSON at byte {}: {}", position, e.what());
    return false;
  }

 private:
  enum class Section { kOther, kColumns, kRows, kNow };

  bool Open() {
    if (++depth_ > 4) return Fail("more than 4 levels of nesting");
    return true;
  }
  bool Close() {
    if (skip_ != 0 && depth_ == skip_) {  // the skipped cell ends
      skip_ = 0;
      ++column_;
    }
    --depth_;
    return true;
  }
  // A list or object in a column this reader does not know (a newer
  // daemon's) is one cell, skipped whole.
  bool SkipsCell() {
    if (section_ != Section::kRows || depth_ != 3 || ColumnAt(column_) != Column::kUnknown) return false;
    skip_ = depth_ + 1;
    return true;
  }
  bool Fail(const std::string& what) {
    if (error.empty()) error = "unexpected " + what;
    return false;
  }
  Column ColumnAt(size_t i) const { return i < columns_.size() ? columns_[i] : Column::kUnknown; }

  // A scalar where it stands: a column's name, a cell, a GPU, "now", or
  // something of another section, ignored.
  bool Scalar(std::optional<int64_t> number, string_t* text, const char* what, bool is_null = false) {
    if (depth_ == 0) return Fail(std::string(what) + " where the listing's object belongs");
    if (skip_ != 0) return true;
    if (depth_ == 1) {
      if (section_ != Section::kNow) return true;
      if (!number) return Fail(std::string(what) + " as \"now\"");
      table.now = *number;
      saw_now = true;
      return true;
    }
    if (section_ == Section::kColumns && depth_ == 2) {
      if (!text) return Fail(std::string(what) + " among the columns");
      columns_.push_back(ColumnNamed(*text));
      return true;
    }
    if (section_ != Section::kRows) return true;
    if (depth_ == 2) return Fail(std::string(what) + " where a row belongs");
    JobRow& job = table.jobs.back();
    if (depth_ == 4) {
      if (!number || *number < std::numeric_limits<int>::min() || *number > std::numeric_limits<int>::max()) {
        return Fail(std::string(what) + " in a row's GPU list");
      }
      job.assigned_gpus.push_back(static_cast<int>(*number));
      return true;
    }
    const Column column = ColumnAt(column_++);
    if (column == Column::kUnknown || is_null) return true;  // a column of a newer daemon, or no value
    auto as_int = [&](int* out) {
      if (!number || *number < std::numeric_limits<int>::min() || *number > std::numeric_limits<int>::max()) {
        return Fail(std::string(what) + " in column " + std::to_string(column_ - 1));
      }
      *out = static_cast<int>(*number);
      return true;
    };
    auto as_int64 = [&](int64_t* out) {
      if (!number) return Fail(std::string(what) + " in column " + std::to_string(column_ - 1));
      *out = *number;
      return true;
    };
    auto as_text = [&](std::string* out) {
      if (!text) return Fail(std::string(what) + " in column " + std::to_string(column_ - 1));
      *out = std::move(*text);
      return true;
    };
    switch (column) {
      case Column::kId: return as_int64(&job.id);
      case Column::kName: return as_text(&job.name);
      case Column::kUser: return as_text(&job.user);
      case Column::kState: return as_text(&job.state);
      case Column::kGpuTwentieths: return as_int(&job.gpu_twentieths);
      case Column::kAssignedGpus: return Fail(std::string(what) + " where a GPU list belongs");
      case Column::kPriority: return as_int(&job.priority);
      case Column::kSubmitted: return as_int64(&job.submitted);
      case Column::kStarted: return as_int64(&job.started);
      case Column::kEnded: return as_int64(&job.ended);
      case Column::kReason: return as_text(&job.reason);
      case Column::kArrayId: return as_int64(&job.array_id);
      case Column::kArrayIndex: return as_int(&job.array_index);
      case Column::kUnknown: break;
    }
    return true;
  }

  int depth_ = 0;
  Section section_ = Section::kOther;
  std::string key_;
  std::vector<Column> columns_;
  size_t column_ = 0;
  int skip_ = 0;  // the depth of the cell being skipped, or 0
};

}  // namespace

Result<JobTable> ParseJobTable(std::string_view body) {
  TableReader reader;
  const bool ok = json::sax_parse(body.begin(), body.end(), &reader, json::input_format_t::json, /*strict=*/true);
  if (!ok) return InvalidArgument("cannot read the job listing: " + (reader.error.empty() ? "not JSON" : reader.error));
  if (!reader.saw_columns || !reader.saw_rows || !reader.saw_now) {
    return InvalidArgument("cannot read the job listing: it has no columns, rows or now");
  }
  return std::move(reader.table);
}

Result<JobTable> JobTableFromFullListing(const json& reply, TimeMs clock_now) {
  const auto jobs = reply.is_object() ? reply.find("jobs") : reply.end();
  if (!reply.is_object() || jobs == reply.end() || !jobs->is_array()) {
    return InvalidArgument("cannot read the job listing: it is neither the compact nor the full listing");
  }
  JobTable table;
  TimeMs first_now = 0;
  try {
    for (const json& job : *jobs) {
      if (!job.is_object()) return InvalidArgument("cannot read the job listing: a job is not an object");
      JobView v = job.get<JobView>();
      if (table.jobs.empty()) first_now = v.now;
      table.jobs.push_back(JobRow{.id = v.id, .name = std::move(v.name), .user = std::move(v.user),
                                  .state = std::move(v.state), .reason = std::move(v.reason),
                                  .priority = v.priority, .gpu_twentieths = v.gpu_twentieths,
                                  .assigned_gpus = std::move(v.assigned_gpus), .submitted = v.submitted,
                                  .started = v.started, .ended = v.ended, .array_id = v.array_id,
                                  .array_index = v.array_index});
    }
  } catch (const json::exception& e) {
    return InvalidArgument(std::string("cannot read the job listing: ") + e.what());
  }
  const auto now = reply.find("now");
  table.now = now != reply.end() && now->is_number_integer() ? now->get<TimeMs>()
              : first_now > 0                                  ? first_now
                                                               : clock_now;
  return table;
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
  v.array_id = j.value("array_id", int64_t{0});
  v.array_index = j.value("array_index", 0);
  v.array_size = j.value("array_size", 0);
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

namespace {

// The cells of a job's row, the same for a full view and a table row.
template <typename Job>
std::string RequestedCell(const Job& job) {
  if (job.gpu_twentieths == 0) return "-";
  // 20 → "1", 10 → "0.5", 5 → "0.25", 1 → "0.05".
  if (job.gpu_twentieths % 20 == 0) return std::to_string(job.gpu_twentieths / 20);
  return fmt::format("{:g}", job.gpu_twentieths / 20.0);
}

template <typename Job>
std::string AssignedCell(const Job& job) {
  std::string out;
  for (int g : job.assigned_gpus) out += (out.empty() ? "" : ",") + std::to_string(g);
  return out.empty() ? "-" : out;
}

template <typename Job>
std::string TimeCell(const Job& job, TimeMs now) {
  if (job.state == "pending" || job.state == "held") return FormatDuration(now - job.submitted);
  if (job.state == "running" || job.state == "stopping") return FormatDuration(now - job.started);
  return job.ended > 0 && job.started > 0 ? FormatDuration(job.ended - job.started) : "-";
}

}  // namespace

std::string GpusRequested(const JobView& job) { return RequestedCell(job); }
std::string GpusRequested(const JobRow& job) { return RequestedCell(job); }
std::string GpusAssigned(const JobView& job) { return AssignedCell(job); }
std::string GpusAssigned(const JobRow& job) { return AssignedCell(job); }
std::string JobTime(const JobView& job, TimeMs now) { return TimeCell(job, now); }
std::string JobTime(const JobRow& job, TimeMs now) { return TimeCell(job, now); }

}  // namespace gpuherd::api
