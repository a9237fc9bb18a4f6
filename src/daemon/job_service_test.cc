// The job queue's listing and per-user bookkeeping, through a real daemon on a
// simulated fleet (its jobs are real processes).
#include "daemon/job_service.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/service_test_fixture.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;

class JobServiceTest : public DaemonServiceTest {
 protected:
  void TearDown() override {
    CancelUnfinished();
    DaemonServiceTest::TearDown();
  }

  void StartDaemon(int max_queued_per_user = 0) {
    DaemonOptions options = Options(4);
    options.queue.scheduler.max_queued_jobs_per_user = max_queued_per_user;
    DaemonServiceTest::StartDaemon(options);
  }

  // Submits `command` under sh and returns the job id (0 when refused).
  int64_t Submit(const std::string& command, double gpus = 1, const std::string& name = "") {
    // The default simulated fleet mixes H100s and RTX 3090s: a job that takes
    // every GPU must say it may span models.
    json spec = {{"command", {"sh", "-c", command}}, {"gpus", gpus}, {"mixed_models", true}};
    if (!name.empty()) spec["name"] = name;
    auto r = Call("POST", "/v1/jobs", spec.dump());
    if (r.status != 201) return 0;
    return json::parse(r.body).value("id", int64_t{0});
  }

  json List(const std::string& query = "all=1") {
    auto r = Call("GET", "/v1/jobs?" + query);
    EXPECT_EQ(r.status, 200) << r.body;
    json body = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(body.is_object()) << r.body;
    return body;
  }

  std::string StateOf(int64_t id) {
    json listing = List();
    for (const auto& j : listing["jobs"]) {
      if (j["id"] == id) return j["state"];
    }
    return "";
  }
};

// The listing without its clock readings, which differ from call to call.
json WithoutNow(json listing) {
  for (auto& j : listing["jobs"]) j.erase("now");
  listing.erase("now");
  return listing;
}

TEST_F(JobServiceTest, FinishedJobsListTheSameFromMemoryAndAfterARestart) {
  StartDaemon();
  int64_t ok = Submit("true");
  int64_t failed = Submit("exit 3");
  // A name that imitates the listing's own "now" field must not confuse it.
  int64_t odd = Submit("true", 0, "odd\",\"now\":0,\"x");
  ASSERT_GT(ok, 0);
  ASSERT_GT(failed, 0);
  ASSERT_GT(odd, 0);
  ASSERT_TRUE(WaitFor([&] { return StateOf(odd) == "completed" && StateOf(failed) == "failed" && StateOf(ok) == "completed"; }));
  json before = List();
  ASSERT_EQ(before["jobs"].size(), 3u);
  for (const auto& j : before["jobs"]) EXPECT_EQ(j["now"], before["now"]) << j.dump();
  EXPECT_EQ(before["jobs"][2]["name"], "odd\",\"now\":0,\"x");
  EXPECT_EQ(before["jobs"][1]["exit_code"], 3);

  StopDaemon();
  StartDaemon();
  json after = List();
  EXPECT_EQ(WithoutNow(after), WithoutNow(before));
  for (const auto& j : after["jobs"]) EXPECT_EQ(j["now"], after["now"]) << j.dump();
}

TEST_F(JobServiceTest, ListingIsOrderedByIdAcrossFinishedAndUnfinishedJobs) {
  StartDaemon();
  int64_t first = Submit("true");
  ASSERT_TRUE(WaitFor([&] { return StateOf(first) == "completed"; }));
  int64_t blocker = Submit("sleep 30", 4);  // every GPU
  ASSERT_TRUE(WaitFor([&] { return StateOf(blocker) == "running"; }));
  int64_t waiting = Submit("true");
  json listing = List();
  ASSERT_EQ(listing["jobs"].size(), 3u);
  EXPECT_EQ(listing["jobs"][0]["id"], first);
  EXPECT_EQ(listing["jobs"][1]["id"], blocker);
  EXPECT_EQ(listing["jobs"][2]["id"], waiting);
  EXPECT_EQ(listing["jobs"][2]["state"], "pending");
  // Without all=1 only unfinished jobs; the filters apply to both kinds.
  EXPECT_EQ(List("all=0")["jobs"].size(), 2u);
  json completed = List("all=1&state=completed")["jobs"];
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0]["id"], first);
  EXPECT_EQ(List("all=1&user=nobody-here")["jobs"].size(), 0u);

  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(blocker) + "/cancel").status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(waiting) == "completed"; }));
  listing = List();
  ASSERT_EQ(listing["jobs"].size(), 3u);
  EXPECT_EQ(listing["jobs"][1]["state"], "cancelled");
}

