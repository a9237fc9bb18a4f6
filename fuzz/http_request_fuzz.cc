// libFuzzer target: the bytes of one HTTP request to the daemon, read as its
// server reads them (http::ParseRequest: Beast's parser with the server's
// limits, the target's percent-decoding, the headers' folding), then as the
// API reads them: the path parts and ids, integer query parameters, the
// Idempotency-Key header and, for a POST, the body as a bounded JSON value
// and a job spec.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "daemon/idempotency.h"
#include "daemon/routes/common.h"
#include "http/json_body.h"
#include "http/request_parser.h"
#include "sched/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace routes = gpuherd::daemon::routes;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gpuherd::http::RequestLimits limits;
  limits.max_body_bytes = 64 * 1024;  // the same code paths as 1 MiB, found sooner
  gpuherd::http::ParsedRequest parsed = gpuherd::http::ParseRequest(bytes, limits);
  if (!parsed.ok) {
    // Every refusal is a 4xx with a message, or nothing (incomplete).
    if (parsed.failure.status != 0 && (parsed.failure.status < 400 || parsed.failure.status > 499)) __builtin_trap();
    return 0;
  }
  const gpuherd::http::Request& request = parsed.request;
  for (const std::string& part : routes::SplitPath(request.path)) (void)routes::IdFromPath(part, "id");
  for (const auto& [name, value] : request.query) (void)routes::QueryInt(request, name, 0, INT64_MIN, INT64_MAX);
  (void)gpuherd::daemon::IdempotencyKeyOf(request);
  if (routes::IsMutation(request)) {
    (void)gpuherd::daemon::RequestFingerprint(request);
    auto body = routes::BodyJson(request, "a JSON object");
    if (body.ok() && request.path == "/v1/jobs") (void)gpuherd::sched::ParseJobSpec(*body);
  }
  return 0;
}
