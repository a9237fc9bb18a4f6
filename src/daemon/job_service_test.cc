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

TEST_F(JobServiceTest, LogsServeEachAttemptAndNameHowManyThereAre) {
  StartDaemon();
  // Each attempt writes its restart count, then waits to be requeued or to end.
  int64_t id = Submit("echo run ${GPUHERD_RESTART_COUNT:-0}; sleep 3", 0);
  ASSERT_GT(id, 0);
  const std::string path = "/v1/jobs/" + std::to_string(id);
  auto no_attempt = Call("GET", path + "/logs?attempt=1");
  if (StateOf(id) == "pending") {
    EXPECT_EQ(no_attempt.status, 404) << no_attempt.body;
    EXPECT_NE(no_attempt.body.find("it has not started yet"), std::string::npos) << no_attempt.body;
  }
  ASSERT_TRUE(WaitFor([&] { return json::parse(Call("GET", path + "/logs").body)["data"] == "run 0\n"; }));
  ASSERT_EQ(Call("POST", path + "/requeue").status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(id) == "completed"; }));

  json latest = json::parse(Call("GET", path + "/logs").body);
  EXPECT_EQ(latest["data"], "run 1\n") << latest.dump();
  EXPECT_EQ(latest["attempt"], 2);
  EXPECT_EQ(latest["attempts"], 2);
  EXPECT_EQ(latest["final"], true);
  json first = json::parse(Call("GET", path + "/logs?attempt=1").body);
  EXPECT_EQ(first["data"], "run 0\n") << first.dump();
  EXPECT_EQ(first["attempt"], 1);
  EXPECT_EQ(first["final"], true);
  EXPECT_EQ(json::parse(Call("GET", path + "/logs?attempt=2").body)["data"], "run 1\n");

  auto missing = Call("GET", path + "/logs?attempt=3");
  EXPECT_EQ(missing.status, 404) << missing.body;
  EXPECT_NE(missing.body.find("has no attempt 3: it has had 2 attempts (1-2)"), std::string::npos) << missing.body;
  EXPECT_EQ(Call("GET", path + "/logs?attempt=-1").status, 400);

  // show names each attempt's output folder.
  json shown = json::parse(Call("GET", path).body);
  ASSERT_EQ(shown["attempts"].size(), 2u) << shown.dump();
  for (int a = 1; a <= 2; ++a) {
    std::string logs = shown["attempts"][a - 1].value("logs", "");
    EXPECT_NE(logs.find("/jobs/" + std::to_string(id) + "/" + std::to_string(a)), std::string::npos) << shown.dump();
  }
}

TEST_F(JobServiceTest, HeldAtSubmissionStartsOnlyWhenReleased) {
  StartDaemon();
  json spec = {{"command", {"true"}}, {"gpus", 0}, {"hold", true}};
  auto r = Call("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = json::parse(r.body)["id"];
  spec["array"] = 2;
  auto array = Call("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(array.status, 201) << array.body;
  json tasks = json::parse(array.body)["ids"];
  // Held through several scheduling passes with every GPU free.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  json shown = json::parse(Call("GET", "/v1/jobs/" + std::to_string(id)).body);
  EXPECT_EQ(shown["state"], "held") << shown.dump();
  EXPECT_NE(shown["reason"].get<std::string>().find("held at submission"), std::string::npos) << shown.dump();
  for (const auto& t : tasks) EXPECT_EQ(StateOf(t), "held");
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(id) + "/release").status, 200);
  ASSERT_TRUE(WaitFor([&] { return StateOf(id) == "completed"; }));
  for (const auto& t : tasks) EXPECT_EQ(StateOf(t), "held");
  spec["hold"] = "yes";
  EXPECT_EQ(Call("POST", "/v1/jobs", spec.dump()).status, 400);
}

