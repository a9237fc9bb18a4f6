#include "alerts/notify.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/url_client.h"

namespace gpuherd::alerts {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Alertmanager's "not ended" time.
constexpr char kZeroTime[] = "0001-01-01T00:00:00Z";

std::string Fingerprint(const nlohmann::json& labels) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a over the sorted labels
  for (const auto& [name, value] : labels.items()) {
    for (char c : name + "\xff" + value.get<std::string>() + "\xff") {
      hash ^= static_cast<unsigned char>(c);
      hash *= 1099511628211ull;
    }
  }
  return fmt::format("{:016x}", hash);
}

nlohmann::json LabelsOf(const Alert& a, const PayloadContext& context) {
  nlohmann::json labels = {
      {"alertname", a.rule},
      {"severity", store::SeverityName(a.severity)},
      {"action", ActionName(a.action)},
      {"hostname", context.hostname},
  };
  if (a.gpu_index >= 0) {
    labels["gpu"] = std::to_string(a.gpu_index);
    labels["uuid"] = a.subject;
  } else {
    size_t slash = a.subject.rfind('/');
    labels["ib_device"] = a.subject.substr(0, slash);
    labels["ib_port"] = slash == std::string::npos ? "" : a.subject.substr(slash + 1);
  }
  return labels;
}

// The entries every element of `objects` has with the same value.
nlohmann::json Common(const std::vector<nlohmann::json>& objects) {
  nlohmann::json common = nlohmann::json::object();
  if (objects.empty()) return common;
  for (const auto& item : objects.front().items()) {
    // Named references, not structured bindings: clang 14 (the sanitizer build)
    // cannot capture those in a lambda.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    bool shared = std::all_of(objects.begin(), objects.end(),
                              [&](const nlohmann::json& o) { return o.contains(key) && o[key] == value; });
    if (shared) common[key] = value;
  }
  return common;
}

Status CheckUrl(const std::string& url) {
  Result<http::Url> parsed = http::ParseUrl(url);
  if (!parsed.ok()) return InvalidArgument("webhook " + parsed.status().message());
  return Status::Ok();
}

Status PostJson(const std::string& url, const std::string& body, DurationMs timeout) {
  Result<http::Url> parsed = http::ParseUrl(url);
  if (!parsed.ok()) return InvalidArgument("webhook " + parsed.status().message());
  auto response = http::RequestUrl(*parsed, "POST", body, {{"Content-Type", "application/json"}}, timeout);
  if (!response.ok()) return Unavailable(fmt::format("POST {}: {}", url, response.status().message()));
  if (response->status < 200 || response->status >= 300) {
    return Unavailable(fmt::format("POST {}: HTTP {}", url, response->status));
  }
  return Status::Ok();
}

