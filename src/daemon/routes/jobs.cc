// /v1/jobs: submit, the queue, one job, its output and metric lines, the
// actions on it, and many jobs cancelled at once (/v1/jobs/cancel). Requests
// become typed calls on JobService (a parsed sched::JobSpec, a CancelRequest)
// and its typed answers (api/jobs.h) become JSON here, less what the caller
// may not read (access.h).
#include <algorithm>
#include <charconv>
#include <optional>

#include <fmt/format.h>

#include "daemon/routes/access.h"
#include "daemon/routes/routes.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

// The listing, with other users' commands left out for a caller who is not
// an admin; ?view=table, the compact listing `ps` reads (the same jobs, only
// the table's columns, which hold nothing private).
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
  response.body = ctx.job_listing->Body(
      ctx.jobs->List(QueryFlag(request, "all"), QueryText(request, "user"), state), caller,
      view == "table" ? JobListingWriter::Form::kTable : JobListingWriter::Form::kJobs);
  return response;
}

http::Response Submit(RouteContext& ctx, const http::Request& request, const Caller& caller) {
  auto body = BodyJson(request, "a job spec, a JSON object like {\"command\": [\"python3\", \"train.py\"], \"gpus\": 1}");
  if (!body.ok()) return StatusResponse(body.status());
  if (!body->is_object()) {
    return http::ErrorResponse(400, "body must be a job spec, a JSON object like {\"command\": [\"python3\", \"train.py\"], \"gpus\": 1}");
  }
  // Who submits is checked before what: a caller without credentials learns
  // nothing from the spec's errors.
  if (!caller.authenticated) {
    return StatusResponse(Unauthenticated("submitting needs the unix socket or the API token"));
  }
  std::optional<int> count;
  if (auto array = body->find("array"); array != body->end()) {
    // {"array": N, ...spec}: N tasks from one spec, in one commit.
    if (!array->is_number_integer()) {
      return http::ErrorResponse(400, "array must be a whole number of tasks, e.g. \"array\": 100");
    }
    count = static_cast<int>(std::clamp<int64_t>(array->get<int64_t>(), -1, int64_t{sched::kMaxArraySize} + 1));
    body->erase(array);
  }
  // {"hold": true, ...spec}: stored held, started by release (sbatch -H).
  SubmitExtras extras;
  if (auto hold = body->find("hold"); hold != body->end()) {
    if (!hold->is_boolean()) return http::ErrorResponse(400, "hold must be true or false");
    extras.hold = hold->get<bool>();
    body->erase(hold);
  }
  auto spec = sched::ParseJobSpec(*body);
  if (!spec.ok()) return StatusResponse(spec.status());
  if (count) {
    auto ids = ctx.jobs->SubmitArray(*spec, *count, caller, extras.hold);
    if (!ids.ok()) return StatusResponse(ids.status());
    return JsonResponse({{"ids", *ids}}, 201);
  }
  auto id = ctx.jobs->Submit(std::move(spec).value(), caller, extras);
  if (!id.ok()) return StatusResponse(id.status());
  return JsonResponse({{"id", *id}}, 201);
}

// A job as a request names it: "12" (a job, or the whole array whose id it
// is: an array's id is its first task's) or "12_3" (task 3 of array 12, as
// Slurm writes it).
struct JobRef {
  int64_t id = 0;      // the job; for an array, its first task
  bool array = false;  // the whole array
};

