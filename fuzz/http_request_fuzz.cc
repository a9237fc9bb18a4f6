// libFuzzer target: the bytes of one HTTP request to the daemon, read as its
// server reads them, then as the API reads them: path parts, integer query
// parameters and, for POST /v1/jobs, the job spec in the body.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "daemon/api.h"
#include "daemon/http_server.h"
#include "sched/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto request = gpuherd::daemon::ParseHttpRequest(bytes, /*max_body_bytes=*/64 * 1024);
  if (!request.ok()) return 0;
  (void)gpuherd::daemon::SplitPath(request->path);
  for (const auto& [name, value] : request->query) {
    int64_t number = 0;
    std::string error;
    (void)gpuherd::daemon::QueryInt(*request, name, &number, &error);
  }
  if (request->method == "POST" && request->path == "/v1/jobs") {
    nlohmann::json body = nlohmann::json::parse(request->body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_discarded()) (void)gpuherd::sched::ParseJobSpec(body);
  }
  return 0;
}
