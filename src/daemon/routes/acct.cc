// /v1/acct: accounting like Slurm's sacct (api/acct.h), and what `show`
// adds to /v1/jobs/{id}: the job's whole spec and every attempt.
#include <algorithm>

#include "api/acct.h"
#include "api/job_detail.h"
#include "daemon/routes/access.h"
#include "daemon/routes/routes.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

// The most jobs one answer adds up (the newest).
constexpr int64_t kMaxAcctJobs = 100000;
constexpr DurationMs kDefaultAcctWindow = 7 * 24 * kHourMs;

std::vector<int> Positions(const DaemonState& state, const std::vector<std::string>& uuids) {
  std::vector<int> positions;
  for (const std::string& uuid : uuids) {
    int found = -1;
    for (size_t i = 0; i < state.fleet.gpus.size(); ++i) {
      if (state.fleet.gpus[i].uuid == uuid) found = static_cast<int>(i);
    }
    positions.push_back(found);
  }
  return positions;
}

// A running attempt as the attempt log knows it now (its stored record is
// up to a minute old).
void UseLive(const RouteContext& ctx, store::AttemptRecord* r) {
  if (r->ended != 0 || ctx.attempts == nullptr) return;
  auto live = ctx.attempts->Running(r->job_id);
  if (live && live->attempt == r->attempt) *r = *live;
}

api::JobSpecView SpecView(const sched::JobSpec& s) {
  api::JobSpecView v;
  v.command = s.argv;
  v.cwd = s.cwd;
  v.env = s.env;
  v.labels = s.labels;
  v.depends_on.assign(s.depends_on.begin(), s.depends_on.end());
  v.gpu_twentieths = s.gpu_twentieths;
  v.gpu_mem_bytes = s.gpu_mem_bytes;
  v.model = s.model;
  v.min_cc = s.min_cc;
  v.cpus = s.cpus;
  v.mem_bytes = s.mem_bytes;
  v.priority = s.priority;
  v.time_limit_ms = s.time_limit;
  v.checkpoint_grace_ms = s.checkpoint_grace;
  v.preemptible = s.preemptible;
  v.mixed_models = s.mixed_models;
  v.max_restarts = s.max_restarts;
  return v;
}

}  // namespace

Status AddJobDetail(RouteContext& ctx, int64_t id, bool may_see_internals, json* job) {
  auto stored = ctx.state->store->GetJob(id);
  if (!stored.ok()) return stored.status();
  if (stored->has_value()) {
    json body = json::parse((*stored)->spec_json, nullptr, /*allow_exceptions=*/false);
    if (body.is_object()) {
      auto spec = sched::ParseJobSpec(body.value("spec", json::object()));
      if (spec.ok()) {
        json view = SpecView(*spec);
        if (!may_see_internals) {
          for (const char* field : {"command", "cwd", "env"}) view.erase(field);
        }
        (*job)["spec"] = std::move(view);
      } else {
        (*job)["spec_error"] = spec.status().message();
      }
    }
  }
  auto rows = ctx.state->store->ListAttempts(id);
  if (!rows.ok()) return rows.status();
  // An attempt that started or ended in this turn is in the turn's batch, not
  // yet in the store: the job's state already says so, and its attempts must
  // agree. The batch's later record of an attempt supersedes an earlier one.
  for (const store::AttemptRecord& pending : ctx.state->batch.attempts) {
    if (pending.job_id != id) continue;
    auto same = std::find_if(rows->begin(), rows->end(),
                             [&](const store::AttemptRecord& r) { return r.attempt == pending.attempt; });
    if (same != rows->end()) {
      *same = pending;
    } else {
      rows->push_back(pending);
    }
  }
  std::stable_sort(rows->begin(), rows->end(),
                   [](const store::AttemptRecord& a, const store::AttemptRecord& b) { return a.attempt < b.attempt; });
  json attempts = json::array();
  for (store::AttemptRecord& r : *rows) {
    UseLive(ctx, &r);
    api::AttemptView view = api::AttemptViewOf(r, Positions(*ctx.state, api::AttemptGpuUuids(r)));
    // Where its output is, for those who may read it (routes/access.h).
    if (may_see_internals) view.logs = ctx.jobs->OutputDir(id, r.attempt);
    attempts.push_back(std::move(view));
  }
  (*job)["attempts"] = std::move(attempts);
  // How far its metrics file was read: live while the intake reads it,
  // else as last stored.
  std::optional<api::MetricIntakeView> intake;
  if (auto live = ctx.pipelines ? ctx.pipelines->MetricIntake(id) : std::nullopt) {
    intake = api::MetricIntakeView{static_cast<int64_t>(live->lines_read), static_cast<int64_t>(live->lines_kept),
                                   static_cast<int64_t>(live->skipped_long + live->skipped_invalid), live->behind};
  } else {
    auto stored_intake = ctx.state->store->GetMetricIntake(id);
    if (!stored_intake.ok()) return stored_intake.status();
    // Counts of this turn are not stored yet: the batch's latest goes first.
    std::optional<store::MetricIntakeRecord> r = *stored_intake;
    for (const store::MetricIntakeRecord& pending : ctx.state->batch.metric_intake) {
      if (pending.job_id == id) r = pending;
    }
    if (r) intake = api::MetricIntakeView{r->lines_read, r->lines_kept, r->lines_skipped, r->behind};
  }
  if (intake && (intake->lines_read > 0 || intake->lines_skipped > 0 || intake->behind)) (*job)["metrics"] = *intake;
  return Status::Ok();
}

http::Response AcctRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller) {
  if (parts.size() != 2) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  if (!IsRead(request)) return MethodNotAllowed("GET", "/v1/acct");
  const TimeMs now = ctx.state->clock->Now();
  auto since = QueryInt(request, "since", std::max<TimeMs>(0, now - kDefaultAcctWindow), 0, INT64_MAX);
  if (!since.ok()) return StatusResponse(since.status());
  auto limit = QueryInt(request, "limit", kMaxAcctJobs, 1, kMaxAcctJobs);
  if (!limit.ok()) return StatusResponse(limit.status());
  const std::string user = QueryText(request, "user");
  if (user.size() > 256 || std::any_of(user.begin(), user.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    return http::ErrorResponse(400, "user must be a user name (at most 256 characters, no control characters)");
  }
  store::AcctFilter filter;
  filter.since = *since;
  filter.user = user;
  filter.limit = static_cast<int>(*limit);
  auto rows = ctx.state->store->ListAccounting(filter);
  if (!rows.ok()) return StatusResponse(rows.status());
  for (store::AttemptRecord& r : rows->second) UseLive(ctx, &r);
  return JsonResponse(api::Account(rows->first, rows->second, *since, now, user));
}

}  // namespace gpuherd::daemon::routes