Result<JobRef> ResolveJobRef(RouteContext& ctx, const std::string& text) {
  const size_t underscore = text.find('_');
  if (underscore == std::string::npos) {
    auto id = IdFromPath(text, "job id");
    if (!id.ok()) return id.status();
    auto place = ctx.jobs->ArrayPlaceOf(*id);
    // No such job: the handler says so in its own words.
    if (place.status().code() == Code::kNotFound) return JobRef{*id, false};
    if (!place.ok()) return place.status();
    return JobRef{*id, place->array_id == *id};
  }
  auto array_id = IdFromPath(text.substr(0, underscore), "array id");
  if (!array_id.ok()) return array_id.status();
  const std::string index_text = text.substr(underscore + 1);
  int index = -1;
  auto [ptr, ec] = std::from_chars(index_text.data(), index_text.data() + index_text.size(), index);
  if (ec != std::errc() || ptr != index_text.data() + index_text.size() || index < 0) {
    return InvalidArgument("a task is ARRAY_INDEX, e.g. 12_3; got '" + http::Excerpt(text) + "'");
  }
  auto place = ctx.jobs->ArrayPlaceOf(*array_id);
  if (!place.ok()) return place.status();
  if (place->array_id != *array_id) {
    return NotFound(fmt::format("job {} is not an array, so it has no task {}", *array_id, http::Excerpt(text)));
  }
  if (index >= place->array_size) {
    return NotFound(fmt::format("array {} has no task {}: its tasks are {} to {}", *array_id, http::Excerpt(text),
                                api::ArrayTaskId(*array_id, 0), api::ArrayTaskId(*array_id, place->array_size - 1)));
  }
  return JobRef{*array_id + index, false};
}

// The job when the caller may read its internals; otherwise the refusal
// naming `what`.
Result<api::JobView> OwnJob(RouteContext& ctx, int64_t id, const Caller& caller, const std::string& what) {
  auto job = ctx.jobs->Show(id);
  if (!job.ok()) return job.status();
  if (!MaySeeJobInternals(caller, job->user)) {
    return JobInternalsRefused(caller, what + " of job " + std::to_string(id));
  }
  return job;
}

// An array's id shows its first task with the array's summary ("array").
http::Response Show(RouteContext& ctx, int64_t id, bool array, const Caller& caller) {
  auto job = ctx.jobs->Show(id);
  if (!job.ok()) return StatusResponse(job.status());
  const bool may_see = MaySeeJobInternals(caller, job->user);
  json shown = *job;
  if (!may_see) HideJobInternals(shown);
  if (Status detail = AddJobDetail(ctx, id, may_see, &shown); !detail.ok()) return StatusResponse(detail);
  if (array) {
    auto summary = ctx.jobs->Array(id);
    if (!summary.ok()) return StatusResponse(summary.status());
    shown["array"] = *summary;
  }
  return JsonResponse(shown);
}