TEST_F(JobServiceTest, ArraysAreAddressedByTheirIdOrATaskId) {
  StartDaemon();
  json spec = {{"command", {"sh", "-c", "echo $GPUHERD_ARRAY_INDEX"}}, {"gpus", 0}, {"name", "lowp"},
               {"array", 3}, {"hold", true}};
  auto r = Call("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t a = json::parse(r.body)["ids"][0];
  const std::string as = std::to_string(a);
  // The array's id shows its first task with the array's summary.
  json shown = json::parse(Call("GET", "/v1/jobs/" + as).body);
  EXPECT_EQ(shown["array_id"], a) << shown.dump();
  EXPECT_EQ(shown["array"]["size"], 3) << shown.dump();
  EXPECT_EQ(shown["array"]["name"], "lowp");
  EXPECT_EQ(shown["array"]["states"], json({{"held", 3}}));
  EXPECT_EQ(shown["array"]["tasks"].size(), 3u);
  json task = json::parse(Call("GET", "/v1/jobs/" + as + "_2").body);
  EXPECT_EQ(task["id"], a + 2) << task.dump();
  EXPECT_EQ(task["array_index"], 2);
  EXPECT_FALSE(task.contains("array")) << task.dump();
  // Task 1 of the array is not job a+1's name for another array's task.
  EXPECT_FALSE(json::parse(Call("GET", "/v1/jobs/" + std::to_string(a + 1)).body).contains("array"));
  auto beyond = Call("GET", "/v1/jobs/" + as + "_3");
  EXPECT_EQ(beyond.status, 404) << beyond.body;
  EXPECT_NE(beyond.body.find("array " + as + " has no task " + as + "_3: its tasks are " + as + "_0 to " + as + "_2"),
            std::string::npos)
      << beyond.body;
  const int64_t single = Submit("true", 0);
  auto not_array = Call("GET", "/v1/jobs/" + std::to_string(single) + "_0");
  EXPECT_EQ(not_array.status, 404) << not_array.body;
  EXPECT_NE(not_array.body.find("is not an array"), std::string::npos) << not_array.body;
  EXPECT_EQ(Call("GET", "/v1/jobs/" + as + "_x").status, 400);

  // One task, then the whole array.
  json one = json::parse(Call("POST", "/v1/jobs/" + as + "_1/release").body);
  EXPECT_EQ(one["id"], a + 1) << one.dump();
  ASSERT_TRUE(WaitFor([&] { return StateOf(a + 1) == "completed"; }));
  EXPECT_EQ(StateOf(a), "held");
  auto all = Call("POST", "/v1/jobs/" + as + "/release");
  ASSERT_EQ(all.status, 200) << all.body;
  json released = json::parse(all.body);
  EXPECT_EQ(released["array"], true);
  ASSERT_EQ(released["tasks"].size(), 2u) << all.body;  // the ended task is left out
  EXPECT_EQ(released["tasks"][1]["task"], as + "_2");
  ASSERT_TRUE(WaitFor([&] { return StateOf(a) == "completed" && StateOf(a + 2) == "completed"; }));
  EXPECT_EQ(json::parse(Call("GET", "/v1/jobs/" + as + "_2/logs").body)["data"], "2\n");
  EXPECT_EQ(json::parse(Call("GET", "/v1/jobs/" + as + "/logs").body)["array"]["size"], 3);
  EXPECT_EQ(Call("POST", "/v1/jobs/" + as + "/hold").status, 412);

  // Cancel by the array's id, by a task, by the array's name.
  spec["array"] = 2;
  const int64_t c = json::parse(Call("POST", "/v1/jobs", spec.dump()).body)["ids"][0];
  spec["name"] = "sweep";
  const int64_t d = json::parse(Call("POST", "/v1/jobs", spec.dump()).body)["ids"][0];
  json by_id = json::parse(Call("POST", "/v1/jobs/cancel", json({{"ids", {c}}}).dump()).body);
  EXPECT_EQ(by_id["cancelled"], json({c, c + 1})) << by_id.dump();
  json by_name = json::parse(Call("POST", "/v1/jobs/cancel", json({{"name", "sweep"}}).dump()).body);
  EXPECT_EQ(by_name["cancelled"], json({d, d + 1})) << by_name.dump();
  spec["name"] = "t";
  const int64_t e = json::parse(Call("POST", "/v1/jobs", spec.dump()).body)["ids"][0];
  json by_task = json::parse(
      Call("POST", "/v1/jobs/cancel", json({{"ids", {std::to_string(e) + "_1"}}}).dump()).body);
  EXPECT_EQ(by_task["cancelled"], json({e + 1})) << by_task.dump();
  EXPECT_EQ(StateOf(e), "held");

  // The array outlives a restart of the daemon.
  StopDaemon();
  StartDaemon();
  json after = json::parse(Call("GET", "/v1/jobs/" + as).body);
  EXPECT_EQ(after["array"]["states"], json({{"completed", 3}})) << after.dump();
  EXPECT_EQ(json::parse(Call("GET", "/v1/jobs/" + std::to_string(e)).body)["array"]["states"],
            json({{"cancelled", 1}, {"held", 1}}));
}

}  // namespace
}  // namespace gpuherd::daemon
