// /v1/alerts: pending and firing alerts (all=1: and those resolved in the last day).
#include "daemon/routes/routes.h"

namespace gpuherd::daemon::routes {

http::Response AlertRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller) {
  if (parts.size() != 2) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  if (!IsRead(request)) return MethodNotAllowed("GET", "/v1/alerts");
  auto list = ctx.alerts->List(QueryFlag(request, "all"));
  if (!list.ok()) return StatusResponse(list.status());
  return JsonResponse({{"alerts", *list}, {"now", ctx.state->clock->Now()}});
}

}  // namespace gpuherd::daemon::routes
