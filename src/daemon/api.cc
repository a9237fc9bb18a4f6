#include "daemon/api.h"

#include <algorithm>
#include <charconv>

#include "burnin/result.h"
#include "core/version.h"
#include "daemon/burnin_records.h"
#include "daemon/record_json.h"
#include "gpu/json.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;

// GET /v1/burnin/runs?gpu=&model=&limit=&latest=1. `find_gpu` gives the
// fleet index of an index or UUID (-1 when not in the fleet); GPUs tested
// outside the fleet (a simulated one) are found among the stored runs.
HttpResponse ListBurnInRuns(DaemonState& state, const HttpRequest& request,
                            const std::function<int(const std::string&)>& find_gpu) {
  int64_t limit = 20;
  std::string error;
  if (!QueryInt(request, "limit", &limit, &error)) return HttpErrorResponse(400, error);
  if (limit < 1 || limit > 10000) return HttpErrorResponse(400, "limit must be between 1 and 10000");
  store::BurnInFilter filter;
  filter.limit = static_cast<int>(limit);
  if (auto it = request.query.find("gpu"); it != request.query.end()) {
    int i = find_gpu(it->second);
    if (i >= 0) {
      filter.gpu_uuid = state.fleet.gpus[i].uuid;
    } else {
      auto uuid = FindBurnInGpu(*state.store, it->second);
      if (!uuid.ok()) return StatusResponse(uuid.status());
      filter.gpu_uuid = *uuid;
    }
  }
  if (auto it = request.query.find("model"); it != request.query.end()) filter.gpu_name = it->second;
  auto latest = request.query.find("latest");
  const bool only_latest = latest != request.query.end() && (latest->second == "1" || latest->second == "true");
  auto rows = only_latest ? state.store->LatestBurnInPerGpu() : state.store->ListBurnInRuns(filter);
  if (!rows.ok()) return StatusResponse(rows.status());
  json runs = json::array();
  for (const store::BurnInRecord& row : *rows) {
    if (only_latest && !filter.gpu_uuid.empty() && row.gpu_uuid != filter.gpu_uuid) continue;
    if (only_latest && !filter.gpu_name.empty() && row.gpu_name != filter.gpu_name) continue;
    json run = json::parse(row.json, nullptr, /*allow_exceptions=*/false);
    if (!run.is_object()) {
      return HttpErrorResponse(500, "stored burn-in run " + std::to_string(row.id) + " is not a JSON object");
    }
    run["id"] = row.id;  // assigned by the store after the record was written
    runs.push_back(std::move(run));
  }
  return JsonResponse({{"runs", runs}});
}

// POST /v1/burnin/runs {"runs": [...]}: runs made outside the daemon (the
// CLI's --direct mode) recorded in the daemon's store, with their events.
HttpResponse RecordBurnInRuns(DaemonState& state, JobService* jobs, const HttpRequest& request, const Caller& caller) {
  // A verdict keeps a GPU away from work, so only an admin may record one.
  if (!caller.admin) {
    return HttpErrorResponse(403, "only an admin (root, the daemon's user or the admin group) may record "
                                  "burn-in results: they decide which GPUs get work");
  }
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object() || !body.contains("runs") || !body["runs"].is_array()) {
    return HttpErrorResponse(400, "body must be a JSON object {\"runs\": [...]} of burn-in records "
                                  "(as `gpuherd burnin --json` prints them)");
  }
  std::vector<burnin::BurnInRun> runs;
  for (size_t i = 0; i < body["runs"].size(); ++i) {
    auto run = burnin::BurnInRunFromJson(body["runs"][i]);
    Status valid = run.ok() ? ValidateForStore(*run) : run.status();
    if (!valid.ok()) return HttpErrorResponse(400, "run " + std::to_string(i) + ": " + valid.message());
    run->id = 0;  // the store assigns it
    runs.push_back(std::move(*run));
  }
  for (const burnin::BurnInRun& run : runs) {
    state.batch.events.push_back(BurnInEvent(run));
    state.batch.burnin_runs.push_back(ToBurnInRecord(run));
  }
  json returned = json::array();
  if (jobs) {
    for (int pos : ReturnPassedGpus(runs, state.fleet, jobs)) returned.push_back(state.fleet.gpus[pos].index);
  }
  return JsonResponse({{"recorded", runs.size()}, {"returned_to_work", returned}}, 201);
}

}  // namespace

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// Parses an integer query parameter; false (and `error`) when malformed.
bool QueryInt(const HttpRequest& request, const std::string& name, int64_t* out, std::string* error) {
  auto it = request.query.find(name);
  if (it == request.query.end()) return true;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < -kMaxQueryInt || value > kMaxQueryInt) {
    *error = "query parameter '" + name + "' must be an integer from " + std::to_string(-kMaxQueryInt) + " to " +
             std::to_string(kMaxQueryInt) + ", got '" + text.substr(0, 64) + "'";
    return false;
  }
  *out = value;
  return true;
}

