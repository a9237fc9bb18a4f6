// Idempotent mutations: a mutating request may carry an `Idempotency-Key`
// header; the first outcome for (caller uid, key) is committed in the same
// transaction as what the request changed, and a request repeating the key
// gets that outcome back without acting again. So a client that timed out
// (a daemon stopped or slow) may retry with the same key and never submit
// twice. Keys expire after kIdempotencyKeyLifetime.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/time.h"
#include "daemon/daemon_state.h"
#include "http/server.h"

namespace gpuherd::daemon {

constexpr size_t kMaxIdempotencyKeyBytes = 128;
constexpr DurationMs kIdempotencyKeyLifetime = 24 * kHourMs;
// A first outcome longer than this is kept as a short note instead (mutations
// answer with a few hundred bytes).
constexpr size_t kMaxKeptOutcomeBytes = 64 * 1024;
constexpr char kReplayedHeader[] = "Idempotent-Replayed";

// The request's Idempotency-Key: nullopt without one; kInvalidArgument (with
// the rule) unless it is 1 to 128 of A-Z a-z 0-9 . _ : -. Reads ignore it.
Result<std::optional<std::string>> IdempotencyKeyOf(const http::Request& request);

// What a key is bound to: method, target and a SHA-256 of the body.
std::string RequestFingerprint(const http::Request& request);

// Loop thread only.
class IdempotencyKeys {
 public:
  explicit IdempotencyKeys(DaemonState* state) : state_(state) {}

  // Runs `handle` unless (uid, key) has a live outcome (in the store or in
  // this turn's batch): then returns it with `Idempotent-Replayed: true`, or
  // 422 when the key was first used for another request. Outcomes of 5xx are
  // not kept: a retry acts afresh.
  http::Response Run(uint32_t uid, const std::string& key, const http::Request& request,
                     const std::function<http::Response()>& handle);

 private:
  DaemonState* state_;
  TimeMs last_expiry_ = 0;
};

}  // namespace gpuherd::daemon