TEST_F(JobServiceTest, QueueLimitCountsOnlyUnfinishedJobs) {
  StartDaemon(/*max_queued_per_user=*/2);
  int64_t a = Submit("sleep 30");
  int64_t b = Submit("sleep 30");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  auto refused = Call("POST", "/v1/jobs", json{{"command", {"true"}}}.dump());
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_NE(refused.body.find("at most 2 unfinished jobs; "), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find(" has 2: wait for some"), std::string::npos) << refused.body;
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(a) + "/cancel").status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(a) == "cancelled"; }));
  // The cancelled job no longer counts, also after a restart.
  EXPECT_GT(Submit("sleep 30"), 0);
  EXPECT_EQ(Call("POST", "/v1/jobs", json{{"command", {"true"}}}.dump()).status, 429);
  StopDaemon();
  StartDaemon(2);
  EXPECT_EQ(Call("POST", "/v1/jobs", json{{"command", {"true"}}}.dump()).status, 429);
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(b) + "/cancel").status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(b) == "cancelled"; }));
  EXPECT_GT(Submit("true"), 0);
}

TEST_F(JobServiceTest, ArrayQueuesEveryTaskWithItsIndexOrNoneAtAll) {
  StartDaemon(/*max_queued_per_user=*/5);
  // Each task writes its index and the array's size to its own log.
  json spec = {{"command", {"sh", "-c", "echo $GPUHERD_ARRAY_INDEX/$GPUHERD_ARRAY_SIZE"}},
               {"gpus", 0.1},
               {"gpu_mem", "1GiB"},
               {"name", "sweep"},
               {"array", 4}};
  auto r = Call("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  json ids = json::parse(r.body)["ids"];
  ASSERT_EQ(ids.size(), 4u);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_EQ(ids[i].get<int64_t>(), ids[0].get<int64_t>() + int64_t(i));
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& id : ids) {
      if (StateOf(id) != "completed") return false;
    }
    return true;
  }));
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string id = std::to_string(ids[i].get<int64_t>());
    auto shown = Call("GET", "/v1/jobs/" + id);
    EXPECT_EQ(json::parse(shown.body)["name"], "sweep[" + std::to_string(i) + "]") << shown.body;
    auto logs = Call("GET", "/v1/jobs/" + id + "/logs");
    EXPECT_EQ(json::parse(logs.body)["data"], std::to_string(i) + "/4\n") << logs.body;
  }
  // Over the queue limit as a whole: refused, and not one task is queued.
  ASSERT_GT(Submit("sleep 30"), 0);
  size_t before = List()["jobs"].size();
  spec["array"] = 5;
  auto refused = Call("POST", "/v1/jobs", spec.dump());
  EXPECT_EQ(refused.status, 429) << refused.body;
  // The user's true count (1), not the count plus the array (it said 5).
  EXPECT_NE(refused.body.find("at most 5 unfinished jobs; "), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find(" has 1, and this array adds 5 (4 more fit)"), std::string::npos) << refused.body;
  spec["array"] = 0;
  EXPECT_EQ(Call("POST", "/v1/jobs", spec.dump()).status, 400);
  spec["array"] = "4";
  EXPECT_EQ(Call("POST", "/v1/jobs", spec.dump()).status, 400);
  spec["array"] = 2;
  spec["gpus"] = 0.33;  // a bad spec refuses the whole array
  EXPECT_EQ(Call("POST", "/v1/jobs", spec.dump()).status, 400);
  EXPECT_EQ(List()["jobs"].size(), before);
}

TEST_F(JobServiceTest, DependenciesWaitRunOrCancelByTheStateOfWhatTheyNeed) {
  StartDaemon();
  int64_t done = Submit("true");
  int64_t failed = Submit("exit 3");
  ASSERT_TRUE(WaitFor([&] { return StateOf(done) == "completed" && StateOf(failed) == "failed"; }));
  int64_t blocker = Submit("sleep 30", 4);  // every GPU
  ASSERT_TRUE(WaitFor([&] { return StateOf(blocker) == "running"; }));
  auto submit_after = [&](int64_t dep) {
    json spec = {{"command", {"true"}}, {"gpus", 1}, {"depends_on", {dep}}};
    auto r = Call("POST", "/v1/jobs", spec.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return json::parse(r.body).value("id", int64_t{0});
  };
  int64_t after_done = submit_after(done);      // finished long ago: read from the store
  int64_t after_failed = submit_after(failed);  // can never run
  int64_t after_blocker = submit_after(blocker);
  ASSERT_TRUE(WaitFor([&] { return StateOf(after_failed) == "cancelled"; }));
  auto shown = json::parse(Call("GET", "/v1/jobs/" + std::to_string(after_failed)).body);
  EXPECT_EQ(shown["reason"], "dependency job " + std::to_string(failed) +
                                " failed; this job needed it to complete (--after)")
      << shown;
  // Passes go by while the GPUs are busy: both wait, neither is cancelled.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(StateOf(after_done), "pending");
  EXPECT_EQ(StateOf(after_blocker), "pending");
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(blocker) + "/cancel").status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(after_done) == "completed"; }));
  // The blocker was cancelled, not completed: what waited on it never runs.
  ASSERT_TRUE(WaitFor([&] { return StateOf(after_blocker) == "cancelled"; }));
}

}  // namespace
}  // namespace gpuherd::daemon