// An array's id serves its first task's output and says how many tasks the
// array has ("array"), so that a client can print every task's.
http::Response Logs(RouteContext& ctx, int64_t id, bool array, const http::Request& request, const Caller& caller) {
  auto offset = QueryInt(request, "offset", 0, 0, INT64_MAX);
  if (!offset.ok()) return StatusResponse(offset.status());
  auto job = OwnJob(ctx, id, caller, "the output");
  if (!job.ok()) return StatusResponse(job.status());
  // ?attempt=N: that attempt's output; absent or 0, the latest attempt's.
  auto attempt = QueryInt(request, "attempt", 0, 0, INT32_MAX);
  if (!attempt.ok()) return StatusResponse(attempt.status());
  std::string stream = QueryText(request, "stream");
  auto logs = ctx.jobs->Logs(id, stream.empty() ? "stdout" : stream, *offset, static_cast<int>(*attempt));
  if (!logs.ok()) return StatusResponse(logs.status());
  // Where the job stands, so a client can say why there is no output yet.
  json out = *logs;
  out["state"] = job->state;
  out["reason"] = job->reason;
  if (array) out["array"] = {{"id", id}, {"size", job->array_size}};
  return JsonResponse(out);
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

// An array's tasks that a cancel of the array means: the unfinished ones;
// when none is left, the array's id, which is then reported as finished.
Result<std::vector<int64_t>> ArrayTasksToCancel(RouteContext& ctx, int64_t array_id) {
  auto summary = ctx.jobs->Array(array_id);
  if (!summary.ok()) return summary.status();
  std::vector<int64_t> ids;
  for (const auto& t : summary->tasks) {
    auto state = sched::ParseJobState(t.state);
    if (state && !sched::IsFinal(*state)) ids.push_back(t.id);
  }
  if (ids.empty()) ids.push_back(array_id);
  return ids;
}

// An action on every task of an array that it applies to, in one request
// (so in one turn): {"id", "array": true, "tasks": [{"id", "task", "state"
// or "error"}]}. Refused only when it applied to no task.
http::Response ActOnArray(RouteContext& ctx, int64_t array_id, const std::string& action, const Caller& caller) {
  auto summary = ctx.jobs->Array(array_id);
  if (!summary.ok()) return StatusResponse(summary.status());
  json tasks = json::array();
  std::optional<Status> refusal;
  bool acted = false;
  for (const auto& t : summary->tasks) {
    auto state = sched::ParseJobState(t.state);
    if (state && sched::IsFinal(*state)) continue;
    auto result = ctx.jobs->Act(t.id, action, caller);
    json task = {{"id", t.id}, {"task", api::ArrayTaskId(array_id, t.index)}};
    if (result.ok()) {
      task["state"] = *result;
      acted = true;
    } else {
      task["error"] = result.status().message();
      if (!refusal) refusal = result.status();
    }
    tasks.push_back(std::move(task));
  }
  if (!acted) {
    return StatusResponse(refusal ? *refusal
                                  : FailedPrecondition(fmt::format("cannot {} array {}: every task has ended", action,
                                                                   array_id)));
  }
  return JsonResponse({{"id", array_id}, {"array", true}, {"tasks", std::move(tasks)}});
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
        // A number is a job id; a string also "12_3", a task of an array.
        if (id.is_string()) {
          auto ref = ResolveJobRef(ctx, id.get<std::string>());
          if (!ref.ok()) return StatusResponse(ref.status());
          if (!ref->array) {
            cancel.ids.push_back(ref->id);
            continue;
          }
          auto expanded = ArrayTasksToCancel(ctx, ref->id);
          if (!expanded.ok()) return StatusResponse(expanded.status());
          cancel.ids.insert(cancel.ids.end(), expanded->begin(), expanded->end());
          continue;
        }
        if (!id.is_number_integer() || id.get<int64_t>() <= 0) {
          return http::ErrorResponse(400, "ids must be positive whole numbers or tasks such as \"12_3\"; got " +
                                              http::Excerpt(id.dump()));
        }
        auto ref = ResolveJobRef(ctx, std::to_string(id.get<int64_t>()));
        if (!ref.ok()) return StatusResponse(ref.status());
        if (ref->array) {
          auto expanded = ArrayTasksToCancel(ctx, ref->id);
          if (!expanded.ok()) return StatusResponse(expanded.status());
          cancel.ids.insert(cancel.ids.end(), expanded->begin(), expanded->end());
          continue;
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
  return result.ok() ? JsonResponse(json(*result)) : StatusResponse(result.status());
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
  auto ref = ResolveJobRef(ctx, parts[2]);
  if (!ref.ok()) return StatusResponse(ref.status());
  const int64_t* id = &ref->id;
  if (parts.size() == 3) return read ? Show(ctx, *id, ref->array, caller) : MethodNotAllowed("GET", "/v1/jobs/{id}");
  const std::string& what = parts[3];
  if (what == "logs") {
    return read ? Logs(ctx, *id, ref->array, request, caller) : MethodNotAllowed("GET", "/v1/jobs/{id}/logs");
  }
  if (what == "metrics") return read ? Metrics(ctx, *id, caller) : MethodNotAllowed("GET", "/v1/jobs/{id}/metrics");
  if (request.method != "POST") return MethodNotAllowed("POST", "/v1/jobs/{id}/" + http::Excerpt(what));
  if (ref->array) return ActOnArray(ctx, *id, what, caller);
  auto state = ctx.jobs->Act(*id, what, caller);
  return state.ok() ? JsonResponse({{"id", *id}, {"state", *state}}) : StatusResponse(state.status());
}

}  // namespace gpuherd::daemon::routes
