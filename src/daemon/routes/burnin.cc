// /v1/burnin: burn-ins as maintenance jobs of the queue, and the stored runs
// (including those made outside the daemon, recorded here).
#include <set>

#include "api/burnins.h"
#include "burnin/result.h"
#include "daemon/routes/routes.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

// POST /v1/burnin {"level", "gpus"}: plans the burn-in job and queues it.
http::Response Start(RouteContext& ctx, const http::Request& request, const Caller& caller) {
  // It takes GPUs away from everyone's work for its duration.
  if (!caller.admin) {
    return http::ErrorResponse(403, "only an admin (root, the daemon's user or the admin group) may start a burn-in: "
                                    "it takes the GPUs from everyone's jobs while it runs");
  }
  auto body = BodyJson(request, "JSON, like {\"level\": 1, \"gpus\": \"all\"}", json::object());
  if (!body.ok()) return StatusResponse(body.status());
  auto parsed = api::ParseBurnInRequest(*body);
  if (!parsed.ok()) return StatusResponse(parsed.status());
  auto job = PlanBurnInJob(*parsed, ctx.state->fleet, *ctx.burnin_launcher);
  if (!job.ok()) return StatusResponse(job.status());
  auto id = ctx.jobs->Submit(job->spec, caller, job->extras);
  if (!id.ok()) return StatusResponse(id.status());
  json gpus = json::array();
  for (int p : job->positions) {
    gpus.push_back({{"index", ctx.state->fleet.gpus[p].index}, {"uuid", ctx.state->fleet.gpus[p].uuid}});
  }
  return JsonResponse({{"id", *id}, {"gpus", gpus}, {"name", job->spec.name}}, 201);
}

// GET /v1/burnin/runs?gpu=&model=&limit=&latest=1. GPUs tested outside the
// fleet (a simulated one) are found among the stored runs.
http::Response ListRuns(const RouteContext& ctx, const http::Request& request) {
  auto limit = QueryInt(request, "limit", 20, 1, 10000);
  if (!limit.ok()) return StatusResponse(limit.status());
  DaemonState& state = *ctx.state;
  store::BurnInFilter filter;
  filter.limit = static_cast<int>(*limit);
  if (std::string gpu = QueryText(request, "gpu"); !gpu.empty()) {
    int position = gpu::FindGpu(state.fleet.gpus, gpu);
    if (position >= 0) {
      filter.gpu_uuid = state.fleet.gpus[position].uuid;
    } else {
      auto uuid = api::FindBurnInGpu(*state.store, gpu);
      if (!uuid.ok()) return StatusResponse(uuid.status());
      filter.gpu_uuid = *uuid;
    }
  }
  filter.gpu_name = QueryText(request, "model");
  const bool only_latest = QueryFlag(request, "latest");
  auto rows = only_latest ? state.store->LatestBurnInPerGpu() : state.store->ListBurnInRuns(filter);
  if (!rows.ok()) return StatusResponse(rows.status());
  json runs = json::array();
  for (const store::BurnInRecord& row : *rows) {
    if (only_latest && !filter.gpu_uuid.empty() && row.gpu_uuid != filter.gpu_uuid) continue;
    if (only_latest && !filter.gpu_name.empty() && row.gpu_name != filter.gpu_name) continue;
    json run = json::parse(row.json, nullptr, /*allow_exceptions=*/false);
    if (!run.is_object()) {
      return http::ErrorResponse(500, "stored burn-in run " + std::to_string(row.id) + " is not a JSON object");
    }
    run["id"] = row.id;  // assigned by the store after the record was written
    runs.push_back(std::move(run));
  }
  return JsonResponse({{"runs", runs}});
}

// POST /v1/burnin/runs {"runs": [...]}: runs made outside the daemon (the
// CLI's --direct mode) recorded in the daemon's store, with their events.
http::Response RecordRuns(RouteContext& ctx, const http::Request& request, const Caller& caller) {
  // A verdict keeps a GPU away from work, so only an admin may record one.
  if (!caller.admin) {
    return http::ErrorResponse(403, "only an admin (root, the daemon's user or the admin group) may record "
                                    "burn-in results: they decide which GPUs get work");
  }
  constexpr char kShape[] =
      "a JSON object {\"runs\": [...]} of burn-in records (as `gpuherd burnin --json` prints them)";
  auto body = BodyJson(request, kShape);
  if (!body.ok()) return StatusResponse(body.status());
  if (!body->is_object() || !body->contains("runs") || !(*body)["runs"].is_array()) {
    return http::ErrorResponse(400, std::string("body must be ") + kShape);
  }
  std::vector<burnin::BurnInRun> runs;
  for (size_t i = 0; i < (*body)["runs"].size(); ++i) {
    auto run = burnin::BurnInRunFromJson((*body)["runs"][i]);
    Status valid = run.ok() ? api::ValidateForStore(*run) : run.status();
    if (!valid.ok()) return http::ErrorResponse(400, "run " + std::to_string(i) + ": " + valid.message());
    run->id = 0;  // the store assigns it
    runs.push_back(std::move(*run));
  }
  DaemonState& state = *ctx.state;
  for (const burnin::BurnInRun& run : runs) {
    state.batch.events.push_back(api::BurnInEvent(run));
    state.batch.burnin_runs.push_back(api::ToBurnInRecord(run));
  }
  json returned = json::array();
  // Self-healing decides about the GPUs it keeps out (a requalification's
  // result included); a plain burn-in returns the others as before.
  std::set<int> decided;
  if (ctx.self_heal) decided = ctx.self_heal->OnBurnInRuns(runs);
  std::vector<burnin::BurnInRun> plain;
  for (const burnin::BurnInRun& run : runs) {
    int pos = gpu::FindGpu(state.fleet.gpus, run.gpu_uuid);
    if (pos < 0 || !decided.count(pos)) plain.push_back(run);
  }
  if (ctx.jobs) {
    for (int pos : ReturnPassedGpus(plain, state.fleet, ctx.jobs)) returned.push_back(state.fleet.gpus[pos].index);
  }
  return JsonResponse({{"recorded", runs.size()}, {"returned_to_work", returned}}, 201);
}

}  // namespace

http::Response BurnInRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request, const Caller& caller) {
  if (parts.size() == 2 && ctx.burnin_launcher) {
    return request.method == "POST" ? Start(ctx, request, caller) : MethodNotAllowed("POST", "/v1/burnin");
  }
  if (parts.size() == 3 && parts[2] == "runs") {
    if (IsRead(request)) return ListRuns(ctx, request);
    if (request.method == "POST") return RecordRuns(ctx, request, caller);
    return MethodNotAllowed("GET or POST", "/v1/burnin/runs");
  }
  return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
}

}  // namespace gpuherd::daemon::routes