HttpResponse JsonResponse(const json& body, int status) {
  HttpResponse response;
  response.status = status;
  // Job logs may hold bytes that are not UTF-8; they are replaced, not fatal.
  response.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return response;
}

HttpResponse StatusResponse(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return JsonResponse(json::object());
    case Code::kInvalidArgument: return HttpErrorResponse(400, s.message());
    case Code::kUnauthenticated: return HttpErrorResponse(401, s.message());
    case Code::kPermissionDenied: return HttpErrorResponse(403, s.message());
    case Code::kNotFound: return HttpErrorResponse(404, s.message());
    case Code::kAlreadyExists: return HttpErrorResponse(409, s.message());
    case Code::kFailedPrecondition: return HttpErrorResponse(412, s.message());
    case Code::kResourceExhausted: return HttpErrorResponse(429, s.message());
    case Code::kUnavailable: return HttpErrorResponse(503, s.message());
    default: return HttpErrorResponse(500, s.message());
  }
}

bool IsMutation(const HttpRequest& request) {
  return request.method != "GET" && request.method != "HEAD";
}

HttpResponse Api::Handle(const HttpRequest& request, const Caller& caller) {
  // Every event this request causes (a note, a submit, a cancel, a drain, a
  // pipeline's jobs) names who caused it in its data: {"by": {user, uid}}.
  const size_t events_before = state_->batch.events.size();
  HttpResponse response = Route(request, caller);
  if (IsMutation(request)) {
    for (size_t i = events_before; i < state_->batch.events.size(); ++i) {
      store::EventRecord& event = state_->batch.events[i];
      json data = json::parse(event.data_json, nullptr, /*allow_exceptions=*/false);
      if (!data.is_object()) data = json::object();
      if (data.contains("by")) continue;
      data["by"] = {{"user", caller.user}, {"uid", caller.uid}};
      event.data_json = data.dump(-1, ' ', false, json::error_handler_t::replace);
    }
  }
  return response;
}

