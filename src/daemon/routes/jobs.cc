// /v1/jobs: submit, the queue, one job, its output and metric lines, the
// actions on it, and many jobs cancelled at once (/v1/jobs/cancel). JobService still writes the job JSON (ListBody, Show,
// Logs); the routes pass it through, less what the caller may not read
// (access.h).
#include <algorithm>

#include "daemon/routes/access.h"
#include "daemon/routes/routes.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

// The listing as JobService writes it, with other users' commands left out
// for a caller who is not an admin; ?view=table, the compact listing `ps`
// reads (the same jobs, only the table's columns).
http::Response List(RouteContext& ctx, const http::Request& request, const Caller& caller) {
  std::string state = QueryText(request, "state");
  if (!state.empty() && !sched::ParseJobState(state)) {
    return http::ErrorResponse(400, "unknown state '" + http::Excerpt(state) +
                                        "'; use pending, held, running, stopping, completed, failed or cancelled");
  }
  std::string view = QueryText(request, "view");
  if (!view.empty() && view != "table" && view != "jobs") {
    return http::ErrorResponse(400, "unknown view '" + http::Excerpt(view) + "'; use jobs (the default) or table");
  }
  http::Response response;
  response.body = ctx.jobs->ListBody(QueryFlag(request, "all"), QueryText(request, "user"), state, view == "table");
  // The table's columns hold nothing private (api::kJobTableColumns).
  if (caller.admin || view == "table") return response;  // the common case stays a copy of text
  auto listing = http::ParseJson(response.body, {.max_bytes = response.body.size(), .max_depth = 64});
  if (!listing.ok()) return StatusResponse(Internal("the job listing is not JSON: " + listing.status().message()));
  for (json& job : (*listing)["jobs"]) {
    if (!MaySeeJobInternals(caller, job.value("user", std::string()))) HideJobInternals(job);
  }
  return JsonResponse(*listing);
}

http::Response Submit(RouteContext& ctx, const http::Request& request, const Caller& caller) {
  auto body = BodyJson(request, "a job spec, a JSON object like {\"command\": [\"python3\", \"train.py\"], \"gpus\": 1}");
  if (!body.ok()) return StatusResponse(body.status());
  if (!body->is_object()) {
    return http::ErrorResponse(400, "body must be a job spec, a JSON object like {\"command\": [\"python3\", \"train.py\"], \"gpus\": 1}");
  }
  if (auto array = body->find("array"); array != body->end()) {
    // {"array": N, ...spec}: N tasks from one spec, in one commit.
    if (!array->is_number_integer()) {
      return http::ErrorResponse(400, "array must be a whole number of tasks, e.g. \"array\": 100");
    }
    int count = static_cast<int>(std::clamp<int64_t>(array->get<int64_t>(), -1, int64_t{sched::kMaxArraySize} + 1));
    body->erase(array);
    auto ids = ctx.jobs->SubmitArray(*body, count, caller);
    if (!ids.ok()) return StatusResponse(ids.status());
    return JsonResponse({{"ids", *ids}}, 201);
  }
  auto id = ctx.jobs->Submit(*body, caller);
  if (!id.ok()) return StatusResponse(id.status());
  return JsonResponse({{"id", *id}}, 201);
}

// The job's JSON when the caller may read its internals; otherwise the
// refusal naming `what`.
Result<json> OwnJob(RouteContext& ctx, int64_t id, const Caller& caller, const std::string& what) {
  auto job = ctx.jobs->Show(id);
  if (!job.ok()) return job.status();
  if (!MaySeeJobInternals(caller, job->value("user", std::string()))) {
    return JobInternalsRefused(caller, what + " of job " + std::to_string(id));
  }
  return job;
}

http::Response Show(RouteContext& ctx, int64_t id, const Caller& caller) {
  auto job = ctx.jobs->Show(id);
  if (!job.ok()) return StatusResponse(job.status());
  const bool may_see = MaySeeJobInternals(caller, job->value("user", std::string()));
  if (!may_see) HideJobInternals(*job);
  if (Status detail = AddJobDetail(ctx, id, may_see, &*job); !detail.ok()) return StatusResponse(detail);
  return JsonResponse(*job);
}