// Writes all of `data` to the non-blocking `fd` before `deadline`.
Status WriteAll(int fd, const std::string& data, SteadyClock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return IoError(fmt::format("write to the command: {}", std::strerror(errno)));
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
    if (left <= 0) return Unavailable("the command did not read its input in time");
    pollfd p{fd, POLLOUT, 0};
    poll(&p, 1, static_cast<int>(left));
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json AlertmanagerPayload(const std::vector<Alert>& alerts, const PayloadContext& context) {
  nlohmann::json items = nlohmann::json::array();
  std::vector<nlohmann::json> all_labels, all_annotations;
  bool any_firing = false;
  for (const Alert& a : alerts) {
    nlohmann::json labels = LabelsOf(a, context);
    nlohmann::json annotations = {
        {"summary", a.summary},
        {"value", fmt::format("{}", a.value)},
    };
    bool firing = a.state != AlertState::kResolved;
    any_firing = any_firing || firing;
    items.push_back({
        {"status", firing ? "firing" : "resolved"},
        {"labels", labels},
        {"annotations", annotations},
        {"startsAt", FormatTimeUtc(a.fired_at != 0 ? a.fired_at : a.pending_since)},
        {"endsAt", firing ? std::string(kZeroTime) : FormatTimeUtc(a.resolved_at)},
        {"generatorURL", context.external_url.empty() ? "" : context.external_url + "/api/v1/alerts"},
        {"fingerprint", Fingerprint(labels)},
    });
    all_labels.push_back(std::move(labels));
    all_annotations.push_back(std::move(annotations));
  }
  nlohmann::json group_labels = nlohmann::json::object();
  if (!alerts.empty()) group_labels["alertname"] = alerts.front().rule;
  return {
      {"version", "4"},
      {"groupKey", fmt::format("{{}}:{{alertname=\"{}\"}}", alerts.empty() ? "" : alerts.front().rule)},
      {"truncatedAlerts", 0},
      {"status", any_firing ? "firing" : "resolved"},
      {"receiver", context.receiver},
      {"groupLabels", group_labels},
      {"commonLabels", Common(all_labels)},
      {"commonAnnotations", Common(all_annotations)},
      {"externalURL", context.external_url},
      {"alerts", items},
  };
}

std::vector<nlohmann::json> PayloadsFor(const std::vector<AlertTransition>& transitions,
                                        const PayloadContext& context) {
  std::map<std::pair<std::string, AlertState>, std::vector<Alert>> groups;
  for (const AlertTransition& t : transitions) {
    if (t.alert.action == Action::kNone) continue;
    if (t.to != AlertState::kFiring && t.to != AlertState::kResolved) continue;
    groups[{t.alert.rule, t.to}].push_back(t.alert);
  }
  std::vector<nlohmann::json> payloads;
  for (const auto& [key, alerts] : groups) payloads.push_back(AlertmanagerPayload(alerts, context));
  return payloads;
}

Status ValidateNotifyOptions(const NotifyOptions& options) {
  for (const std::string& url : options.webhook_urls) {
    GPUHERD_RETURN_IF_ERROR(CheckUrl(url));
  }
  if (options.max_attempts < 1) return InvalidArgument("notification max_attempts must be at least 1");
  if (options.initial_backoff < 0 || options.max_backoff < options.initial_backoff) {
    return InvalidArgument("notification back-off: need 0 <= initial_backoff <= max_backoff");
  }
  if (options.http_timeout <= 0 || options.command_timeout <= 0) {
    return InvalidArgument("notification timeouts must be positive");
  }
  return Status::Ok();
}

Status RunCommandHook(const std::string& command, const std::string& input, DurationMs timeout) {
  SteadyClock::time_point deadline = SteadyClock::now() + std::chrono::milliseconds(timeout);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return IoError(fmt::format("pipe: {}", std::strerror(errno)));
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return IoError(fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    // Only async-signal-safe calls from here to exec.
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    dup2(fds[0], STDIN_FILENO);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so the group exists before any kill below
  close(fds[0]);
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  {
    // A command that exits without reading its input is not an error, and
    // must not kill the caller: SIGPIPE is blocked while writing and a
    // pending one discarded, so write() fails with EPIPE instead.
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    Status written = WriteAll(fds[1], input, deadline);
    close(fds[1]);
    timespec no_wait{0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &no_wait) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_set, nullptr);
    if (!written.ok()) spdlog::debug("command hook input: {}", written.message());
  }

  int status = 0;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return IoError(fmt::format("waitpid: {}", std::strerror(errno)));
    if (SteadyClock::now() >= deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return Unavailable(fmt::format("command hook '{}' did not finish within {}", command, FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  if (WIFEXITED(status)) {
    return Unavailable(fmt::format("command hook '{}' exited with status {}", command, WEXITSTATUS(status)));
  }
  return Unavailable(fmt::format("command hook '{}' was killed by signal {}", command, WTERMSIG(status)));
}

struct Notifier::Delivery {
  std::string url;             // empty: the command hook
  std::string body;
  int attempt = 0;             // attempts made so far
  SteadyClock::time_point due;
};

Result<std::unique_ptr<Notifier>> Notifier::Start(NotifyOptions options) {
  GPUHERD_RETURN_IF_ERROR(ValidateNotifyOptions(options));
  std::unique_ptr<Notifier> notifier(new Notifier(std::move(options)));
  notifier->thread_ = std::thread([n = notifier.get()] { n->Run(); });
  return notifier;
}

Notifier::Notifier(NotifyOptions options) : options_(std::move(options)) {}

Notifier::~Notifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Notifier::Send(const nlohmann::json& payload) {
  std::string body = payload.dump();
  std::vector<std::string> targets = options_.webhook_urls;
  if (!options_.command.empty()) targets.push_back("");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (std::string& url : targets) {
      if (queue_.size() >= options_.max_queued) {
        ++stats_.dropped;
        spdlog::warn("alert notification dropped: {} deliveries already waiting", queue_.size());
        continue;
      }
      queue_.push_back(std::make_unique<Delivery>(Delivery{std::move(url), body, 0, SteadyClock::now()}));
    }
  }
  cv_.notify_all();
}

bool Notifier::WaitIdle(DurationMs timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout),
                           [this] { return queue_.empty() && in_flight_ == 0; });
}

Notifier::Stats Notifier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status Notifier::Deliver(const Delivery& d) const {
  if (d.url.empty()) return RunCommandHook(options_.command, d.body, options_.command_timeout);
  return PostJson(d.url, d.body, options_.http_timeout);
}

void Notifier::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    auto next = std::min_element(queue_.begin(), queue_.end(),
                                 [](const auto& a, const auto& b) { return a->due < b->due; });
    if (next == queue_.end()) {
      cv_.wait(lock);
      continue;
    }
    if ((*next)->due > SteadyClock::now()) {
      cv_.wait_until(lock, (*next)->due);
      continue;
    }
    std::unique_ptr<Delivery> d = std::move(*next);
    queue_.erase(next);
    ++in_flight_;
    lock.unlock();

    Status result;
    try {
      result = Deliver(*d);
    } catch (const std::exception& e) {
      result = Internal(fmt::format("notification: {}", e.what()));
    } catch (...) {
      result = Internal("notification: unknown exception");
    }
    ++d->attempt;

    lock.lock();
    --in_flight_;
    if (result.ok()) {
      ++stats_.delivered;
    } else if (d->attempt < options_.max_attempts) {
      DurationMs backoff = options_.initial_backoff;
      for (int i = 1; i < d->attempt && backoff < options_.max_backoff; ++i) backoff *= 2;
      backoff = std::min(backoff, options_.max_backoff);
      spdlog::warn("alert notification failed (attempt {} of {}), retrying in {}: {}", d->attempt,
                   options_.max_attempts, FormatDuration(backoff), result.message());
      d->due = SteadyClock::now() + std::chrono::milliseconds(backoff);
      ++stats_.retries;
      queue_.push_back(std::move(d));
    } else {
      ++stats_.failed;
      spdlog::error("alert notification given up after {} attempts: {}", d->attempt, result.message());
    }
    if (queue_.empty() && in_flight_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace gpuherd::alerts