HttpResponse Api::Route(const HttpRequest& request, const Caller& caller) {
  std::vector<std::string> parts = SplitPath(request.path);
  if (request.path == "/metrics" && metrics_) {
    if (request.method != "GET" && request.method != "HEAD") return HttpErrorResponse(405, "use GET for /metrics");
    HttpResponse response;
    response.content_type = telemetry::kMetricsContentType;
    response.body = metrics_->Render();
    return response;
  }
  if (parts.empty() || parts[0] != "v1") {
    return HttpErrorResponse(404, "no such endpoint " + request.path + "; the API lives under /v1 (try /v1/health)");
  }
  const std::string& method = request.method;
  auto route = [&](size_t n, const char* a = nullptr, const char* b = nullptr) {
    if (parts.size() != n) return false;
    if (a && parts[1] != a) return false;
    if (b && n > 3 && parts[3] != b) return false;
    return true;
  };
  bool get = method == "GET" || method == "HEAD";
  if (route(2, "health")) return get ? Health() : HttpErrorResponse(405, "use GET for /v1/health");
  if (route(2, "version")) return get ? Version() : HttpErrorResponse(405, "use GET for /v1/version");
  if (route(2, "gpus")) return get ? Gpus() : HttpErrorResponse(405, "use GET for /v1/gpus");
  if (route(3, "gpus")) return get ? Gpu(parts[2]) : HttpErrorResponse(405, "use GET for /v1/gpus/{id}");
  if (route(4, "gpus", "samples")) {
    return get ? Samples(parts[2], request) : HttpErrorResponse(405, "use GET for samples");
  }
  if (route(4, "gpus", "rollups")) {
    return get ? Rollups(parts[2], request) : HttpErrorResponse(405, "use GET for rollups");
  }
  if (route(2, "events")) {
    if (get) return Events(request);
    if (method == "POST") return AddEvent(request, caller);
    return HttpErrorResponse(405, "use GET or POST for /v1/events");
  }
  if (route(2, "shutdown")) {
    return method == "POST" ? Shutdown(caller) : HttpErrorResponse(405, "use POST for /v1/shutdown");
  }
  if (parts.size() >= 2 && parts[1] == "jobs") return Jobs(parts, request, caller);
  if (parts.size() >= 2 && parts[1] == "pipelines" && pipelines_) return Pipelines(parts, request, caller);
  if (route(4, "gpus", "drain") || route(4, "gpus", "undrain")) {
    if (method != "POST") return HttpErrorResponse(405, "use POST to drain or undrain");
    return DrainGpu(parts[2], parts[3] == "drain", request, caller);
  }
  if (route(2, "alerts") && alerts_) {
    if (!get) return HttpErrorResponse(405, "use GET for /v1/alerts");
    auto all = request.query.find("all");
    auto list = alerts_->ListJson(all != request.query.end() && (all->second == "1" || all->second == "true"));
    return list.ok() ? JsonResponse(*list) : StatusResponse(list.status());
  }
  if (route(2, "burnin") && burnin_launcher_) {
    return method == "POST" ? StartBurnIn(request, caller) : HttpErrorResponse(405, "use POST to start a burn-in");
  }
  if (route(3, "burnin") && parts[2] == "runs") {
    if (get) return ListBurnInRuns(*state_, request, [this](const std::string& id) { return FindGpu(id); });
    if (method == "POST") return RecordBurnInRuns(*state_, jobs_, request, caller);
    return HttpErrorResponse(405, "use GET or POST for /v1/burnin/runs");
  }
  return HttpErrorResponse(404, "no such endpoint " + request.path);
}

HttpResponse Api::StartBurnIn(const HttpRequest& request, const Caller& caller) {
  // It takes GPUs away from everyone's work for its duration.
  if (!caller.admin) {
    return HttpErrorResponse(403, "only an admin (root, the daemon's user or the admin group) may start a burn-in: "
                                  "it takes the GPUs from everyone's jobs while it runs");
  }
  json body = json::parse(request.body.empty() ? "{}" : request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return HttpErrorResponse(400, "the body must be JSON, like {\"level\": 1, \"gpus\": \"all\"}");
  auto job = PlanBurnInJob(body, state_->fleet, *burnin_launcher_);
  if (!job.ok()) return StatusResponse(job.status());
  auto id = jobs_->Submit(job->spec, caller, job->extras);
  if (!id.ok()) return StatusResponse(id.status());
  json gpus = json::array();
  for (int p : job->positions) gpus.push_back({{"index", state_->fleet.gpus[p].index}, {"uuid", state_->fleet.gpus[p].uuid}});
  return JsonResponse({{"id", *id}, {"gpus", gpus}, {"name", job->spec["name"]}}, 201);
}

HttpResponse Api::Health() {
  int lost = 0;
  for (size_t i = 0; i < state_->fleet.gpus.size(); ++i) {
    if (state_->View(static_cast<int>(i)).state != "ok") ++lost;
  }
  return JsonResponse({{"status", lost == 0 ? "ok" : "degraded"},
                       {"started_at", state_->started_at},
                       {"gpus", state_->fleet.gpus.size()},
                       {"gpus_lost", lost},
                       {"simulated", state_->fleet.simulated},
                       {"sim_reason", state_->sim_reason},
                       {"sample_interval_ms", state_->sample_interval},
                       {"rounds", state_->rounds},
                       {"skipped_ticks", state_->skipped_ticks},
                       {"last_round_us", state_->last_round_took}});
}

HttpResponse Api::Version() {
  return JsonResponse({{"version", kVersion},
                       {"api", "v1"},
                       {"schema_version", state_->store->schema_version()},
                       {"driver", state_->fleet.driver_name}});
}

HttpResponse Api::Gpus() {
  json fleet = FleetJson(state_->Fleet());
  for (auto& g : fleet["gpus"]) {
    MarkDrained(g);
    MarkRisk(g);
  }
  return JsonResponse(fleet);
}

void Api::MarkRisk(json& gpu) const {
  auto it = state_->failure_risk.find(gpu.value("uuid", std::string()));
  if (it != state_->failure_risk.end()) gpu["failure_risk"] = it->second;
}

void Api::MarkDrained(json& gpu) const {
  auto reason = jobs_ ? jobs_->DrainReason(gpu.value("uuid", std::string())) : std::nullopt;
  if (!reason) return;
  gpu["drained"] = true;
  gpu["drain_reason"] = *reason;
  if (gpu.value("state", std::string()) == "ok") gpu["state"] = "drained";
}

int Api::FindGpu(const std::string& id) const {
  const auto& gpus = state_->fleet.gpus;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].uuid == id || std::to_string(gpus[i].index) == id) return static_cast<int>(i);
  }
  return -1;
}

