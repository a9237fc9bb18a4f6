// The JSON HTTP API, version 1. Handle() runs on the event-loop thread and may
// read and change DaemonState; authentication happens before (see daemon.cc).
//
//   GET  /v1/health                     liveness and a fleet summary
//   GET  /v1/version                    program, API and schema versions
//   GET  /v1/gpus                       the fleet with the latest readings
//   GET  /v1/gpus/{index|uuid}          one GPU
//   GET  /v1/gpus/{id}/samples?n=N      the last N readings from memory (ring)
//   GET  /v1/gpus/{id}/rollups?from=&to=&limit=   per-minute min/mean/max
//   GET  /v1/events?after=&since=&gpu=&kind=&limit=
//   POST /v1/events {"message", "gpu"?, "severity"?}   an operator's note (token)
//   POST /v1/shutdown                   stops the daemon (admin)
//   POST /v1/jobs {spec}                submits a job → {"id"}
//   GET  /v1/jobs?all=&user=&state=     the queue
//   GET  /v1/jobs/{id}                  one job, with why it is pending
//   GET  /v1/jobs/{id}/logs?stream=&offset=   a piece of its output
//   POST /v1/jobs/{id}/{cancel|hold|release|requeue}
//   POST /v1/gpus/{id}/{drain|undrain} {"reason"?}   (admin)
//   POST /v1/pipelines {"yaml", "source"?, "base_dir"?, "params"?}   runs a pipeline → {"id", "nodes"}
//   GET  /v1/pipelines?all=1            runs (own; an admin's: all) with node counts
//   GET  /v1/pipelines/{id}             one run, its nodes, their latest and best metrics
//   GET  /v1/pipelines/{id}/metrics?node=ID   the metric lines collected
//   POST /v1/pipelines/{id}/{cancel|retry}
//   GET  /v1/burnin/runs?gpu=&model=&limit=&latest=1  stored burn-ins, newest first
//   POST /v1/burnin/runs {"runs": [...]}   records burn-ins run outside the daemon (admin)
//   GET  /v1/alerts?all=1               pending and firing alerts (all: and resolved in the last day)
//   GET  /metrics                       Prometheus exposition; open without a token, as a
//                                       scrape target (a read, like every GET)
//   GET  /v1/gpus/history, /v1/jobs/{id}/metrics, /v1/pipelines/{id}/report
//                                       the dashboard's reads (dashboard_api.h, routed first)
//   GET  /, /assets/*                   the web dashboard's files (dashboard.h)
#pragma once

#include <functional>
#include <optional>

#include "daemon/alert_service.h"
#include "daemon/burnin_jobs.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/http_server.h"
#include "daemon/job_service.h"
#include "daemon/pipeline_service.h"
#include "daemon/metrics_service.h"

namespace gpuherd::daemon {

// Whether a request changes state: on TCP it then needs the token; on the
// unix socket the peer credentials say who asks.
bool IsMutation(const HttpRequest& request);

class Api {
 public:
  // `state` must outlive the Api; `request_stop` is called (on the loop
  // thread) by POST /v1/shutdown.
  Api(DaemonState* state, JobService* jobs, std::function<void()> request_stop)
      : state_(state), jobs_(jobs), request_stop_(std::move(request_stop)) {}

  HttpResponse Handle(const HttpRequest& request, const Caller& caller);
  // Serves /v1/pipelines with `pipelines` (must outlive the Api); without
  // it those routes answer 404.
  void SetPipelines(PipelineService* pipelines) { pipelines_ = pipelines; }
  // Enables POST /v1/burnin: burn-ins as maintenance jobs of the queue.
  void SetBurnInLauncher(BurnInLauncher launcher) { burnin_launcher_ = std::move(launcher); }
  // Enables GET /v1/alerts and GET /metrics; both must outlive the Api.
  void SetMonitoring(AlertService* alerts, MetricsService* metrics) {
    alerts_ = alerts;
    metrics_ = metrics;
  }

 private:
  // Handle() without stamping the caller on the events.
  HttpResponse Route(const HttpRequest& request, const Caller& caller);
  HttpResponse Health();
  HttpResponse Version();
  HttpResponse Gpus();
  HttpResponse Gpu(const std::string& id);
  HttpResponse Samples(const std::string& id, const HttpRequest& request);
  HttpResponse Rollups(const std::string& id, const HttpRequest& request);
  HttpResponse Events(const HttpRequest& request);
  HttpResponse AddEvent(const HttpRequest& request, const Caller& caller);
  HttpResponse Shutdown(const Caller& caller);
  HttpResponse Jobs(const std::vector<std::string>& parts, const HttpRequest& request, const Caller& caller);
  HttpResponse Pipelines(const std::vector<std::string>& parts, const HttpRequest& request, const Caller& caller);
  HttpResponse StartBurnIn(const HttpRequest& request, const Caller& caller);
  HttpResponse DrainGpu(const std::string& id, bool drain, const HttpRequest& request, const Caller& caller);
  // Adds "drained" and "drain_reason" to a GPU's JSON; state "drained" when ok.
  void MarkDrained(nlohmann::json& gpu) const;
  // Adds "failure_risk" where the risk model has scored the GPU.
  void MarkRisk(nlohmann::json& gpu) const;
  // Index of the GPU named by an index or UUID, or -1.
  int FindGpu(const std::string& id) const;

  DaemonState* state_;
  JobService* jobs_;
  PipelineService* pipelines_ = nullptr;
  std::function<void()> request_stop_;
  std::optional<BurnInLauncher> burnin_launcher_;
  AlertService* alerts_ = nullptr;
  MetricsService* metrics_ = nullptr;
};

HttpResponse JsonResponse(const nlohmann::json& body, int status = 200);
// "/v1/jobs/7/logs" → {"v1", "jobs", "7", "logs"}.
std::vector<std::string> SplitPath(const std::string& path);
// The bound of every integer query parameter, 2^53: far beyond any id, time
// (ms) or offset, and small enough that adding one or subtracting two of
// them never overflows.
inline constexpr int64_t kMaxQueryInt = int64_t{1} << 53;
// An integer query parameter: true and `out` untouched when absent; false
// with `error` naming the parameter and the range when malformed or beyond
// ±kMaxQueryInt.
bool QueryInt(const HttpRequest& request, const std::string& name, int64_t* out, std::string* error);
// The HTTP status for a Status (400 invalid, 404 not found, 403 denied, ...).
HttpResponse StatusResponse(const Status& status);

}  // namespace gpuherd::daemon
