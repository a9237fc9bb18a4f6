// What every route file shares: the services a route may call, typed reading
// of a request (ids, query numbers, a bounded JSON body) and JSON responses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "daemon/alert_service.h"
#include "daemon/attempt_log.h"
#include "daemon/burnin_jobs.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/job_service.h"
#include "daemon/metrics_service.h"
#include "daemon/pipeline_service.h"
#include "daemon/routes/job_listing.h"
#include "daemon/self_heal_service.h"
#include "http/server.h"

namespace gpuherd::daemon::routes {

// The services behind the routes; all outlive the routes. A null service
// turns its routes off (404).
struct RouteContext {
  DaemonState* state = nullptr;
  JobService* jobs = nullptr;
  AttemptLog* attempts = nullptr;  // the running attempts' use so far (show, acct)
  PipelineService* pipelines = nullptr;
  AlertService* alerts = nullptr;
  MetricsService* metrics = nullptr;
  SelfHealService* self_heal = nullptr;  // GPU states; null: not shown
  std::optional<BurnInLauncher> burnin_launcher;
  // GET /v1/jobs's written jobs, kept between answers.
  std::shared_ptr<JobListingWriter> job_listing = std::make_shared<JobListingWriter>();
  std::function<void()> request_stop;  // POST /v1/shutdown, on the loop thread
};

http::Response JsonResponse(const nlohmann::json& body, int status = 200);
// The HTTP status for a Status (400 invalid, 404 not found, 403 denied, ...).
http::Response StatusResponse(const Status& status);
// 405 naming the methods the path takes.
http::Response MethodNotAllowed(const std::string& allowed, const std::string& path);

// "/v1/jobs/7/logs" → {"v1", "jobs", "7", "logs"}.
std::vector<std::string> SplitPath(const std::string& path);
bool IsRead(const http::Request& request);      // GET or HEAD
// Whether a request changes state: on TCP it then needs the token; on the
// unix socket the peer credentials say who asks.
bool IsMutation(const http::Request& request);

// A positive id from a path part; kInvalidArgument naming `what` ("job id").
Result<int64_t> IdFromPath(const std::string& part, const std::string& what);
// An integer query parameter within [min, max]: `fallback` when absent,
// kInvalidArgument naming the parameter and the range otherwise.
Result<int64_t> QueryInt(const http::Request& request, const std::string& name, int64_t fallback, int64_t min,
                         int64_t max);
// The parameter's value, "" when absent.
std::string QueryText(const http::Request& request, const std::string& name);
// True for "1" and "true".
bool QueryFlag(const http::Request& request, const std::string& name);

// The body as JSON, bounded in size and nesting (http/json_body.h); an empty
// body is `empty_as` when given. kInvalidArgument otherwise, naming `shape`
// ("a job spec, a JSON object like ...").
Result<nlohmann::json> BodyJson(const http::Request& request, const std::string& shape,
                                std::optional<nlohmann::json> empty_as = std::nullopt);

// The position of the fleet's GPU named by an index or UUID, or 404.
Result<int> FindGpu(const DaemonState& state, const std::string& id);

}  // namespace gpuherd::daemon::routes