http::Response Logs(RouteContext& ctx, int64_t id, const http::Request& request, const Caller& caller) {
  auto offset = QueryInt(request, "offset", 0, 0, INT64_MAX);
  if (!offset.ok()) return StatusResponse(offset.status());
  auto job = OwnJob(ctx, id, caller, "the output");
  if (!job.ok()) return StatusResponse(job.status());
  std::string stream = QueryText(request, "stream");
  auto logs = ctx.jobs->Logs(id, stream.empty() ? "stdout" : stream, *offset);
  if (!logs.ok()) return StatusResponse(logs.status());
  // Where the job stands, so a client can say why there is no output yet.
  for (const char* key : {"state", "attempt", "reason"}) {
    if (job->contains(key)) (*logs)[key] = (*job)[key];
  }
  return JsonResponse(*logs);
}

// The metric lines a job wrote to GPUHERD_METRICS_FILE, by step.
http::Response Metrics(RouteContext& ctx, int64_t id, const Caller& caller) {
  auto job = OwnJob(ctx, id, caller, "the metric lines");
  if (!job.ok()) return StatusResponse(job.status());
  auto rows = ctx.state->store->ListJobMetrics(id);
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

// POST /v1/jobs/cancel {"ids": [...], "user", "state", "name", "all"}: many
// jobs in one request and one commit (JobService::CancelMany).
http::Response CancelMany(RouteContext& ctx, const http::Request& request, const Caller& caller) {
  const char* kShape = "{\"ids\": [4, 5]} and/or filters {\"user\", \"state\", \"name\", \"all\"}";
  auto body = BodyJson(request, kShape);
  if (!body.ok()) return StatusResponse(body.status());
  if (!body->is_object()) return http::ErrorResponse(400, std::string("body must be ") + kShape);
  JobService::CancelRequest cancel;
  for (const auto& [key, value] : body->items()) {
    if (key == "ids") {
      if (!value.is_array()) return http::ErrorResponse(400, "ids must be an array of job ids");
      cancel.ids.reserve(value.size());
      for (const json& id : value) {
        if (!id.is_number_integer() || id.get<int64_t>() <= 0) {
          return http::ErrorResponse(400, "ids must be positive whole numbers; got " + http::Excerpt(id.dump()));
        }
        cancel.ids.push_back(id.get<int64_t>());
      }
    } else if (key == "user" || key == "state" || key == "name") {
      if (!value.is_string()) return http::ErrorResponse(400, key + " must be a string");
      (key == "user" ? cancel.user : key == "state" ? cancel.state : cancel.name) = value.get<std::string>();
    } else if (key == "all") {
      if (!value.is_boolean()) return http::ErrorResponse(400, "all must be true or false");
      cancel.all = value.get<bool>();
    } else {
      return http::ErrorResponse(400, "unknown field '" + http::Excerpt(key) + "'; use ids, user, state, name or all");
    }
  }
  auto result = ctx.jobs->CancelMany(cancel, caller);
  return result.ok() ? JsonResponse(*result) : StatusResponse(result.status());
}

}  // namespace

http::Response JobRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller) {
  const bool read = IsRead(request);
  if (parts.size() == 2) {
    if (read) return List(ctx, request, caller);
    if (request.method == "POST") return Submit(ctx, request, caller);
    return MethodNotAllowed("GET or POST", "/v1/jobs");
  }
  if (parts.size() > 4) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  if (parts.size() == 3 && parts[2] == "cancel") {
    return request.method == "POST" ? CancelMany(ctx, request, caller) : MethodNotAllowed("POST", "/v1/jobs/cancel");
  }
  auto id = IdFromPath(parts[2], "job id");
  if (!id.ok()) return StatusResponse(id.status());
  if (parts.size() == 3) return read ? Show(ctx, *id, caller) : MethodNotAllowed("GET", "/v1/jobs/{id}");
  const std::string& what = parts[3];
  if (what == "logs") return read ? Logs(ctx, *id, request, caller) : MethodNotAllowed("GET", "/v1/jobs/{id}/logs");
  if (what == "metrics") return read ? Metrics(ctx, *id, caller) : MethodNotAllowed("GET", "/v1/jobs/{id}/metrics");
  if (request.method != "POST") return MethodNotAllowed("POST", "/v1/jobs/{id}/" + http::Excerpt(what));
  auto state = ctx.jobs->Act(*id, what, caller);
  return state.ok() ? JsonResponse({{"id", *id}, {"state", *state}}) : StatusResponse(state.status());
}

}  // namespace gpuherd::daemon::routes
