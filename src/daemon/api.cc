#include "daemon/api.h"

#include <charconv>

#include "core/version.h"
#include "daemon/record_json.h"
#include "gpu/json.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;

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
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (ec != std::errc() || ptr != text.data() + text.size()) {
    *error = "query parameter '" + name + "' must be an integer, got '" + text + "'";
    return false;
  }
  return true;
}

}  // namespace

HttpResponse JsonResponse(const json& body, int status) {
  HttpResponse response;
  response.status = status;
  response.body = body.dump();
  return response;
}

bool IsMutation(const HttpRequest& request) {
  return request.method == "POST" && (request.path == "/v1/events" || request.path == "/v1/shutdown");
}

HttpResponse Api::Handle(const HttpRequest& request) {
  std::vector<std::string> parts = SplitPath(request.path);
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
    if (method == "POST") return AddEvent(request);
    return HttpErrorResponse(405, "use GET or POST for /v1/events");
  }
  if (route(2, "shutdown")) return method == "POST" ? Shutdown() : HttpErrorResponse(405, "use POST for /v1/shutdown");
  return HttpErrorResponse(404, "no such endpoint " + request.path);
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

HttpResponse Api::Gpus() { return JsonResponse(FleetJson(state_->Fleet())); }

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
  return JsonResponse(GpuJson(state_->fleet.gpus[i], state_->View(i)));
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

HttpResponse Api::AddEvent(const HttpRequest& request) {
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
  event.message = body["message"].get<std::string>();
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

HttpResponse Api::Shutdown() {
  request_stop_();
  return JsonResponse({{"stopping", true}}, 202);
}

}  // namespace gpuherd::daemon