HttpResponse Api::Gpu(const std::string& id) {
  int i = FindGpu(id);
  if (i < 0) return HttpErrorResponse(404, "no GPU '" + id + "' (give an index or a UUID; GET /v1/gpus lists them)");
  json gpu = GpuJson(state_->fleet.gpus[i], state_->View(i));
  MarkDrained(gpu);
  MarkRisk(gpu);
  return JsonResponse(gpu);
}

HttpResponse Api::Samples(const std::string& id, const HttpRequest& request) {
  int i = FindGpu(id);
  if (i < 0) return HttpErrorResponse(404, "no GPU '" + id + "'");
  int64_t n = 60;
  std::string error;
  if (!QueryInt(request, "n", &n, &error)) return HttpErrorResponse(400, error);
  if (n < 1) return HttpErrorResponse(400, "n must be at least 1");
  json samples = state_->telemetry->Recent(i, static_cast<size_t>(n));
  return JsonResponse({{"uuid", state_->fleet.gpus[i].uuid}, {"samples", samples}});
}

HttpResponse Api::Rollups(const std::string& id, const HttpRequest& request) {
  int i = FindGpu(id);
  if (i < 0) return HttpErrorResponse(404, "no GPU '" + id + "'");
  int64_t from = 0, to = INT64_MAX, limit = 1440;
  std::string error;
  if (!QueryInt(request, "from", &from, &error) || !QueryInt(request, "to", &to, &error) ||
      !QueryInt(request, "limit", &limit, &error)) {
    return HttpErrorResponse(400, error);
  }
  if (limit < 1 || limit > 100000) return HttpErrorResponse(400, "limit must be between 1 and 100000");
  auto rows = state_->store->QueryRollups(state_->fleet.gpus[i].uuid, from, to, static_cast<int>(limit));
  if (!rows.ok()) return HttpErrorResponse(500, rows.status().ToString());
  json out = json::array();
  for (const auto& r : *rows) out.push_back(RollupJson(r));
  return JsonResponse({{"uuid", state_->fleet.gpus[i].uuid}, {"rollups", out}});
}

HttpResponse Api::Events(const HttpRequest& request) {
  store::EventFilter filter;
  int64_t after = 0, since = 0, limit = 100;
  std::string error;
  if (!QueryInt(request, "after", &after, &error) || !QueryInt(request, "since", &since, &error) ||
      !QueryInt(request, "limit", &limit, &error)) {
    return HttpErrorResponse(400, error);
  }
  if (limit < 1 || limit > 100000) return HttpErrorResponse(400, "limit must be between 1 and 100000");
  filter.after_id = after;
  filter.since = since;
  filter.limit = static_cast<int>(limit);
  if (auto it = request.query.find("kind"); it != request.query.end()) filter.kind_prefix = it->second;
  if (auto it = request.query.find("gpu"); it != request.query.end()) {
    int i = FindGpu(it->second);
    if (i < 0) return HttpErrorResponse(404, "no GPU '" + it->second + "'");
    filter.gpu_uuid = state_->fleet.gpus[i].uuid;
  }
  auto events = state_->store->ListEvents(filter);
  if (!events.ok()) return HttpErrorResponse(500, events.status().ToString());
  json out = json::array();
  for (const auto& e : *events) out.push_back(EventJson(e));
  return JsonResponse({{"events", out}});
}

