// Notifications of alerts: an Alertmanager-compatible webhook payload, sent
// by POST to each configured URL, and a command hook that gets the same JSON
// on its standard input. Delivery happens on the Notifier's own thread, with
// retries and exponential back-off, so the daemon's loop never waits on the
// network.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "alerts/engine.h"
#include "core/status.h"
#include "core/time.h"

namespace gpuherd::alerts {

// What the payload says about where the alerts come from.
struct PayloadContext {
  std::string hostname;
  std::string external_url;       // the daemon's API ("http://node-a:9400"); may be empty
  std::string receiver = "gpuherd";
};

// Alertmanager's webhook format (version "4"): {version, groupKey, status,
// receiver, groupLabels, commonLabels, commonAnnotations, externalURL,
// truncatedAlerts, alerts: [{status, labels, annotations, startsAt, endsAt,
// generatorURL, fingerprint}]}. Labels: alertname, severity, action,
// hostname, and gpu + uuid or ib_device + ib_port. The status is "firing"
// when any alert is firing, "resolved" otherwise.
nlohmann::json AlertmanagerPayload(const std::vector<Alert>& alerts, const PayloadContext& context);

// The payloads to send for one evaluation: one per rule and status, of the
// transitions to kFiring or kResolved whose action is not kNone.
std::vector<nlohmann::json> PayloadsFor(const std::vector<AlertTransition>& transitions,
                                        const PayloadContext& context);

struct NotifyOptions {
  std::vector<std::string> webhook_urls;  // http:// or https://host[:port][/path]
  std::string command;                    // run by /bin/sh -c, payload on stdin; empty: none
  DurationMs command_timeout = 10 * kSecondMs;  // then the command's process group is killed
  DurationMs http_timeout = 5 * kSecondMs;      // connect, and each read and write
  int max_attempts = 5;                   // per payload and destination
  DurationMs initial_backoff = kSecondMs; // doubled after each failed attempt
  DurationMs max_backoff = kMinuteMs;
  size_t max_queued = 1000;               // deliveries waiting; more are dropped
};

// kInvalidArgument naming the bad URL or value.
Status ValidateNotifyOptions(const NotifyOptions& options);

class Notifier {
 public:
  struct Stats {
    uint64_t delivered = 0;   // deliveries that succeeded
    uint64_t retries = 0;     // attempts after a failure
    uint64_t failed = 0;      // deliveries given up after max_attempts
    uint64_t dropped = 0;     // not queued: the queue was full
  };

  // Validates the options and starts the delivery thread.
  static Result<std::unique_ptr<Notifier>> Start(NotifyOptions options);
  // Stops the thread: a delivery in progress finishes (bounded by the
  // timeouts); what is still queued is dropped.
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Queues `payload` for every webhook and the command hook. Thread-safe;
  // never blocks on delivery.
  void Send(const nlohmann::json& payload);
  // Blocks until nothing is queued or being delivered, or `timeout` passes;
  // true when idle. For shutdown and tests.
  bool WaitIdle(DurationMs timeout);
  Stats stats() const;

 private:
  struct Delivery;

  explicit Notifier(NotifyOptions options);
  void Run();
  Status Deliver(const Delivery& d) const;

  const NotifyOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;        // work arrived, or stop
  std::condition_variable idle_cv_;   // the queue drained
  std::deque<std::unique_ptr<Delivery>> queue_;
  int in_flight_ = 0;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;
};

// Runs `command` with /bin/sh -c in its own process group, writes `input` to
// its standard input, and waits up to `timeout`; then kills the group. OK
// when it exits 0. Its standard output is discarded; standard error is kept.
Status RunCommandHook(const std::string& command, const std::string& input, DurationMs timeout);

}  // namespace gpuherd::alerts
