// The /v1 endpoints the web dashboard needs beyond the API's own (api.h).
// They are reads: open over TCP without the token, like every GET.
//
//   GET /v1/gpus/history?seconds=S&since=T   every GPU's utilization, memory,
//       temperature and power over the last S seconds (default 3600), as
//       columns; with since=T only readings after T (ms), for polling. The
//       in-memory ring gives the readings; where it does not reach back far
//       enough (a restarted daemon) the stored per-minute means fill in.
//   GET /v1/jobs/{id}/metrics                the metric lines a job wrote to
//       GPUHERD_METRICS_FILE, by step
//   GET /v1/pipelines/{id}/report?format=html|md|csv   the run's report, as
//       `gpuherd report` writes it (visible to whoever may see the run)
#pragma once

#include <optional>

#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "http/server.h"
#include "daemon/job_service.h"
#include "daemon/pipeline_service.h"

namespace gpuherd::daemon {

class DashboardApi {
 public:
  // All must outlive the DashboardApi; `pipelines` may be null (no report).
  DashboardApi(DaemonState* state, JobService* jobs, PipelineService* pipelines)
      : state_(state), jobs_(jobs), pipelines_(pipelines) {}

  // Runs on the event-loop thread. Answers the routes above; nullopt for
  // every other request, which then goes to the Api.
  std::optional<http::Response> Handle(const http::Request& request, const Caller& caller);

 private:
  http::Response History(const http::Request& request);
  http::Response JobMetrics(int64_t id);
  http::Response Report(int64_t id, const http::Request& request, const Caller& caller);

  DaemonState* state_;
  JobService* jobs_;
  PipelineService* pipelines_;
};

}  // namespace gpuherd::daemon