HttpResponse Api::AddEvent(const HttpRequest& request, const Caller& caller) {
  json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) {
    return HttpErrorResponse(400, "body must be a JSON object like {\"message\": \"replaced the fan of GPU 3\"}");
  }
  for (const auto& [key, value] : body.items()) {
    if (key != "message" && key != "gpu" && key != "severity") {
      return HttpErrorResponse(400, "unknown field '" + key + "'; allowed: message, gpu, severity");
    }
  }
  if (!body.contains("message") || !body["message"].is_string() || body["message"].get<std::string>().empty()) {
    return HttpErrorResponse(400, "field 'message' (a non-empty string) is required");
  }
  store::EventRecord event;
  event.time = state_->clock->Now();
  event.kind = "operator.note";
  event.message = body["message"].get<std::string>() + " (note by " + caller.user + ")";
  if (body.contains("severity")) {
    auto severity = body["severity"].is_string() ? store::ParseSeverity(body["severity"].get<std::string>())
                                                 : std::nullopt;
    if (!severity) return HttpErrorResponse(400, "severity must be one of info, warning, critical");
    event.severity = *severity;
  }
  if (body.contains("gpu")) {
    std::string id = body["gpu"].is_string() ? body["gpu"].get<std::string>() : body["gpu"].dump();
    int i = FindGpu(id);
    if (i < 0) return HttpErrorResponse(404, "no GPU '" + id + "'");
    event.gpu_uuid = state_->fleet.gpus[i].uuid;
  }
  state_->batch.events.push_back(event);
  return JsonResponse({{"recorded", true}}, 201);
}

HttpResponse Api::Shutdown(const Caller& caller) {
  if (!caller.admin) return HttpErrorResponse(403, "only an admin (root or the daemon's user) may stop the daemon");
  request_stop_();
  return JsonResponse({{"stopping", true}}, 202);
}

HttpResponse Api::Jobs(const std::vector<std::string>& parts, const HttpRequest& request, const Caller& caller) {
  const std::string& method = request.method;
  bool get = method == "GET" || method == "HEAD";
  if (parts.size() == 2) {
    if (get) {
      auto q = [&](const char* k) {
        auto it = request.query.find(k);
        return it == request.query.end() ? std::string() : it->second;
      };
      if (!q("state").empty() && !sched::ParseJobState(q("state"))) {
        return HttpErrorResponse(400, "unknown state '" + q("state") +
                                          "'; use pending, held, running, stopping, completed, failed or cancelled");
      }
      bool all = q("all") == "1" || q("all") == "true";
      HttpResponse response;
      response.body = jobs_->ListBody(all, q("user"), q("state"));
      return response;
    }
    if (method != "POST") return HttpErrorResponse(405, "use GET or POST for /v1/jobs");
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) {
      return HttpErrorResponse(400, "body must be a job spec, a JSON object like {\"command\": [\"python3\", \"train.py\"], \"gpus\": 1}");
    }
    if (auto array = body.find("array"); array != body.end()) {
      // {"array": N, ...spec}: N tasks from one spec, in one commit.
      if (!array->is_number_integer()) {
        return HttpErrorResponse(400, "array must be a whole number of tasks, e.g. \"array\": 100");
      }
      int count = static_cast<int>(std::clamp<int64_t>(array->get<int64_t>(), -1, int64_t{sched::kMaxArraySize} + 1));
      body.erase(array);
      auto ids = jobs_->SubmitArray(body, count, caller);
      if (!ids.ok()) return StatusResponse(ids.status());
      return JsonResponse({{"ids", *ids}}, 201);
    }
    auto id = jobs_->Submit(body, caller);
    if (!id.ok()) return StatusResponse(id.status());
    return JsonResponse({{"id", *id}}, 201);
  }
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(parts[2].data(), parts[2].data() + parts[2].size(), id);
  if (ec != std::errc() || ptr != parts[2].data() + parts[2].size() || id <= 0) {
    return HttpErrorResponse(400, "job id must be a positive integer, got '" + parts[2] + "'");
  }
  if (parts.size() == 3) {
    if (!get) return HttpErrorResponse(405, "use GET for /v1/jobs/{id}");
    auto job = jobs_->Show(id);
    return job.ok() ? JsonResponse(*job) : StatusResponse(job.status());
  }
  if (parts.size() == 4 && parts[3] == "logs") {
    if (!get) return HttpErrorResponse(405, "use GET for logs");
    int64_t offset = 0;
    std::string error;
    if (!QueryInt(request, "offset", &offset, &error)) return HttpErrorResponse(400, error);
    auto it = request.query.find("stream");
    auto logs = jobs_->Logs(id, it == request.query.end() ? "stdout" : it->second, offset);
    return logs.ok() ? JsonResponse(*logs) : StatusResponse(logs.status());
  }
  if (parts.size() == 4) {
    if (method != "POST") return HttpErrorResponse(405, "use POST for job actions");
    auto state = jobs_->Act(id, parts[3], caller);
    return state.ok() ? JsonResponse({{"id", id}, {"state", *state}}) : StatusResponse(state.status());
  }
  return HttpErrorResponse(404, "no such endpoint " + request.path);
}

