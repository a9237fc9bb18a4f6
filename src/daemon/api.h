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
//   POST /v1/shutdown                   stops the daemon (token)
#pragma once

#include <functional>

#include "daemon/daemon_state.h"
#include "daemon/http_server.h"

namespace gpuherd::daemon {

// Whether a route changes state (and so needs the token). Unknown routes are
// not mutations: they get their 404 without a token.
bool IsMutation(const HttpRequest& request);

class Api {
 public:
  // `state` must outlive the Api; `request_stop` is called (on the loop
  // thread) by POST /v1/shutdown.
  Api(DaemonState* state, std::function<void()> request_stop)
      : state_(state), request_stop_(std::move(request_stop)) {}

  HttpResponse Handle(const HttpRequest& request);

 private:
  HttpResponse Health();
  HttpResponse Version();
  HttpResponse Gpus();
  HttpResponse Gpu(const std::string& id);
  HttpResponse Samples(const std::string& id, const HttpRequest& request);
  HttpResponse Rollups(const std::string& id, const HttpRequest& request);
  HttpResponse Events(const HttpRequest& request);
  HttpResponse AddEvent(const HttpRequest& request);
  HttpResponse Shutdown();
  // Index of the GPU named by an index or UUID, or -1.
  int FindGpu(const std::string& id) const;

  DaemonState* state_;
  std::function<void()> request_stop_;
};

HttpResponse JsonResponse(const nlohmann::json& body, int status = 200);

}  // namespace gpuherd::daemon
