#include "daemon/idempotency.h"

#include <openssl/evp.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuherd::daemon {
namespace {

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == ':' || c == '-';
}

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    // Without a digest the size still tells most different bodies apart.
    return "size:" + std::to_string(data.size());
  }
  std::string hex;
  hex.reserve(2 * length);
  constexpr char kHex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

http::Response Replay(const store::IdempotencyRecord& first) {
  http::Response response;
  response.status = first.status;
  response.content_type = first.content_type;
  response.body = first.body;
  response.headers.emplace_back(kReplayedHeader, "true");
  return response;
}

}  // namespace

Result<std::optional<std::string>> IdempotencyKeyOf(const http::Request& request) {
  if (request.method == "GET" || request.method == "HEAD") return std::optional<std::string>();
  auto it = request.headers.find("idempotency-key");
  if (it == request.headers.end()) return std::optional<std::string>();
  const std::string& key = it->second;
  bool valid = !key.empty() && key.size() <= kMaxIdempotencyKeyBytes;
  for (size_t i = 0; valid && i < key.size(); ++i) valid = IsKeyChar(key[i]);
  if (!valid) {
    return InvalidArgument(fmt::format(
        "the Idempotency-Key header must be 1 to {} characters of A-Z, a-z, 0-9, '.', '_', ':' and '-' (one "
        "header, sent once), such as a random UUID",
        kMaxIdempotencyKeyBytes));
  }
  return std::optional<std::string>(key);
}

std::string RequestFingerprint(const http::Request& request) {
  return request.method + " " + request.target + " sha256:" + Sha256Hex(request.body);
}

http::Response IdempotencyKeys::Run(uint32_t uid, const std::string& key, const http::Request& request,
                                    const std::function<http::Response()>& handle) {
  const TimeMs now = state_->clock->Now();
  const std::string fingerprint = RequestFingerprint(request);
  std::optional<store::IdempotencyRecord> first;
  // This turn's outcomes are not committed yet: a retry queued behind its
  // first attempt finds it here.
  for (const auto& pending : state_->batch.idempotency) {
    if (pending.uid == uid && pending.key == key) first = pending;
  }
  if (!first) {
    auto stored = state_->store->GetIdempotency(uid, key);
    if (!stored.ok()) {
      spdlog::error("{}", stored.status().ToString());
      return http::ErrorResponse(503, "cannot read the idempotency keys of the daemon's database; nothing was "
                                      "done, try again later");
    }
    if (stored->has_value() && (*stored)->created >= now - kIdempotencyKeyLifetime) first = **stored;
  }
  if (first) {
    if (first->request != fingerprint) {
      return http::ErrorResponse(
          422, "this Idempotency-Key was first sent with another request (" +
                   first->request.substr(0, first->request.rfind(" sha256:")) +
                   "); use a new key for each request");
    }
    return Replay(*first);
  }

  http::Response response = handle();
  if (response.status >= 500 || response.stream) return response;
  store::IdempotencyRecord record;
  record.uid = uid;
  record.key = key;
  record.request = fingerprint;
  record.created = now;
  record.status = response.status;
  record.content_type = response.content_type;
  record.body = response.body;
  if (record.body.size() > kMaxKeptOutcomeBytes) {
    record.body = R"({"note": "the first reply to this request was too long to keep"})";
    record.content_type = "application/json";
  }
  state_->batch.idempotency.push_back(std::move(record));
  // Expired keys go at most once an hour, in the same commit.
  if (now - last_expiry_ >= kHourMs) {
    last_expiry_ = now;
    state_->batch.idempotency_expire_before = now - kIdempotencyKeyLifetime;
  }
  return response;
}

}  // namespace gpuherd::daemon
