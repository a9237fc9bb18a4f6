// The daemon end to end over its unix socket, on a simulated fleet.
#include "daemon/daemon.h"

#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/service_test_fixture.h"
#include "http/client.h"
#include "http/token.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DaemonTest : public DaemonServiceTest {
 protected:
  void StartDaemon(int sim = 4) { DaemonServiceTest::StartDaemon(Options(sim, /*tcp=*/true)); }

  // Over the unix socket unless `tcp`: there the caller is known by its peer
  // credentials; over TCP only the token authenticates.
  http::ClientResponse Call(const std::string& method, const std::string& target, const std::string& body = "",
                           bool with_token = false, bool tcp = false) {
    std::map<std::string, std::string> headers;
    if (with_token) headers["Authorization"] = "Bearer " + *http::ReadToken(StateDir{home_.string()});
    http::Endpoint endpoint{daemon_->socket_path()};
    if (tcp) endpoint = http::Endpoint{"", "127.0.0.1", daemon_->tcp_port()};
    http::Client client(endpoint);
    auto r = client.Request(method, target, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }
};

TEST_F(DaemonTest, ServesFleetAndHealth) {
  StartDaemon(4);
  ::usleep(350'000);  // a few sampling rounds
  auto health = Call("GET", "/v1/health");
  ASSERT_EQ(health.status, 200);
  json h = json::parse(health.body);
  EXPECT_EQ(h["gpus"], 4);
  EXPECT_TRUE(h["simulated"].get<bool>());
  EXPECT_GE(h["rounds"].get<int>(), 1);

  json fleet = json::parse(Call("GET", "/v1/gpus").body);
  ASSERT_EQ(fleet["gpus"].size(), 4u);
  EXPECT_TRUE(fleet["simulated"].get<bool>());
  EXPECT_EQ(fleet["topology"].size(), 4u);
  EXPECT_TRUE(fleet["gpus"][0]["sample"].contains("temp_c"));

  std::string uuid = fleet["gpus"][2]["uuid"];
  EXPECT_EQ(json::parse(Call("GET", "/v1/gpus/" + uuid).body)["index"], 2);
  json samples = json::parse(Call("GET", "/v1/gpus/1/samples?n=2").body);
  EXPECT_GE(samples["samples"].size(), 1u);
  EXPECT_LE(samples["samples"].size(), 2u);
}

TEST_F(DaemonTest, ErrorsAreJsonWithTheRightStatus) {
  StartDaemon(2);
  auto missing = Call("GET", "/v2/everything");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(json::parse(missing.body)["error"].get<std::string>().find("/v1"), std::string::npos);
  EXPECT_EQ(Call("GET", "/v1/gpus/7").status, 404);
  EXPECT_EQ(Call("GET", "/v1/events?limit=many").status, 400);
  EXPECT_EQ(Call("GET", "/v1/gpus/0/samples?n=0").status, 400);
  EXPECT_EQ(Call("DELETE", "/v1/gpus").status, 405);

  auto no_token = Call("POST", "/v1/events", R"({"message": "hello"})", false, /*tcp=*/true);
  EXPECT_EQ(no_token.status, 401);
  EXPECT_NE(json::parse(no_token.body)["error"].get<std::string>().find("token"), std::string::npos);
  EXPECT_EQ(Call("POST", "/v1/shutdown", "", false, true).status, 401);
  EXPECT_EQ(Call("POST", "/v1/jobs", R"({"command": ["true"]})", false, true).status, 401);
  EXPECT_EQ(Call("GET", "/v1/health", "", false, true).status, 200);  // reads are open
  EXPECT_EQ(Call("POST", "/v1/events", R"({"message": "over tcp"})", true, true).status, 201);

  EXPECT_EQ(Call("POST", "/v1/events", "{not json", true).status, 400);
  EXPECT_EQ(Call("POST", "/v1/events", R"({"message": "x", "colour": "red"})", true).status, 400);
  EXPECT_EQ(Call("POST", "/v1/events", R"({"message": "x", "gpu": 9})", true).status, 404);
  EXPECT_EQ(Call("POST", "/v1/events", R"({"message": "x", "severity": "meh"})", true).status, 400);
}

TEST_F(DaemonTest, NoteIsDurableAcrossRestart) {
  StartDaemon(2);
  ASSERT_EQ(Call("POST", "/v1/events", R"({"message": "replaced the fan", "gpu": 1})", true).status, 201);
  StopDaemon();
  StartDaemon(2);
  json events = json::parse(Call("GET", "/v1/events?kind=operator.").body);
  ASSERT_EQ(events["events"].size(), 1u);
  EXPECT_EQ(events["events"][0]["message"], "replaced the fan");
  EXPECT_FALSE(events["events"][0]["data"]["by"]["user"].get<std::string>().empty());
  json kinds = json::parse(Call("GET", "/v1/events?kind=daemon.").body)["events"];
  ASSERT_GE(kinds.size(), 3u);  // start, stop, start
  EXPECT_EQ(kinds[0]["kind"], "daemon.start");
  EXPECT_EQ(kinds[1]["kind"], "daemon.stop");
}

// Who did it is on every event a caller causes: the note, the submit, hold,
// release and cancel of a job, a drain and an undrain (a note posted as
// `nobody` had no user on it).
TEST_F(DaemonTest, EventsACallerCausesNameTheCaller) {
  StartDaemon(1);
  const uint32_t uid = ::getuid();
  ASSERT_EQ(Call("POST", "/v1/events", R"({"message": "replaced the fan"})").status, 201);
  ASSERT_EQ(Call("POST", "/v1/gpus/0/drain", R"({"reason": "fan"})").status, 200);
  auto submitted = Call("POST", "/v1/jobs", R"({"command": ["sleep", "60"], "gpus": 1})");
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  std::string id = std::to_string(json::parse(submitted.body)["id"].get<int64_t>());
  for (const char* action : {"hold", "release", "cancel"}) {
    auto r = Call("POST", "/v1/jobs/" + id + "/" + action);
    EXPECT_EQ(r.status, 200) << action << ": " << r.body;
  }
  ASSERT_EQ(Call("POST", "/v1/gpus/0/undrain").status, 200);
  json events = json::parse(Call("GET", "/v1/events?limit=1000").body)["events"];
  const std::set<std::string> caused = {"operator.note", "gpu.drained", "job.submitted", "job.held",
                                        "job.released", "job.cancelled", "gpu.undrained"};
  std::set<std::string> attributed;
  for (const json& e : events) {
    const std::string kind = e["kind"];
    if (caused.count(kind) == 0) continue;
    ASSERT_TRUE(e["data"].contains("by")) << e.dump();
    EXPECT_EQ(e["data"]["by"]["uid"], uid) << e.dump();
    EXPECT_FALSE(e["data"]["by"]["user"].get<std::string>().empty()) << e.dump();
    attributed.insert(kind);
  }
  EXPECT_EQ(attributed, caused);
}

TEST_F(DaemonTest, SecondDaemonOnTheSameHomeIsRefused) {
  StartDaemon(2);
  DaemonOptions options;
  options.home = home_.string();
  options.driver.sim_count = 2;
  options.port = 0;
  auto second = Daemon::Create(options, clock_.get());
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("another gpuherd daemon"), std::string::npos);
}

TEST_F(DaemonTest, ShutdownWithTokenStopsTheLoop) {
  StartDaemon(2);
  EXPECT_EQ(Call("POST", "/v1/shutdown", "", true).status, 202);
  runner_.join();
  EXPECT_TRUE(run_status_.ok()) << run_status_.ToString();
  daemon_.reset();
  EXPECT_FALSE(fs::exists(home_ / "gpuherd.sock"));
}

}  // namespace
}  // namespace gpuherd::daemon
