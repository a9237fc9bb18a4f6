#include "api/acct.h"

#include <algorithm>
#include <map>

namespace gpuherd::api {
namespace {

using nlohmann::json;

// Adds `b` into `a`, keeping the utilization mean weighted by GPU time held.
void Add(AcctUsage& a, double& a_weight, const AcctUsage& b, double b_weight) {
  a.attempts += b.attempts;
  a.gpu_hours += b.gpu_hours;
  a.measured_gpu_hours += b.measured_gpu_hours;
  a.used_gpu_hours += b.used_gpu_hours;
  if (b.mean_gpu_util) {
    if (!a.mean_gpu_util || a_weight + b_weight <= 0) {
      a.mean_gpu_util = a.mean_gpu_util ? (*a.mean_gpu_util + *b.mean_gpu_util) / 2 : *b.mean_gpu_util;
    } else {
      a.mean_gpu_util = (*a.mean_gpu_util * a_weight + *b.mean_gpu_util * b_weight) / (a_weight + b_weight);
    }
    a_weight += b_weight;
  }
  if (b.peak_gpu_mem_bytes) a.peak_gpu_mem_bytes = std::max(a.peak_gpu_mem_bytes.value_or(0), *b.peak_gpu_mem_bytes);
}

template <typename T>
json Optional(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

template <typename T>
std::optional<T> ReadOptional(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<T>();
}

}  // namespace

AcctReport Account(const std::vector<store::JobRecord>& jobs, const std::vector<store::AttemptRecord>& attempts,
                   TimeMs since, TimeMs now, const std::string& user) {
  AcctReport report;
  report.since = since;
  report.now = now;
  report.user = user;
  std::map<int64_t, AcctJob> by_id;
  for (const store::JobRecord& j : jobs) {
    AcctJob a;
    a.id = j.id;
    a.name = j.name;
    a.user = j.user;
    a.state = j.state;
    a.submitted = j.submitted;
    a.ended = (j.state == "completed" || j.state == "failed" || j.state == "cancelled") ? j.ended : 0;
    // Rows from before attempts were recorded know only the last start.
    if (j.attempt == 1 && j.started > 0) a.first_started = j.started;
    by_id[j.id] = std::move(a);
  }
  for (const store::AttemptRecord& r : attempts) {
    auto it = by_id.find(r.job_id);
    if (it == by_id.end()) continue;
    AcctJob& job = it->second;
    if (r.started > 0 && (job.first_started == 0 || r.started < job.first_started)) job.first_started = r.started;
    AcctUsage one;
    one.attempts = 1;
    const TimeMs end = r.ended > 0 ? r.ended : std::max(now, r.started);
    const double share = r.gpu_twentieths / 20.0;
    one.gpu_hours = share * static_cast<double>(std::max<TimeMs>(0, end - r.started)) / 3.6e6;
    if (r.gpu_util_mean && share > 0) {
      const double util = std::clamp(*r.gpu_util_mean, 0.0, 100.0);
      one.mean_gpu_util = util;
      one.measured_gpu_hours = one.gpu_hours;
      one.used_gpu_hours = one.gpu_hours * std::min(1.0, util / 100.0 / std::min(1.0, share));
    }
    one.peak_gpu_mem_bytes = r.peak_gpu_mem_bytes;
    Add(job.usage, job.util_weight, one, one.gpu_hours);
  }
  std::map<std::string, AcctUser> users;
  std::map<std::string, double> user_weight;
  std::map<std::string, double> user_wait_sum;
  double total_weight = 0, total_wait = 0;
  report.total.user = "";
  for (auto& [id, job] : by_id) {
    if (job.first_started > 0) {
      job.wait_ms = std::max<DurationMs>(0, job.first_started - job.submitted);
    } else {
      job.wait_ms = std::max<DurationMs>(0, (job.ended > 0 ? job.ended : now) - job.submitted);
    }
    AcctUser& u = users[job.user];
    u.user = job.user;
    ++u.jobs;
    user_wait_sum[job.user] += static_cast<double>(job.wait_ms);
    Add(u.usage, user_weight[job.user], job.usage, job.util_weight);
    ++report.total.jobs;
    total_wait += static_cast<double>(job.wait_ms);
    Add(report.total.usage, total_weight, job.usage, job.util_weight);
    report.jobs.push_back(job);
  }
  for (auto& [name, u] : users) {
    u.wait_ms_mean = static_cast<DurationMs>(user_wait_sum[name] / u.jobs);
    report.users.push_back(u);
  }
  if (report.total.jobs > 0) report.total.wait_ms_mean = static_cast<DurationMs>(total_wait / report.total.jobs);
  return report;
}

void to_json(json& j, const AcctUsage& u) {
  j = json{{"attempts", u.attempts},
           {"gpu_hours", u.gpu_hours},
           {"measured_gpu_hours", u.measured_gpu_hours},
           {"used_gpu_hours", u.used_gpu_hours},
           {"mean_gpu_util", Optional(u.mean_gpu_util)},
           {"peak_gpu_mem_bytes", Optional(u.peak_gpu_mem_bytes)},
           {"efficiency", Optional(u.efficiency())}};
}

void from_json(const json& j, AcctUsage& u) {
  u.attempts = j.value("attempts", 0);
  u.gpu_hours = j.value("gpu_hours", 0.0);
  u.measured_gpu_hours = j.value("measured_gpu_hours", 0.0);
  u.used_gpu_hours = j.value("used_gpu_hours", 0.0);
  u.mean_gpu_util = ReadOptional<double>(j, "mean_gpu_util");
  u.peak_gpu_mem_bytes = ReadOptional<uint64_t>(j, "peak_gpu_mem_bytes");
}

// A job's and a user's usage are flat in their objects: {"id": 7, "gpu_hours": 2.5, ...}.
void to_json(json& j, const AcctJob& a) {
  j = a.usage;
  j.update(json{{"id", a.id},
                {"name", a.name},
                {"user", a.user},
                {"state", a.state},
                {"submitted", a.submitted},
                {"first_started", a.first_started},
                {"ended", a.ended},
                {"wait_ms", a.wait_ms}});
}

void from_json(const json& j, AcctJob& a) {
  from_json(j, a.usage);
  a.id = j.value("id", int64_t{0});
  a.name = j.value("name", std::string());
  a.user = j.value("user", std::string());
  a.state = j.value("state", std::string());
  a.submitted = j.value("submitted", TimeMs{0});
  a.first_started = j.value("first_started", TimeMs{0});
  a.ended = j.value("ended", TimeMs{0});
  a.wait_ms = j.value("wait_ms", DurationMs{0});
}

void to_json(json& j, const AcctUser& a) {
  j = a.usage;
  j.update(json{{"user", a.user}, {"jobs", a.jobs}, {"wait_ms_mean", a.wait_ms_mean}});
}

void from_json(const json& j, AcctUser& a) {
  from_json(j, a.usage);
  a.user = j.value("user", std::string());
  a.jobs = j.value("jobs", 0);
  a.wait_ms_mean = j.value("wait_ms_mean", DurationMs{0});
}

void to_json(json& j, const AcctReport& r) {
  j = json{{"since", r.since}, {"now", r.now}, {"user", r.user},
           {"jobs", r.jobs},   {"users", r.users}, {"total", r.total}};
}

void from_json(const json& j, AcctReport& r) {
  r.since = j.value("since", TimeMs{0});
  r.now = j.value("now", TimeMs{0});
  r.user = j.value("user", std::string());
  r.jobs = j.value("jobs", std::vector<AcctJob>());
  r.users = j.value("users", std::vector<AcctUser>());
  r.total = j.value("total", AcctUser{});
}

}  // namespace gpuherd::api
