#include "cli/daemon_client.h"

#include "daemon/auth.h"

namespace gpuherd::cli {

DaemonClient::DaemonClient(StateDir dir, DurationMs timeout)
    : dir_(std::move(dir)), http_(HttpEndpoint{dir_.socket_path()}, timeout) {}

bool DaemonClient::Reachable() { return Get("/v1/health").ok(); }

Result<nlohmann::json> DaemonClient::Decode(const Result<ClientResponse>& response, const std::string& target) {
  if (!response.ok()) return response.status();
  nlohmann::json body = nlohmann::json::parse(response->body, nullptr, /*allow_exceptions=*/false);
  if (response->status >= 200 && response->status < 300) {
    if (body.is_discarded()) return Internal("the daemon sent a reply that is not JSON for " + target);
    return body;
  }
  return StatusFromResponse(*response);
}

Result<nlohmann::json> DaemonClient::Get(const std::string& target) {
  return Decode(http_.Request("GET", target), target);
}

Result<nlohmann::json> DaemonClient::Post(const std::string& target, const nlohmann::json& body) {
  std::map<std::string, std::string> headers = {{"Content-Type", "application/json"}};
  // On the unix socket the daemon knows the caller from its peer credentials;
  // the token, where this user can read it, adds the operator's rights.
  if (auto token = daemon::ReadToken(dir_); token.ok()) headers["Authorization"] = "Bearer " + *token;
  return Decode(http_.Request("POST", target, body.dump(), headers), target);
}

}  // namespace gpuherd::cli