HttpResponse Api::Pipelines(const std::vector<std::string>& parts, const HttpRequest& request,
                            const Caller& caller) {
  const std::string& method = request.method;
  const bool get = method == "GET" || method == "HEAD";
  auto query = [&](const char* k) {
    auto it = request.query.find(k);
    return it == request.query.end() ? std::string() : it->second;
  };
  if (parts.size() == 2) {
    if (get) {
      auto list = pipelines_->List(query("all") == "1" || query("all") == "true", caller);
      return list.ok() ? JsonResponse(*list) : StatusResponse(list.status());
    }
    if (method != "POST") return HttpErrorResponse(405, "use GET or POST for /v1/pipelines");
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
      return HttpErrorResponse(400, "body must be a JSON object {\"yaml\": \"<the pipeline file>\", ...}");
    }
    auto created = pipelines_->Create(body, caller);
    return created.ok() ? JsonResponse(*created, 201) : StatusResponse(created.status());
  }
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(parts[2].data(), parts[2].data() + parts[2].size(), id);
  if (ec != std::errc() || ptr != parts[2].data() + parts[2].size() || id <= 0) {
    return HttpErrorResponse(400, "pipeline run id must be a positive integer, got '" + parts[2] + "'");
  }
  if (parts.size() == 3) {
    if (!get) return HttpErrorResponse(405, "use GET for /v1/pipelines/{id}");
    auto run = pipelines_->Show(id, caller);
    return run.ok() ? JsonResponse(*run) : StatusResponse(run.status());
  }
  if (parts.size() == 4 && parts[3] == "metrics") {
    if (!get) return HttpErrorResponse(405, "use GET for metrics");
    auto metrics = pipelines_->Metrics(id, query("node"), caller);
    return metrics.ok() ? JsonResponse(*metrics) : StatusResponse(metrics.status());
  }
  if (parts.size() == 4 && (parts[3] == "cancel" || parts[3] == "retry")) {
    if (method != "POST") return HttpErrorResponse(405, "use POST to " + parts[3] + " a pipeline run");
    auto state = parts[3] == "cancel" ? pipelines_->Cancel(id, caller) : pipelines_->Retry(id, caller);
    return state.ok() ? JsonResponse({{"id", id}, {"state", *state}}) : StatusResponse(state.status());
  }
  return HttpErrorResponse(404, "no such endpoint " + request.path + "; pipeline runs have /metrics, /cancel and /retry");
}

HttpResponse Api::DrainGpu(const std::string& id, bool drain, const HttpRequest& request, const Caller& caller) {
  int i = FindGpu(id);
  if (i < 0) return HttpErrorResponse(404, "no GPU '" + id + "' (give an index or a UUID)");
  std::string reason;
  if (!request.body.empty()) {
    json body = json::parse(request.body, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded() || !body.is_object()) return HttpErrorResponse(400, "body must be a JSON object like {\"reason\": \"fan noise\"}");
    if (body.contains("reason")) {
      if (!body["reason"].is_string()) return HttpErrorResponse(400, "reason must be a string");
      reason = body["reason"].get<std::string>();
    }
  }
  Status s = drain ? jobs_->Drain(i, reason, caller) : jobs_->Undrain(i, caller);
  return s.ok() ? JsonResponse({{"gpu", i}, {"drained", drain}}) : StatusResponse(s);
}

}  // namespace gpuherd::daemon
