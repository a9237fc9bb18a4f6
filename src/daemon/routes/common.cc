#include "daemon/routes/common.h"

#include <charconv>

#include <fmt/format.h>

#include "http/json_body.h"

namespace gpuherd::daemon::routes {

using nlohmann::json;

// Request bodies are job specs, pipelines and burn-in records: nothing that
// nests deeper than this is legitimate.
constexpr http::JsonLimits kBodyLimits{.max_bytes = size_t{4} << 20, .max_depth = 32};

http::Response JsonResponse(const json& body, int status) {
  http::Response response;
  response.status = status;
  // Job logs may hold bytes that are not UTF-8; they are replaced, not fatal.
  response.body = body.dump(-1, ' ', false, json::error_handler_t::replace);
  return response;
}

http::Response StatusResponse(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return JsonResponse(json::object());
    case Code::kInvalidArgument: return http::ErrorResponse(400, s.message());
    case Code::kUnauthenticated: return http::ErrorResponse(401, s.message());
    case Code::kPermissionDenied: return http::ErrorResponse(403, s.message());
    case Code::kNotFound: return http::ErrorResponse(404, s.message());
    case Code::kAlreadyExists: return http::ErrorResponse(409, s.message());
    case Code::kFailedPrecondition: return http::ErrorResponse(412, s.message());
    case Code::kResourceExhausted: return http::ErrorResponse(429, s.message());
    case Code::kUnavailable: return http::ErrorResponse(503, s.message());
    default: return http::ErrorResponse(500, s.message());
  }
}

http::Response MethodNotAllowed(const std::string& allowed, const std::string& path) {
  http::Response response = http::ErrorResponse(405, "use " + allowed + " for " + path);
  response.headers.emplace_back("Allow", allowed == "GET" ? "GET, HEAD" : allowed == "GET or POST" ? "GET, HEAD, POST" : allowed);
  return response;
}

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool IsRead(const http::Request& request) { return request.method == "GET" || request.method == "HEAD"; }

bool IsMutation(const http::Request& request) { return !IsRead(request); }

Result<int64_t> IdFromPath(const std::string& part, const std::string& what) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), id);
  if (ec != std::errc() || ptr != part.data() + part.size() || id <= 0) {
    return InvalidArgument(what + " must be a positive integer, got '" + http::Excerpt(part) + "'");
  }
  return id;
}

Result<int64_t> QueryInt(const http::Request& request, const std::string& name, int64_t fallback, int64_t min,
                         int64_t max) {
  auto it = request.query.find(name);
  if (it == request.query.end()) return fallback;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || value < min || value > max) {
    return InvalidArgument(fmt::format("query parameter '{}' must be an integer from {} to {}, got '{}'", name, min,
                                       max, http::Excerpt(text)));
  }
  return value;
}

std::string QueryText(const http::Request& request, const std::string& name) {
  auto it = request.query.find(name);
  return it == request.query.end() ? std::string() : it->second;
}

bool QueryFlag(const http::Request& request, const std::string& name) {
  std::string value = QueryText(request, name);
  return value == "1" || value == "true";
}

Result<json> BodyJson(const http::Request& request, const std::string& shape, std::optional<json> empty_as) {
  if (request.body.empty() && empty_as) return *empty_as;
  auto body = http::ParseJson(request.body, kBodyLimits);
  if (!body.ok()) return InvalidArgument("the body must be " + shape + ": " + body.status().message());
  return body;
}

Result<int> FindGpu(const DaemonState& state, const std::string& id) {
  int position = gpu::FindGpu(state.fleet.gpus, id);
  if (position < 0) {
    return NotFound("no GPU '" + http::Excerpt(id) + "' (give an index or a UUID; GET /v1/gpus lists them)");
  }
  return position;
}

}  // namespace gpuherd::daemon::routes
