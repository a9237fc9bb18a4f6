// The JSON HTTP API, version 1: one file per resource in this folder, where
// a request becomes a typed call on a service and its answer becomes JSON.
// Handle() runs on the event-loop thread and may read and change
// DaemonState; who is asking (Caller) and the Host check are settled before
// (daemon.cc, access.h). docs/http-api.md lists every route.
//
//   system.cc     /v1/health, /v1/version, /v1/shutdown, /metrics
//   gpus.cc       /v1/gpus[/{id}[/samples|/rollups|/drain|/undrain]], /v1/gpus/history
//   events.cc     /v1/events
//   jobs.cc       /v1/jobs[/{id}[/logs|/metrics|/{action}]]
//   pipelines.cc  /v1/pipelines[/{id}[/metrics|/report|/cancel|/retry]]
//   burnin.cc     /v1/burnin, /v1/burnin/runs
//   alerts.cc     /v1/alerts
//   acct.cc       /v1/acct, and the spec and attempts in /v1/jobs/{id}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/routes/common.h"
#include "http/json_body.h"

namespace gpuherd::daemon::routes {

using Parts = std::vector<std::string>;

http::Response SystemRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);
http::Response MetricsRoute(RouteContext& ctx, const http::Request& request);
http::Response GpuRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);
http::Response EventRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);
http::Response JobRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);
// What a request needs that reads none of the daemon's state, worked out on
// the HTTP thread before it goes to the loop (Routes::Prepare): POST
// /v1/pipelines parses and expands its file there, and the loop only stores
// the run.
struct Prepared {
  std::optional<Result<PipelineService::PreparedRun>> pipeline;
};
// Thread-safe: reads only `ctx.pipelines`, whose Prepare() is.
Prepared PreparePipelineRequest(const RouteContext& ctx, const http::Request& request, const Caller& caller);
http::Response PipelineRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request,
                              const Caller& caller, Prepared* prepared = nullptr);
http::Response BurnInRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);
http::Response AlertRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);

http::Response AcctRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller);
// Adds "spec" (what the caller may see of it) and "attempts" to one job's view.
Status AddJobDetail(RouteContext& ctx, int64_t id, bool may_see_internals, nlohmann::json* job);

// GET /v1/gpus/history over more than an hour averages stored minutes: a
// week of 64 GPUs took 3 s, too long to hold the event loop. The daemon
// answers it on the HTTP thread instead: LongHistorySeconds says whether a
// request is such a read (nullopt: route it as usual, which also answers a
// malformed one), LongHistoryInputs copies on the loop what the answer needs,
// and AnswerLongHistory reads with a store connection of the caller's own.
struct LongHistory {
  TimeMs now = 0;
  int64_t seconds = 0;
  std::vector<gpu::GpuInfo> gpus;
};
std::optional<int64_t> LongHistorySeconds(const http::Request& request);
LongHistory LongHistoryInputs(const DaemonState& state, int64_t seconds);
http::Response AnswerLongHistory(const LongHistory& inputs, store::Store& reader);

class Routes {
 public:
  explicit Routes(RouteContext context) : ctx_(std::move(context)) {}

  // Thread-safe (any thread, before Handle): see Prepared.
  Prepared Prepare(const http::Request& request, const Caller& caller) const {
    return PreparePipelineRequest(ctx_, request, caller);
  }
  // `prepared`, when given, is what Prepare() made of this request.
  http::Response Handle(const http::Request& request, const Caller& caller, Prepared* prepared = nullptr);

 private:
  http::Response Route(const http::Request& request, const Caller& caller, Prepared* prepared);

  RouteContext ctx_;
};

}  // namespace gpuherd::daemon::routes
