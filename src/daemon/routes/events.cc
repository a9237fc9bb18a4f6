// /v1/events: the event log, and operators' notes added to it.
#include "api/events.h"
#include "daemon/routes/routes.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

constexpr int64_t kMaxTimeMs = int64_t{253402300799000};  // year 9999
constexpr size_t kMaxNoteBytes = 4096;

http::Response List(const RouteContext& ctx, const http::Request& request) {
  auto after = QueryInt(request, "after", 0, 0, INT64_MAX - 1);
  if (!after.ok()) return StatusResponse(after.status());
  auto since = QueryInt(request, "since", 0, 0, kMaxTimeMs);
  if (!since.ok()) return StatusResponse(since.status());
  auto limit = QueryInt(request, "limit", 100, 1, 100000);
  if (!limit.ok()) return StatusResponse(limit.status());
  store::EventFilter filter;
  filter.after_id = *after;
  filter.since = *since;
  filter.limit = static_cast<int>(*limit);
  filter.kind_prefix = QueryText(request, "kind");
  if (std::string gpu = QueryText(request, "gpu"); !gpu.empty()) {
    auto position = FindGpu(*ctx.state, gpu);
    if (!position.ok()) return StatusResponse(position.status());
    filter.gpu_uuid = ctx.state->fleet.gpus[*position].uuid;
  }
  auto events = ctx.state->store->ListEvents(filter);
  if (!events.ok()) return StatusResponse(events.status());
  json out = json::array();
  for (const auto& e : *events) out.push_back(api::EventOf(e));
  return JsonResponse({{"events", out}});
}

// An operator's note, with who wrote it.
http::Response Add(const RouteContext& ctx, const http::Request& request, const Caller& caller) {
  constexpr char kShape[] = "a JSON object like {\"message\": \"replaced the fan of GPU 3\"}";
  auto body = BodyJson(request, kShape);
  if (!body.ok()) return StatusResponse(body.status());
  if (!body->is_object()) return http::ErrorResponse(400, std::string("body must be ") + kShape);
  for (const auto& [key, value] : body->items()) {
    if (key != "message" && key != "gpu" && key != "severity") {
      return http::ErrorResponse(400, "unknown field '" + http::Excerpt(key) + "'; allowed: message, gpu, severity");
    }
  }
  const json& message = (*body)["message"];
  if (!message.is_string() || message.get<std::string>().empty()) {
    return http::ErrorResponse(400, "field 'message' (a non-empty string) is required");
  }
  if (message.get<std::string>().size() > kMaxNoteBytes) {
    return http::ErrorResponse(400, "the message is longer than " + std::to_string(kMaxNoteBytes) + " bytes");
  }
  store::Severity severity = store::Severity::kInfo;
  if (body->contains("severity")) {
    const json& given = (*body)["severity"];
    auto parsed = given.is_string() ? store::ParseSeverity(given.get<std::string>()) : std::nullopt;
    if (!parsed) return http::ErrorResponse(400, "severity must be one of info, warning, critical");
    severity = *parsed;
  }
  std::string gpu_uuid;
  if (body->contains("gpu")) {
    const json& gpu = (*body)["gpu"];
    auto position = FindGpu(*ctx.state, gpu.is_string() ? gpu.get<std::string>() : http::DumpCapped(gpu, 40));
    if (!position.ok()) return StatusResponse(position.status());
    gpu_uuid = ctx.state->fleet.gpus[*position].uuid;
  }
  ctx.state->batch.events.push_back(api::NewEvent(ctx.state->clock->Now(), "operator.note", severity,
                                                  message.get<std::string>(), gpu_uuid,
                                                  {{"user", caller.user}, {"uid", caller.uid}}));
  return JsonResponse({{"recorded", true}}, 201);
}

}  // namespace

http::Response EventRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller) {
  if (parts.size() != 2) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  if (IsRead(request)) return List(ctx, request);
  if (request.method == "POST") return Add(ctx, request, caller);
  return MethodNotAllowed("GET or POST", "/v1/events");
}

}  // namespace gpuherd::daemon::routes
