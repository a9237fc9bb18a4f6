// /v1/pipelines: run a pipeline file, the runs, one run with its nodes, the
// metric lines collected, its report, and cancel and retry.
#include <functional>
#include <memory>
#include <string>

#include "daemon/routes/routes.h"
#include "pipeline/report.h"

namespace gpuherd::daemon::routes {
namespace {

using nlohmann::json;

// A body that needs none of the loop's state is written by the HTTP
// server's thread, as the response's one chunk, not on the loop: for a
// 10,000-node sweep, its JSON is about 0.1 s of writing and its report 0.15 s.
// `write` must own what it reads.
http::Response WrittenOffLoop(std::function<std::string()> write, std::string content_type = "application/json") {
  http::Response response;
  response.content_type = std::move(content_type);
  response.stream = [write = std::move(write)](std::string* chunk) {
    *chunk = write();
    return false;
  };
  return response;
}

// The run's report, as `gpuherd report` writes it.
http::Response Report(RouteContext& ctx, int64_t id, const http::Request& request, const Caller& caller) {
  std::string format = QueryText(request, "format");
  if (format.empty()) format = "html";
  if (format != "html" && format != "md" && format != "csv") {
    return http::ErrorResponse(400, "format must be html, md or csv, got '" + http::Excerpt(format) + "'");
  }
  auto run = ctx.pipelines->Show(id, caller);
  if (!run.ok()) return StatusResponse(run.status());
  auto metrics = ctx.pipelines->Metrics(id, "", caller);
  if (!metrics.ok()) return StatusResponse(metrics.status());
  pipeline::ReportData data;
  data.pipeline = std::move(run).value();
  data.metrics = std::move(metrics).value();
  // GPU-hours count a node's share of a GPU, which its job knows.
  for (const api::PipelineNodeView& node : data.pipeline.nodes) {
    if (node.job_id <= 0 || data.jobs.count(node.job_id)) continue;
    if (auto job = ctx.jobs->Show(node.job_id); job.ok()) data.jobs[node.job_id] = std::move(job).value();
  }
  data.now = ctx.state->clock->Now();
  // What the report reads is copied; summing it up and rendering it is the
  // server thread's.
  auto write = [format, data = std::make_shared<const pipeline::ReportData>(std::move(data))] {
    const pipeline::Report report = pipeline::Summarize(*data);
    if (format == "html") return pipeline::RenderHtml(report, pipeline::EmbeddedChartLibrary());
    return format == "md" ? pipeline::RenderMarkdown(report) : pipeline::RenderCsv(report);
  };
  const char* type = format == "html" ? "text/html; charset=utf-8"
                     : format == "md" ? "text/markdown; charset=utf-8"
                                      : "text/csv; charset=utf-8";
  http::Response response = WrittenOffLoop(std::move(write), type);
  const std::string file = "pipeline-" + std::to_string(id) + "-report." + format;
  response.headers = {{"Content-Disposition", "attachment; filename=\"" + file + "\""}};
  return response;
}

// POST /v1/pipelines's run, read from its body and prepared.
Result<PipelineService::PreparedRun> PrepareRun(PipelineService& pipelines, const http::Request& request,
                                                const Caller& caller) {
  auto body = BodyJson(request, "a JSON object {\"yaml\": \"<the pipeline file>\", ...}");
  if (!body.ok()) return body.status();
  auto create = api::ParsePipelineCreateRequest(*body);
  if (!create.ok()) return create.status();
  return pipelines.Prepare(*create, caller);
}

}  // namespace

Prepared PreparePipelineRequest(const RouteContext& ctx, const http::Request& request, const Caller& caller) {
  Prepared prepared;
  if (ctx.pipelines && caller.authenticated && request.method == "POST" &&
      SplitPath(request.path) == Parts{"v1", "pipelines"}) {
    prepared.pipeline = PrepareRun(*ctx.pipelines, request, caller);
  }
  return prepared;
}

http::Response PipelineRoutes(RouteContext& ctx, const Parts& parts, const http::Request& request,
                              const Caller& caller, Prepared* prepared) {
  const bool read = IsRead(request);
  PipelineService& pipelines = *ctx.pipelines;
  if (parts.size() == 2) {
    if (read) {
      PipelineService::ListFilter filter{QueryFlag(request, "all"), QueryText(request, "state")};
      if (!filter.state.empty() && !PipelineService::IsListedState(filter.state)) {
        return http::ErrorResponse(400, "unknown state '" + http::Excerpt(filter.state) +
                                            "'; a run is running, completed, succeeded, failed or cancelled");
      }
      auto list = pipelines.List(filter, caller);
      return list.ok() ? JsonResponse({{"pipelines", *list}}) : StatusResponse(list.status());
    }
    if (request.method != "POST") return MethodNotAllowed("GET or POST", "/v1/pipelines");
    if (!caller.authenticated) {
      return StatusResponse(Unauthenticated("running a pipeline needs the unix socket or the API token"));
    }
    // Parsed and expanded on the HTTP thread when the daemon could
    // (Routes::Prepare), else here.
    auto run = prepared && prepared->pipeline ? std::move(*prepared->pipeline) : PrepareRun(pipelines, request, caller);
    if (!run.ok()) return StatusResponse(run.status());
    auto created = pipelines.Create(std::move(run).value(), caller);
    return created.ok() ? JsonResponse(json(*created), 201) : StatusResponse(created.status());
  }
  if (parts.size() > 4) return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path));
  auto id = IdFromPath(parts[2], "pipeline run id");
  if (!id.ok()) return StatusResponse(id.status());
  if (parts.size() == 3) {
    if (!read) return MethodNotAllowed("GET", "/v1/pipelines/{id}");
    auto run = pipelines.Show(*id, caller);
    if (!run.ok()) return StatusResponse(run.status());
    return WrittenOffLoop([run = std::make_shared<const api::PipelineDetail>(std::move(run).value())] {
      return json(*run).dump(-1, ' ', false, json::error_handler_t::replace);
    });
  }
  const std::string& what = parts[3];
  if (what == "metrics") {
    if (!read) return MethodNotAllowed("GET", "/v1/pipelines/{id}/metrics");
    auto metrics = pipelines.Metrics(*id, QueryText(request, "node"), caller);
    return metrics.ok() ? JsonResponse({{"metrics", *metrics}}) : StatusResponse(metrics.status());
  }
  if (what == "report") return read ? Report(ctx, *id, request, caller) : MethodNotAllowed("GET", "/v1/pipelines/{id}/report");
  if (what == "cancel" || what == "retry") {
    if (request.method != "POST") return MethodNotAllowed("POST", "/v1/pipelines/{id}/" + what);
    auto state = what == "cancel" ? pipelines.Cancel(*id, caller) : pipelines.Retry(*id, caller);
    return state.ok() ? JsonResponse({{"id", *id}, {"state", *state}}) : StatusResponse(state.status());
  }
  return http::ErrorResponse(404, "no such endpoint " + http::Excerpt(request.path) +
                                      "; pipeline runs have /metrics, /report, /cancel and /retry");
}

}  // namespace gpuherd::daemon::routes
