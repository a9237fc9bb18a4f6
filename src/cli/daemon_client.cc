#include "cli/daemon_client.h"

#include <sys/random.h>

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <random>

#include <fmt/format.h>

#include "core/time.h"
#include "http/token.h"
#include "http/json_body.h"

namespace gpuherd::cli {

std::string QueryEscape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}
namespace {

// As large as the client reads (a queue of many thousand jobs).
constexpr http::JsonLimits kReplyLimits{.max_bytes = size_t{256} << 20, .max_depth = 64};

DurationMs TimeoutFor(DurationMs asked) {
  const char* env = std::getenv("GPUHERD_CLIENT_TIMEOUT");
  DurationMs from_env = 0;
  if (asked == DaemonClient::kDefaultTimeoutMs && env && *env && ParseDuration(env, &from_env) && from_env > 0) {
    return from_env;
  }
  return asked;
}

// 128 random bits: a key no other request of this user will send. From
// getrandom(2), not std::random_device, whose set-up probes the CPU for
// RDRAND: a trap to the hypervisor on a VM, paid by every submit.
std::string NewIdempotencyKey() {
  uint32_t words[4] = {};
  size_t got = 0;
  while (got < sizeof(words)) {
    ssize_t n = getrandom(reinterpret_cast<char*>(words) + got, sizeof(words) - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
    else if (errno != EINTR) break;
  }
  if (got < sizeof(words)) {  // no entropy source at all: the device, as before
    std::random_device random;
    for (uint32_t& word : words) word = random();
  }
  return fmt::format("cli-{:08x}{:08x}{:08x}{:08x}", words[0], words[1], words[2], words[3]);
}

// Whether nothing listens on the socket at all (no file there, or nobody
// accepting): no request reached a daemon.
bool NoDaemonThere(const Status& s) {
  if (s.code() != Code::kUnavailable || s.message().rfind("cannot reach ", 0) != 0) return false;
  return s.message().find(": no socket there") != std::string::npos ||
         s.message().find(": connection refused") != std::string::npos;
}

}  // namespace

Status SaidAsNoDaemon(const StateDir& dir, const Status& status) {
  // Said as what to do, not as the socket's errno.
  if (!NoDaemonThere(status)) return status;
  return Unavailable("no daemon answers on " + dir.socket_path() + "; start one with `gpuherd daemon --home " +
                     dir.root + "`");
}

DaemonClient::DaemonClient(StateDir dir, DurationMs timeout)
    : dir_(std::move(dir)), http_(http::Endpoint{dir_.socket_path()}, TimeoutFor(timeout)) {}

bool DaemonClient::Reachable() { return Get("/v1/health").ok(); }

Result<nlohmann::json> DaemonClient::Decode(const Result<http::ClientResponse>& response, const std::string& target) {
  if (!response.ok()) {
    return SaidAsNoDaemon(dir_, response.status());
  }
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
  headers["Idempotency-Key"] = NewIdempotencyKey();
  const std::string text = body.dump();
  Result<http::ClientResponse> response = http_.Request("POST", target, text, headers);
  // No answer is not "not done": the daemon may have acted. The same key
  // makes the second try return the first outcome instead of acting again.
  if (!response.ok() && response.status().code() == Code::kUnavailable && !NoDaemonThere(response.status())) {
    response = http_.Request("POST", target, text, headers);
    if (!response.ok()) {
      return Status(response.status().code(),
                    response.status().message() + " (tried twice; if the daemon got it, it acted once: check " +
                        "before you send it again)");
    }
  }
  return Decode(response, target);
}

}  // namespace gpuherd::cli
