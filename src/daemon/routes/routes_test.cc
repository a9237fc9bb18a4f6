// The routes' guards through the real daemon: bounded bodies, the Host check
// against DNS rebinding, and who may read a job's command and output.
#include "daemon/routes/routes.h"

#include <unistd.h>

#include <filesystem>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/decode.h"
#include "api/jobs.h"
#include "daemon/daemon.h"
#include "daemon/routes/access.h"
#include "daemon/service_test_fixture.h"
#include "http/client.h"
#include "http/token.h"

namespace gpuherd::daemon::routes {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

class RoutesTest : public DaemonServiceTest {
 protected:
  void SetUp() override {
    DaemonServiceTest::SetUp();
    DaemonOptions options = Options(2, /*tcp=*/true);
    options.allow_hosts = {"gpu-box.lab.example"};
    StartDaemon(options);
  }

  http::ClientResponse Unix(const std::string& method, const std::string& target, const std::string& body = "") {
    return Call(method, target, body);
  }
  http::ClientResponse Tcp(const std::string& target, bool token, const std::string& host = "") {
    std::map<std::string, std::string> headers;
    if (token) headers["Authorization"] = "Bearer " + *http::ReadToken(StateDir{home_.string()});
    if (!host.empty()) headers["Host"] = host;
    auto r = http::Client(http::Endpoint{"", "127.0.0.1", daemon_->tcp_port()}).Request("GET", target, "", headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }
  static std::string Error(const http::ClientResponse& r) { return json::parse(r.body).value("error", ""); }

};

// 200,000 nested arrays killed the daemon (a stack overflow while the error
// message quoted the body). Every route that reads a body refuses it.
TEST_F(RoutesTest, DeeplyNestedBodiesAreRefusedAndTheDaemonLives) {
  std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const char* target : {"/v1/jobs", "/v1/pipelines", "/v1/events", "/v1/burnin/runs", "/v1/gpus/0/drain"}) {
    std::string body = R"({"command": )" + deep + "}";
    auto r = Unix("POST", target, body);
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_THAT(Error(r), HasSubstr("nests arrays and objects more than")) << target;
    EXPECT_LT(r.body.size(), 400u) << target;
  }
  EXPECT_EQ(Unix("GET", "/v1/health").status, 200);
  // Ordinary nesting is still fine.
  auto job = Unix("POST", "/v1/jobs", json{{"command", {"true"}}, {"env", {{"A", "1"}}}}.dump());
  EXPECT_EQ(job.status, 201) << job.body;
}

// `ps` reads the compact listing (?view=table); it must list the same jobs
// with the same facts as the full one, filters and finished jobs included,
// and holds nothing private, so a caller without the token reads it whole.
TEST_F(RoutesTest, CompactListingHasTheFullListingsJobs) {
  auto done = Unix("POST", "/v1/jobs", json{{"command", {"true"}}, {"gpus", 0}, {"name", "quick"}}.dump());
  ASSERT_EQ(done.status, 201) << done.body;
  const std::string done_id = std::to_string(json::parse(done.body)["id"].get<int64_t>());
  ASSERT_EQ(Unix("POST", "/v1/jobs", json{{"command", {"sleep", "60"}}, {"gpus", 1}, {"array", 4},
                                          {"priority", 3}, {"name", "train"}}.dump()).status, 201);
  for (int i = 0; i < 200; ++i) {
    if (json::parse(Unix("GET", "/v1/jobs/" + done_id).body)["state"] == "completed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  ASSERT_EQ(json::parse(Unix("GET", "/v1/jobs/" + done_id).body)["state"], "completed");
  for (std::string query : {"all=1", "all=0", "all=1&state=pending", "all=1&state=completed",
                                   "all=0&user=nobody-here"}) {
    json full = json::parse(Unix("GET", "/v1/jobs?" + query).body);
    auto views = api::Decode<std::vector<api::JobView>>(full["jobs"], "the listing");
    ASSERT_TRUE(views.ok()) << views.status().ToString();
    auto compact = Unix("GET", "/v1/jobs?view=table&" + query);
    ASSERT_EQ(compact.status, 200) << compact.body;
    EXPECT_LT(compact.body.size(), full.dump().size() / 2 + 200) << query;
    auto table = api::ParseJobTable(compact.body);
    ASSERT_TRUE(table.ok()) << table.status().ToString();
    ASSERT_EQ(table->jobs.size(), views->size()) << query;
    for (size_t i = 0; i < views->size(); ++i) {
      const api::JobView& a = (*views)[i];
      const api::JobRow& b = table->jobs[i];
      EXPECT_EQ(a.id, b.id);
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.user, b.user);
      EXPECT_EQ(a.state, b.state);
      EXPECT_EQ(a.reason, b.reason);
      EXPECT_EQ(a.priority, b.priority);
      EXPECT_EQ(a.array_id, b.array_id);
      EXPECT_EQ(a.array_index, b.array_index);
      EXPECT_EQ(api::GpusRequested(a), api::GpusRequested(b));
      EXPECT_EQ(api::GpusAssigned(a), api::GpusAssigned(b));
      EXPECT_EQ(api::JobTime(a, full["now"]), api::JobTime(b, full["now"]));
    }
  }
  EXPECT_EQ(api::ParseJobTable(Unix("GET", "/v1/jobs?view=table&all=1").body)->jobs.size(), 5u);
  // Without the token over TCP: the same rows (no column is private).
  auto open = api::ParseJobTable(Tcp("/v1/jobs?view=table&all=1", false).body);
  ASSERT_TRUE(open.ok()) << open.status().ToString();
  EXPECT_EQ(open->jobs.size(), 5u);
  EXPECT_EQ(Unix("GET", "/v1/jobs?view=columns").status, 400);
}

// DNS rebinding: a page renamed to 127.0.0.1 sends its own name as Host.
TEST_F(RoutesTest, OnlyHostsThatNameThisMachineAreServedOverTcp) {
  auto foreign = Tcp("/v1/jobs", false, "evil.example.com");
  EXPECT_EQ(foreign.status, 421);
  EXPECT_THAT(Error(foreign), HasSubstr("--allow-host evil.example.com"));
  EXPECT_EQ(Tcp("/v1/health", false, "evil.example.com:7480").status, 421);
  EXPECT_EQ(Tcp("/", false, "evil.example.com").status, 421);  // the dashboard's page too
  std::string port = std::to_string(daemon_->tcp_port());
  for (const std::string& host : std::vector<std::string>{"localhost", "localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port,
                           "LOCALHOST.", "gpu-box.lab.example", "10.1.2.3"}) {
    EXPECT_EQ(Tcp("/v1/health", false, host).status, 200) << host;
  }
  // The unix socket has no browser behind it.
  auto r = http::Client(http::Endpoint{daemon_->socket_path()}).Request("GET", "/v1/health", "",
                                                                         {{"Host", "evil.example.com"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST(HostCheckTest, MissingHostIsA400AndTheHostnameCounts) {
  http::Request request;
  request.headers["host"] = "node-7:7480";
  EXPECT_FALSE(CheckHost(request, AllowedHosts("Node-7", {})).has_value());
  EXPECT_TRUE(CheckHost(request, AllowedHosts("node-8", {})).has_value());
  request.headers.clear();
  auto refused = CheckHost(request, AllowedHosts("node-7", {}));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->status, 400);
}

// A job's command, environment, output and metric lines over TCP need the
// token; the unix socket serves them to their owner.
TEST_F(RoutesTest, JobInternalsOverTcpNeedTheToken) {
  auto submitted = Unix("POST", "/v1/jobs", json{{"command", {"echo", "secret-word"}}}.dump());
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  std::string id = std::to_string(json::parse(submitted.body)["id"].get<int64_t>());

  json open = json::parse(Tcp("/v1/jobs/" + id, false).body);
  EXPECT_EQ(open["id"].get<int64_t>(), std::stoll(id));
  EXPECT_FALSE(open.contains("command"));
  json listing = json::parse(Tcp("/v1/jobs?all=1", false).body);
  ASSERT_FALSE(listing["jobs"].empty());
  EXPECT_FALSE(listing["jobs"][0].contains("command"));
  EXPECT_EQ(Tcp("/v1/jobs/" + id + "/logs", false).status, 401);
  EXPECT_THAT(Error(Tcp("/v1/jobs/" + id + "/logs", false)), HasSubstr("API token"));
  EXPECT_EQ(Tcp("/v1/jobs/" + id + "/metrics", false).status, 401);

  EXPECT_EQ(json::parse(Tcp("/v1/jobs/" + id, true).body)["command"][1], "secret-word");
  EXPECT_EQ(Tcp("/v1/jobs/" + id + "/logs", true).status, 200);
  EXPECT_EQ(Tcp("/v1/jobs/" + id + "/metrics", true).status, 200);
  EXPECT_EQ(json::parse(Unix("GET", "/v1/jobs/" + id).body)["command"][1], "secret-word");
  EXPECT_EQ(Unix("GET", "/v1/jobs/" + id + "/logs").status, 200);
}

TEST(JobAccessTest, OwnerAndAdminsSeeInternalsOthersDoNot) {
  Caller owner{1000, 1000, "ana", false, true};
  Caller other{1001, 1001, "bo", false, true};
  Caller anonymous;
  anonymous.uid = Caller::kNoUid;
  Caller admin{0, 0, "root", true, true};
  EXPECT_TRUE(MaySeeJobInternals(owner, "ana"));
  EXPECT_FALSE(MaySeeJobInternals(other, "ana"));
  EXPECT_FALSE(MaySeeJobInternals(anonymous, ""));
  EXPECT_TRUE(MaySeeJobInternals(admin, "ana"));
  EXPECT_EQ(JobInternalsRefused(other, "x").code(), Code::kPermissionDenied);
  EXPECT_EQ(JobInternalsRefused(anonymous, "x").code(), Code::kUnauthenticated);
  json job = {{"id", 1}, {"command", {"a"}}, {"env", {{"K", "v"}}}, {"logs", "/x"}, {"state", "running"}};
  HideJobInternals(job);
  EXPECT_EQ(job, (json{{"id", 1}, {"state", "running"}}));
}

// Times and ids are bounded where they are parsed: since + 1 overflowed.
TEST_F(RoutesTest, OutOfRangeQueryNumbersAreRefused) {
  auto history = Unix("GET", "/v1/gpus/history?since=9223372036854775807");
  EXPECT_EQ(history.status, 400);
  EXPECT_THAT(Error(history), HasSubstr("'since' must be an integer from 0 to"));
  EXPECT_EQ(Unix("GET", "/v1/events?since=9223372036854775807").status, 400);
  EXPECT_EQ(Unix("GET", "/v1/gpus/history?since=1000").status, 200);
  EXPECT_EQ(Unix("GET", "/v1/jobs/99999999999999999999").status, 400);
}

}  // namespace
}  // namespace gpuherd::daemon::routes
