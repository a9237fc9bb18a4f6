#include "alerts/notify.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http/server.h"

namespace gpuherd::alerts {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

constexpr TimeMs kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

Alert GpuAlert(const std::string& rule, const std::string& uuid, int index, AlertState state) {
  Alert a;
  a.rule = rule;
  a.subject = uuid;
  a.gpu_index = index;
  a.state = state;
  a.pending_since = kT0;
  a.fired_at = kT0 + 30'000;
  a.resolved_at = state == AlertState::kResolved ? kT0 + 90'000 : 0;
  a.value = 89.5;
  a.severity = store::Severity::kCritical;
  a.action = Action::kDrain;
  a.summary = "too hot";
  return a;
}

PayloadContext Context() { return {"node-a", "http://node-a:8080", "gpuherd"}; }

TEST(PayloadTest, AlertmanagerFormatForAFiringGpuAlert) {
  nlohmann::json p = AlertmanagerPayload({GpuAlert("gpu_hot", "GPU-1", 1, AlertState::kFiring)}, Context());
  EXPECT_EQ(p["version"], "4");
  EXPECT_EQ(p["status"], "firing");
  EXPECT_EQ(p["receiver"], "gpuherd");
  EXPECT_EQ(p["groupKey"], "{}:{alertname=\"gpu_hot\"}");
  EXPECT_EQ(p["groupLabels"], nlohmann::json({{"alertname", "gpu_hot"}}));
  EXPECT_EQ(p["externalURL"], "http://node-a:8080");
  EXPECT_EQ(p["truncatedAlerts"], 0);
  ASSERT_EQ(p["alerts"].size(), 1u);
  const nlohmann::json& a = p["alerts"][0];
  EXPECT_EQ(a["status"], "firing");
  EXPECT_EQ(a["labels"], nlohmann::json({{"alertname", "gpu_hot"},
                                         {"severity", "critical"},
                                         {"action", "drain"},
                                         {"hostname", "node-a"},
                                         {"gpu", "1"},
                                         {"uuid", "GPU-1"}}));
  EXPECT_EQ(a["annotations"]["summary"], "too hot");
  EXPECT_EQ(a["annotations"]["value"], "89.5");
  EXPECT_EQ(a["startsAt"], "2026-01-01T00:00:30.000Z");
  EXPECT_EQ(a["endsAt"], "0001-01-01T00:00:00Z");
  EXPECT_THAT(a["fingerprint"].get<std::string>(), MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(p["commonLabels"], a["labels"]);
}

TEST(PayloadTest, ResolvedAndPortAlertsAndCommonLabels) {
  Alert port = GpuAlert("ib_packet_loss", "mlx5_0/1", -1, AlertState::kResolved);
  nlohmann::json p =
      AlertmanagerPayload({port, GpuAlert("ib_packet_loss", "mlx5_1/2", -1, AlertState::kResolved)}, Context());
  EXPECT_EQ(p["status"], "resolved");
  const nlohmann::json& a = p["alerts"][0];
  EXPECT_EQ(a["endsAt"], "2026-01-01T00:01:30.000Z");
  EXPECT_EQ(a["labels"]["ib_device"], "mlx5_0");
  EXPECT_EQ(a["labels"]["ib_port"], "1");
  EXPECT_FALSE(a["labels"].contains("gpu"));
  // Labels that differ between the alerts are not common.
  EXPECT_EQ(p["commonLabels"]["alertname"], "ib_packet_loss");
  EXPECT_FALSE(p["commonLabels"].contains("ib_device"));
  EXPECT_NE(p["alerts"][0]["fingerprint"], p["alerts"][1]["fingerprint"]);
}

TEST(PayloadTest, OnePayloadPerRuleAndStatusOfNotifyingTransitions) {
  auto transition = [](Alert a, AlertState from) { return AlertTransition{from, a.state, kT0, a}; };
  Alert silent = GpuAlert("quiet", "GPU-0", 0, AlertState::kFiring);
  silent.action = Action::kNone;
  std::vector<AlertTransition> ts = {
      transition(GpuAlert("hot", "GPU-0", 0, AlertState::kFiring), AlertState::kPending),
      transition(GpuAlert("hot", "GPU-1", 1, AlertState::kFiring), AlertState::kPending),
      transition(GpuAlert("hot", "GPU-2", 2, AlertState::kResolved), AlertState::kFiring),
      transition(GpuAlert("hot", "GPU-3", 3, AlertState::kPending), AlertState::kInactive),
      transition(silent, AlertState::kInactive),
  };
  std::vector<nlohmann::json> payloads = PayloadsFor(ts, Context());
  ASSERT_EQ(payloads.size(), 2u);
  EXPECT_EQ(payloads[0]["status"], "firing");
  EXPECT_EQ(payloads[0]["alerts"].size(), 2u);
  EXPECT_EQ(payloads[1]["status"], "resolved");
  EXPECT_EQ(payloads[1]["alerts"][0]["labels"]["uuid"], "GPU-2");
}

TEST(NotifyOptionsTest, RejectsWhatCannotWork) {
  NotifyOptions o;
  o.webhook_urls = {"ftp://x/"};
  EXPECT_THAT(ValidateNotifyOptions(o).message(), HasSubstr("'ftp://x/' must start with http://"));
  o.webhook_urls = {"http://"};
  EXPECT_THAT(ValidateNotifyOptions(o).message(), HasSubstr("has no host"));
  o.webhook_urls = {"http://127.0.0.1:9/hook"};
  EXPECT_TRUE(ValidateNotifyOptions(o).ok());
  o.max_attempts = 0;
  EXPECT_FALSE(ValidateNotifyOptions(o).ok());
  EXPECT_FALSE(Notifier::Start(o).ok());
}

// A webhook receiver on loopback that answers each request with the next
// status of `statuses` (the last one repeats).
class Receiver {
 public:
  explicit Receiver(std::vector<int> statuses) : statuses_(std::move(statuses)) {
    http::ServerOptions options;
    options.tcp_port = 0;
    auto server = http::Server::Start(options, [this](const http::Request& req) {
      http::Response res;
      if (req.method != "POST" || req.path != "/hook") return http::ErrorResponse(404, "no such hook");
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(req.body);
      times_.push_back(std::chrono::steady_clock::now());
      res.status = statuses_[std::min(bodies_.size(), statuses_.size()) - 1];
      res.body = "{}";
      return res;
    });
    EXPECT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(*server);
    port_ = server_->tcp_port();
  }
  ~Receiver() { server_->Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  double GapMs(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::chrono::duration<double, std::milli>(times_.at(i + 1) - times_.at(i)).count();
  }

 private:
  std::vector<int> statuses_;
  std::unique_ptr<http::Server> server_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> bodies_;
  std::vector<std::chrono::steady_clock::time_point> times_;
};

TEST(NotifierTest, WebhookIsRetriedAfterA500) {
  Receiver receiver({500, 200});
  NotifyOptions o;
  o.webhook_urls = {receiver.url()};
  o.initial_backoff = 50;
  auto notifier = Notifier::Start(o);
  ASSERT_TRUE(notifier.ok()) << notifier.status().ToString();

  nlohmann::json payload = AlertmanagerPayload({GpuAlert("gpu_hot", "GPU-1", 1, AlertState::kFiring)}, Context());
  (*notifier)->Send(payload);
  ASSERT_TRUE((*notifier)->WaitIdle(10'000));

  std::vector<std::string> bodies = receiver.bodies();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(bodies[1]), payload);
  EXPECT_EQ(bodies[0], bodies[1]);
  EXPECT_GE(receiver.GapMs(0), 50.0);  // the back-off was waited
  Notifier::Stats stats = (*notifier)->stats();
  EXPECT_EQ(stats.delivered, 1u);
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.failed, 0u);
}

TEST(NotifierTest, GivesUpAfterMaxAttemptsWithGrowingBackoff) {
  Receiver receiver({503});
  NotifyOptions o;
  o.webhook_urls = {receiver.url()};
  o.max_attempts = 3;
  o.initial_backoff = 40;
  auto notifier = Notifier::Start(o);
  ASSERT_TRUE(notifier.ok());
  (*notifier)->Send(nlohmann::json{{"status", "firing"}});
  ASSERT_TRUE((*notifier)->WaitIdle(10'000));

  EXPECT_EQ(receiver.bodies().size(), 3u);
  EXPECT_GE(receiver.GapMs(0), 40.0);
  EXPECT_GE(receiver.GapMs(1), 80.0);  // doubled
  Notifier::Stats stats = (*notifier)->stats();
  EXPECT_EQ(stats.delivered, 0u);
  EXPECT_EQ(stats.retries, 2u);
  EXPECT_EQ(stats.failed, 1u);
}

TEST(NotifierTest, UnreachableWebhookFailsWithoutThrowing) {
  NotifyOptions o;
  o.webhook_urls = {"http://127.0.0.1:1/hook"};  // nothing listens on port 1
  o.max_attempts = 2;
  o.initial_backoff = 1;
  auto notifier = Notifier::Start(o);
  ASSERT_TRUE(notifier.ok());
  (*notifier)->Send(nlohmann::json::object());
  ASSERT_TRUE((*notifier)->WaitIdle(10'000));
  EXPECT_EQ((*notifier)->stats().failed, 1u);
  EXPECT_EQ((*notifier)->stats().retries, 1u);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(CommandHookTest, GetsThePayloadOnStdin) {
  std::string out = ::testing::TempDir() + "/hook_payload.json";
  NotifyOptions o;
  o.command = "cat > '" + out + "'";
  auto notifier = Notifier::Start(o);
  ASSERT_TRUE(notifier.ok());
  nlohmann::json payload = {{"status", "firing"}, {"alerts", nlohmann::json::array()}};
  (*notifier)->Send(payload);
  ASSERT_TRUE((*notifier)->WaitIdle(10'000));
  EXPECT_EQ((*notifier)->stats().delivered, 1u);
  EXPECT_EQ(nlohmann::json::parse(ReadFile(out)), payload);
}

TEST(CommandHookTest, FailureAndTimeoutAreErrors) {
  Status failed = RunCommandHook("exit 3", "{}", 5'000);
  EXPECT_EQ(failed.code(), Code::kUnavailable);
  EXPECT_THAT(failed.message(), HasSubstr("exited with status 3"));

  auto start = std::chrono::steady_clock::now();
  Status slow = RunCommandHook("sleep 30", "{}", 200);
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_THAT(slow.message(), HasSubstr("did not finish within"));
  EXPECT_LT(waited, 5.0);
}

TEST(CommandHookTest, ACommandThatIgnoresItsInputIsFine) {
  // More than a pipe holds, to a command that never reads it.
  EXPECT_TRUE(RunCommandHook("exit 0", std::string(1 << 20, 'x'), 5'000).ok());
}

}  // namespace
}  // namespace gpuherd::alerts
