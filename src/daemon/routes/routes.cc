#include "daemon/routes/routes.h"

#include <nlohmann/json.hpp>

namespace gpuherd::daemon::routes {

http::Response Routes::Handle(const http::Request& request, const Caller& caller, Prepared* prepared) {
  // Every event a mutating request causes (a note, a submit, a cancel, a
  // drain, a pipeline's jobs) names who caused it: {"by": {user, uid}}.
  const size_t events_before = ctx_.state->batch.events.size();
  http::Response response = Route(request, caller, prepared);
  if (request.method != "GET" && request.method != "HEAD") {
    for (size_t i = events_before; i < ctx_.state->batch.events.size(); ++i) {
      store::EventRecord& event = ctx_.state->batch.events[i];
      nlohmann::json data = nlohmann::json::parse(event.data_json, nullptr, /*allow_exceptions=*/false);
      if (!data.is_object()) data = nlohmann::json::object();
      if (data.contains("by")) continue;
      data["by"] = {{"user", caller.user}, {"uid", caller.uid}};
      event.data_json = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  return response;
}

http::Response Routes::Route(const http::Request& request, const Caller& caller, Prepared* prepared) {
  if (request.path == "/metrics" && ctx_.metrics) return MetricsRoute(ctx_, request);
  Parts parts = SplitPath(request.path);
  if (parts.empty() || parts[0] != "v1") {
    return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path) +
                                        "; the API lives under /v1 (try /v1/health)");
  }
  if (parts.size() >= 2) {
    const std::string& resource = parts[1];
    if (resource == "health" || resource == "version" || resource == "shutdown") {
      return SystemRoutes(ctx_, parts, request, caller);
    }
    if (resource == "gpus") return GpuRoutes(ctx_, parts, request, caller);
    if (resource == "events") return EventRoutes(ctx_, parts, request, caller);
    if (resource == "jobs") return JobRoutes(ctx_, parts, request, caller);
    if (resource == "acct") return AcctRoutes(ctx_, parts, request, caller);
    if (resource == "pipelines" && ctx_.pipelines) return PipelineRoutes(ctx_, parts, request, caller, prepared);
    if (resource == "burnin") return BurnInRoutes(ctx_, parts, request, caller);
    if (resource == "alerts" && ctx_.alerts) return AlertRoutes(ctx_, parts, request, caller);
  }
  return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
}

}  // namespace gpuherd::daemon::routes
