#include "cli/daemon_client.h"

#include "http/token.h"
#include "http/json_body.h"

namespace gpuherd::cli {
namespace {

// As large as the client reads (a queue of many thousand jobs).
constexpr http::JsonLimits kReplyLimits{.max_bytes = size_t{256} << 20, .max_depth = 64};

}  // namespace

DaemonClient::DaemonClient(StateDir dir, DurationMs timeout)
    : dir_(std::move(dir)), http_(http::Endpoint{dir_.socket_path()}, timeout) {}

bool DaemonClient::Reachable() { return Get("/v1/health").ok(); }

Result<nlohmann::json> DaemonClient::Decode(const Result<http::ClientResponse>& response, const std::string& target) {
  if (!response.ok()) return response.status();
  if (response->status >= 200 && response->status < 300) {
    Result<nlohmann::json> body = http::ParseJson(response->body, kReplyLimits);
    if (!body.ok()) {
      return Internal("the daemon's reply to " + target + " is not usable: " + body.status().message());
    }
    return body;
  }
  return http::StatusFromResponse(*response);
}

Result<nlohmann::json> DaemonClient::Get(const std::string& target) {
  return Decode(http_.Request("GET", target), target);
}

Result<nlohmann::json> DaemonClient::Post(const std::string& target, const nlohmann::json& body) {
  std::map<std::string, std::string> headers = {{"Content-Type", "application/json"}};
  // On the unix socket the daemon knows the caller from its peer credentials;
  // the token, where this user can read it, adds the operator's rights.
  if (auto token = http::ReadToken(dir_); token.ok()) headers["Authorization"] = "Bearer " + *token;
  return Decode(http_.Request("POST", target, body.dump(), headers), target);
}

}  // namespace gpuherd::cli
