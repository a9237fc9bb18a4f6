#include "daemon/routes/routes.h"

namespace gpuherd::daemon::routes {

http::Response Routes::Handle(const http::Request& request, const Caller& caller) {
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
    if (resource == "pipelines" && ctx_.pipelines) return PipelineRoutes(ctx_, parts, request, caller);
    if (resource == "burnin") return BurnInRoutes(ctx_, parts, request, caller);
    if (resource == "alerts" && ctx_.alerts) return AlertRoutes(ctx_, parts, request, caller);
  }
  return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
}

}  // namespace gpuherd::daemon::routes
