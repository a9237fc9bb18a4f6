// /v1/health, /v1/version, /v1/shutdown and the Prometheus /metrics.
#include "core/version.h"
#include "daemon/routes/routes.h"
#include "telemetry/prometheus.h"

namespace gpuherd::daemon::routes {

using nlohmann::json;

namespace {

http::Response Health(const DaemonState& state) {
  int lost = 0;
  for (size_t i = 0; i < state.fleet.gpus.size(); ++i) {
    if (state.View(static_cast<int>(i)).state != "ok") ++lost;
  }
  return JsonResponse({{"status", lost == 0 ? "ok" : "degraded"},
                       {"started_at", state.started_at},
                       {"gpus", state.fleet.gpus.size()},
                       {"gpus_lost", lost},
                       {"simulated", state.fleet.simulated},
                       {"sim_reason", state.sim_reason},
                       {"sample_interval_ms", state.sample_interval},
                       {"rounds", state.rounds},
                       {"skipped_ticks", state.skipped_ticks},
                       {"last_round_us", state.last_round_took}});
}

http::Response Version(const DaemonState& state) {
  return JsonResponse({{"version", kVersion},
                       {"api", "v1"},
                       {"schema_version", state.store->schema_version()},
                       {"driver", state.fleet.driver_name}});
}

}  // namespace

http::Response SystemRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request,
                            const Caller& caller) {
  if (parts.size() != 2) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  if (parts[1] == "shutdown") {
    if (request.method != "POST") return MethodNotAllowed("POST", "/v1/shutdown");
    if (!caller.admin) return http::ErrorResponse(403, "only an admin (root or the daemon's user) may stop the daemon");
    ctx.request_stop();
    return JsonResponse({{"stopping", true}}, 202);
  }
  if (!IsRead(request)) return MethodNotAllowed("GET", "/v1/" + parts[1]);
  return parts[1] == "health" ? Health(*ctx.state) : Version(*ctx.state);
}

http::Response MetricsRoute(RouteContext& ctx, const http::Request& request) {
  if (!IsRead(request)) return MethodNotAllowed("GET", "/metrics");
  http::Response response;
  response.content_type = telemetry::kMetricsContentType;
  response.body = ctx.metrics->Render();
  return response;
}

}  // namespace gpuherd::daemon::routes
