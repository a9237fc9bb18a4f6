// Pipeline runs through a real daemon on a simulated fleet: the nodes' jobs
// are real shell processes, the API is the unix socket's.
#include "daemon/pipeline_service.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/client.h"
#include "daemon/daemon.h"
#include "daemon/event_loop.h"
#include "daemon/job_backend.h"
#include "daemon/queue/queue_harness.h"
#include "exec/launcher.h"
#include "store/store.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class PipelineServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = fs::temp_directory_path() / ("gpuherd_pipeline_service_test_" + std::to_string(getpid()));
    fs::remove_all(home_);
    fs::create_directories(home_ / "files");
    clock_ = host::NewRealClock();
  }
  void TearDown() override {
    CancelUnfinishedJobs();
    StopDaemon();
    fs::remove_all(home_);
  }

  // Jobs outlive the daemon by design: the test's own must not.
  void CancelUnfinishedJobs() {
    if (!daemon_) return;
    json jobs = Get("/v1/jobs");
    for (const auto& j : jobs["jobs"]) Call("POST", "/v1/jobs/" + std::to_string(j["id"].get<int64_t>()) + "/cancel");
    EXPECT_TRUE(WaitFor([&] { return Get("/v1/jobs")["jobs"].empty(); }));
  }

  void StartDaemon(int max_queued_jobs_per_user = 0, const std::string& scenario = "") {
    DaemonOptions options;
    options.queue.scheduler.max_queued_jobs_per_user = max_queued_jobs_per_user;
    options.home = home_.string();
    if (scenario.empty()) {
      options.driver.sim_count = 4;
    } else {
      const fs::path file = home_ / "files" / "scenario.yaml";
      std::ofstream(file) << scenario;
      options.driver.scenario_path = file.string();
    }
    options.port = -1;
    options.sample_interval = 100;
    auto d = Daemon::Create(options, clock_.get());
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    daemon_ = std::move(d).value();
    runner_ = std::thread([this] { EXPECT_TRUE(daemon_->Run().ok()); });
  }

  void StopDaemon() {
    if (!daemon_) return;
    daemon_->Stop();
    runner_.join();
    daemon_.reset();
  }

  http::ClientResponse Call(const std::string& method, const std::string& target, const std::string& body = "") {
    http::Client client(http::Endpoint{daemon_->socket_path()});
    auto r = client.Request(method, target, body);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }

  json Get(const std::string& target) {
    auto r = Call("GET", target);
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
    return json::parse(r.body, nullptr, false);
  }

  // Runs `yaml` (its relative paths meaning files/) and returns the run id.
  int64_t Run(const std::string& yaml, json params = json::object()) {
    json body = {{"yaml", yaml}, {"source", "test.yaml"}, {"base_dir", (home_ / "files").string()},
                 {"params", params}};
    auto r = Call("POST", "/v1/pipelines", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return r.status == 201 ? json::parse(r.body)["id"].get<int64_t>() : 0;
  }

  json Show(int64_t id) { return Get("/v1/pipelines/" + std::to_string(id)); }

  json Node(const json& run, const std::string& id) {
    for (const auto& n : run["nodes"]) {
      if (n["id"] == id) return n;
    }
    ADD_FAILURE() << "no node " << id << " in " << run.dump();
    return json::object();
  }

  bool WaitState(int64_t id, const std::string& state) {
    return WaitFor([&] { return Show(id).value("state", "") == state; });
  }

  static bool WaitFor(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return true;
  }

  static std::string Read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::string RunDir(int64_t id) { return (home_ / "pipelines" / std::to_string(id)).string(); }

  fs::path home_;
  std::unique_ptr<host::Clock> clock_;
  std::unique_ptr<Daemon> daemon_;
  std::thread runner_;
};

TEST(PipelineListingTest, FinishedRunsOfTheLastDayAreListedWithoutAll) {
  constexpr TimeMs kNow = 1'700'000'000'000;
  auto run = [](const std::string& state, const std::string& outcome, TimeMs finished) {
    store::PipelineRunRecord r;
    r.state = state;
    r.outcome = outcome;
    r.finished = finished;
    return r;
  };
  const store::PipelineRunRecord running = run("running", "", 0);
  const store::PipelineRunRecord failed_today = run("failed", "failed", kNow - 23 * kHourMs);
  const store::PipelineRunRecord done_yesterday = run("completed", "succeeded", kNow - 25 * kHourMs);
  using Filter = PipelineService::ListFilter;
  EXPECT_TRUE(PipelineService::RunListed(running, Filter{}, kNow));
  EXPECT_TRUE(PipelineService::RunListed(failed_today, Filter{}, kNow));
  EXPECT_FALSE(PipelineService::RunListed(done_yesterday, Filter{}, kNow));
  EXPECT_TRUE(PipelineService::RunListed(done_yesterday, Filter{.all = true, .state = ""}, kNow));
  // A state asks for runs of any age, as `ps --state` does, by state or outcome.
  EXPECT_TRUE(PipelineService::RunListed(done_yesterday, Filter{.state = "succeeded"}, kNow));
  EXPECT_TRUE(PipelineService::RunListed(done_yesterday, Filter{.state = "completed"}, kNow));
  EXPECT_FALSE(PipelineService::RunListed(failed_today, Filter{.state = "succeeded"}, kNow));
  EXPECT_FALSE(PipelineService::RunListed(running, Filter{.all = true, .state = "failed"}, kNow));
  EXPECT_TRUE(PipelineService::IsListedState("cancelled"));
  EXPECT_FALSE(PipelineService::IsListedState("stopped"));
}

TEST_F(PipelineServiceTest, InvalidFileIsRefusedWithItsLineAndNothingIsStored) {
  StartDaemon();
  json body = {{"yaml", "name: bad\nsteps:\n  a:\n    run: \"true\"\n    colour: blue\n"}, {"source", "bad.yaml"}};
  auto r = Call("POST", "/v1/pipelines", body.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("bad.yaml:5"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("colour"), std::string::npos) << r.body;

  body = {{"yaml", "name: p\nparams: {n: 1}\nsteps:\n  a: {run: \"true\"}\n"}, {"params", {{"m", "2"}}}};
  r = Call("POST", "/v1/pipelines", body.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("no parameter 'm'"), std::string::npos) << r.body;
  EXPECT_EQ(Call("POST", "/v1/pipelines", R"({"yaml": "name: p", "colour": 1})").status, 400);
  EXPECT_EQ(Get("/v1/pipelines?all=1")["pipelines"].size(), 0u);
  EXPECT_EQ(Call("GET", "/v1/pipelines/1").status, 404);
}

// The owner of a run folder controls what is in it: a link planted where the
// daemon is about to make a node's folder is not followed (the daemon made,
// and as root chowned, folders wherever it pointed). The folders are made
// off the event loop after the run is stored: the run fails with the reason,
// none of its nodes was ever submitted, and a retry once the link is gone
// makes the folders and runs it.
TEST_F(PipelineServiceTest, LinkPlantedInTheRunFolderIsNotFollowed) {
  StartDaemon();
  fs::create_directories(home_ / "victim");
  fs::create_directories(RunDir(1));
  fs::create_directory_symlink(home_ / "victim", RunDir(1) + "/train");
  const int64_t id = Run("name: p\ndefaults: {gpus: 0}\nsteps:\n  train:\n    matrix: {x: [1, 2]}\n"
                         "    run: \"true\"\n");
  ASSERT_EQ(id, 1);
  ASSERT_TRUE(WaitState(id, "failed")) << Show(id).dump(2);
  json run = Show(id);
  ASSERT_EQ(run["nodes"].size(), 2u);
  for (const auto& n : run["nodes"]) {
    EXPECT_EQ(n["state"], "skipped") << n.dump();
    EXPECT_EQ(n["attempts"], 0) << n.dump();  // no job was submitted before the folders failed
    EXPECT_NE(n["reason"].get<std::string>().find("folders could not be made"), std::string::npos) << n.dump();
    EXPECT_NE(n["reason"].get<std::string>().find("symbolic link"), std::string::npos) << n.dump();
  }
  EXPECT_TRUE(fs::is_empty(home_ / "victim"));
  EXPECT_EQ(Get("/v1/jobs")["jobs"].size(), 0u);

  fs::remove(RunDir(1) + "/train");
  auto retried = Call("POST", "/v1/pipelines/1/retry");
  ASSERT_EQ(retried.status, 200) << retried.body;
  ASSERT_TRUE(WaitState(id, "completed")) << Show(id).dump(2);
  EXPECT_TRUE(fs::is_directory(RunDir(1) + "/train/0"));
  EXPECT_TRUE(fs::is_directory(RunDir(1) + "/train/1"));
  EXPECT_TRUE(fs::is_empty(home_ / "victim"));
}

// A sweep whose point b fails on its first attempt: the retry is a new job
// that finds the node's checkpoint folder, knows it resumes, and the report
// step reads every point's workspace.
TEST_F(PipelineServiceTest, SweepRunsOnTheQueueAndAFailedPointResumesFromItsCheckpoint) {
  StartDaemon();
  const std::string yaml = R"(name: sweep
params: {greeting: hello}
defaults: {gpus: 0}
steps:
  prepare:
    run: ["sh", "-c", "echo ${{ params.greeting }} > ${{ workspace }}/data/input"]
    artifacts: [data]
  train:
    needs: [prepare]
    matrix: {point: [a, b, c]}
    retries: 1
    run:
      - sh
      - -c
      - >-
        cat ${{ step.prepare.workspace }}/data/input > ${{ workspace }}/out;
        echo "$GPUHERD_CHECKPOINT_DIR $GPUHERD_RESTART_COUNT ${GPUHERD_RESUME:-0}" >> ${{ workspace }}/env;
        echo "$GPUHERD_NODE $GPUHERD_PARAMS" > ${{ workspace }}/params;
        if [ ${{ matrix.point }} = b ] && [ ! -e $GPUHERD_CHECKPOINT_DIR/ckpt ]; then
        touch $GPUHERD_CHECKPOINT_DIR/ckpt; echo "loading data"; echo "warming up" >&2;
        echo "CUDA out of memory at step 7" >&2; exit 3; fi
  report:
    needs: [train]
    if: always
    run: ["sh", "-c", "cat ${{ step.train.workspace }}/*/out | wc -l > ${{ workspace }}/lines"]
)";
  int64_t id = Run(yaml, {{"greeting", "bonjour"}});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Show(id)["state"] != "running"; })) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_EQ(run["state"], "completed") << run.dump(2);
  EXPECT_EQ(run["outcome"], "succeeded");
  EXPECT_EQ(run["params"]["greeting"], "bonjour");
  EXPECT_EQ(run["nodes"].size(), 5u);
  for (const auto& n : run["nodes"]) EXPECT_EQ(n["state"], "completed") << n.dump();
  json b = Node(run, "train[point=b]");
  EXPECT_EQ(b["attempts"], 2);
  EXPECT_EQ(b["matrix"]["point"], "b");
  EXPECT_EQ(Node(run, "train[point=a]")["attempts"], 1);
  // The failed first attempt of b is remembered with why it ended and the
  // end of its standard error; a's history is empty.
  ASSERT_EQ(b["attempt_history"].size(), 1u) << b.dump(2);
  EXPECT_EQ(b["attempt_history"][0]["state"], "failed");
  EXPECT_EQ(b["attempt_history"][0]["reason"], "exited with code 3");
  EXPECT_EQ(b["attempt_history"][0]["stderr_tail"], json({"warming up", "CUDA out of memory at step 7"}));
  EXPECT_TRUE(Node(run, "train[point=a]")["attempt_history"].empty());

  const std::string dir = RunDir(id);
  EXPECT_EQ(Read(dir + "/train/0/out"), "bonjour\n");
  EXPECT_EQ(Read(dir + "/report/lines"), "3\n");
  // Both attempts of b saw the same checkpoint folder; the second resumed.
  const std::string ckpt = dir + "/.checkpoints/train/1";
  EXPECT_EQ(Read(dir + "/train/1/env"), ckpt + " 0 0\n" + ckpt + " 1 1\n");
  EXPECT_EQ(Read(dir + "/train/0/env"), dir + "/.checkpoints/train/0 0 0\n");
  // Each point is told which parameters it runs.
  EXPECT_EQ(Read(dir + "/train/1/params"), "train[point=b] {\"point\":\"b\"}\n");

  json listing = Get("/v1/pipelines?all=1")["pipelines"];
  ASSERT_EQ(listing.size(), 1u);
  EXPECT_EQ(listing[0]["nodes"]["total"], 5);
  EXPECT_EQ(listing[0]["nodes"]["completed"], 5);
  // Nothing runs, and the run finished today: it is listed all the same,
  // and by its outcome.
  EXPECT_EQ(Get("/v1/pipelines")["pipelines"].size(), 1u);
  EXPECT_EQ(Get("/v1/pipelines?state=running")["pipelines"].size(), 0u);
  EXPECT_EQ(Get("/v1/pipelines?state=succeeded")["pipelines"].size(), 1u);
  EXPECT_EQ(Call("GET", "/v1/pipelines?state=stopped").status, 400);
}

// ASHA (grace 1, reduction 3) over three points whose losses are 1000/step,
// 2000/step and 3000/step: the best point starts writing at once, the others a
// second later. Once the three have a value at a rung only the top 1 goes
// on: the two worse points stop at the rung they are at (1, or 3 when they
// passed it before a round read them). The best point runs to the end; the
// run succeeds and the step that needs the sweep runs.
TEST_F(PipelineServiceTest, AshaStopsThePointsBehindAndTheBestRunsToTheEnd) {
  StartDaemon();
  const std::string yaml = R"(name: asha
defaults: {gpus: 0}
steps:
  train:
    matrix: {scale: [1, 2, 3]}
    objective: {metric: loss, mode: min}
    early_stop: {policy: asha, grace: 1, reduction: 3}
    run:
      - sh
      - -c
      - >-
        trap 'echo stopped > ${{ workspace }}/end; exit 0' TERM;
        if [ ${{ matrix.scale }} != 1 ]; then sleep 1; fi;
        for s in 1 2 3 4 5 6 7 8 9; do
        echo "{\"step\": $s, \"loss\": $(( ${{ matrix.scale }} * 1000 / s ))}" >> $GPUHERD_METRICS_FILE;
        sleep 0.3; done; echo done > ${{ workspace }}/end
  after:
    needs: [train]
    run: ["sh", "-c", "echo ran > ${{ workspace }}/ran"]
)";
  int64_t id = Run(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Show(id)["state"] != "running"; })) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_EQ(run["outcome"], "succeeded") << run.dump(2);
  EXPECT_EQ(run["objectives"]["train"]["metric"], "loss");
  EXPECT_EQ(Node(run, "train[scale=1]")["state"], "completed");
  for (const char* worse : {"train[scale=2]", "train[scale=3]"}) {
    json n = Node(run, worse);
    EXPECT_EQ(n["state"], "stopped") << n.dump();
    EXPECT_THAT(n["reason"].get<std::string>(),
                ::testing::MatchesRegex("stopped early by ASHA at rung [13] \\(rank [23] of 3 on loss\\)"))
        << n.dump();
    EXPECT_EQ(n["attempts"], 1);  // a stop is not a failure: no retry
  }
  const std::string dir = RunDir(id);
  EXPECT_EQ(Read(dir + "/train/0/end"), "done\n");
  EXPECT_EQ(Read(dir + "/train/1/end"), "stopped\n");  // SIGTERM, so it could checkpoint
  EXPECT_EQ(Read(dir + "/after/ran"), "ran\n");
  EXPECT_EQ(Get("/v1/pipelines?all=1")["pipelines"][0]["nodes"]["stopped"], 2);
}

// Nine points, one GPU each on four GPUs, so they run in waves; losses
// scale·1000/step: the best (scale 1) starts first, and every later point is
// worse than it at every rung, so it ranks outside the top 1/3 of the values
// there once 3 exist and is stopped. The best runs to the end and is named best.
TEST_F(PipelineServiceTest, NinePointAshaSweepKeepsOnlyTheKnownBestPoint) {
  StartDaemon();
  const std::string yaml = R"(name: asha9
steps:
  train:
    matrix: {scale: [1, 2, 3, 4, 5, 6, 7, 8, 9]}
    gpus: 1
    objective: {metric: loss, mode: min}
    early_stop: {policy: asha, grace: 2, reduction: 3}
    run:
      - sh
      - -c
      - >-
        trap 'exit 143' TERM;
        if [ ${{ matrix.scale }} != 1 ]; then sleep 1; fi;
        for s in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18; do
        echo "{\"step\": $s, \"loss\": $(( ${{ matrix.scale }} * 1000 / s ))}" >> $GPUHERD_METRICS_FILE;
        sleep 0.2; done
)";
  int64_t id = Run(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Show(id)["state"] != "running"; })) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_EQ(run["outcome"], "succeeded") << run.dump(2);
  EXPECT_EQ(Node(run, "train[scale=1]")["state"], "completed");
  for (int scale = 2; scale <= 9; ++scale) {
    json n = Node(run, "train[scale=" + std::to_string(scale) + "]");
    EXPECT_EQ(n["state"], "stopped") << n.dump();
    EXPECT_THAT(n["reason"].get<std::string>(), ::testing::StartsWith("stopped early by ASHA at rung ")) << n.dump();
  }
  EXPECT_EQ(run["best_points"]["train"]["node"], "train[scale=1]");
  EXPECT_EQ(run["best_points"]["train"]["value"], 1000 / 18);
  EXPECT_EQ(Node(run, "train[scale=1]")["objective"]["rank"], 1);
}

// XID 79 takes GPU 0 off the bus while the only point runs there: the
// queue restarts its job from its checkpoint on the other GPU, and the node
// completes on its first attempt although it has no retries.
TEST_F(PipelineServiceTest, AGpuFaultDuringAPointDoesNotUseItsRetries) {
  StartDaemon(0, R"(
description: two A100s; GPU 0 falls off the bus after two seconds
seed: 3
gpus:
  - {model: a100-40gb, count: 2}
faults:
  - {at: 2s, gpu: 0, kind: xid, xid: 79}
)");
  const std::string yaml = R"(name: fault
steps:
  train:
    matrix: {point: [a]}
    gpus: 1
    retries: 0
    checkpoint: {grace: 2s}
    run:
      - sh
      - -c
      - >-
        echo "$CUDA_VISIBLE_DEVICES" >> ${{ workspace }}/gpus;
        if [ -e $GPUHERD_CHECKPOINT_DIR/ckpt ]; then exit 0; fi;
        trap 'touch $GPUHERD_CHECKPOINT_DIR/ckpt; exit 143' TERM;
        for i in $(seq 1 100); do sleep 0.1; done; exit 5
)";
  int64_t id = Run(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Show(id)["state"] != "running"; })) << Show(id).dump(2);
  json run = Show(id);
  json node = Node(run, "train[point=a]");
  EXPECT_EQ(run["outcome"], "succeeded") << run.dump(2);
  EXPECT_EQ(node["state"], "completed");
  EXPECT_EQ(node["attempts"], 1);  // the node's retries were not touched
  ASSERT_EQ(node["attempt_history"].size(), 1u) << node.dump(2);
  EXPECT_EQ(node["attempt_history"][0]["state"], "requeued");
  EXPECT_NE(node["attempt_history"][0]["reason"].get<std::string>().find("GPU 0"), std::string::npos) << node.dump(2);
  // Two lines: the first attempt on GPU 0, the resumed one on GPU 1.
  const std::string gpus = Read(RunDir(id) + "/train/0/gpus");
  EXPECT_EQ(std::count(gpus.begin(), gpus.end(), '\n'), 2) << gpus;
}

// Eight points against a queue limit of 3 jobs per user: the nodes the queue
// refuses wait for room instead of failing, and every point runs once.
TEST_F(PipelineServiceTest, NodesBeyondTheOwnersQueueLimitWaitForRoom) {
  StartDaemon(/*max_queued_jobs_per_user=*/3);
  const std::string yaml = R"(name: limited
defaults: {gpus: 0}
steps:
  point:
    matrix: {i: [0, 1, 2, 3, 4, 5, 6, 7]}
    run: ["sh", "-c", "sleep 0.2; echo ${{ matrix.i }} > ${{ workspace }}/out"]
)";
  int64_t id = Run(yaml);
  ASSERT_GT(id, 0);
  bool saw_waiting = false;
  ASSERT_TRUE(WaitFor([&] {
    json run = Show(id);
    for (const auto& n : run["nodes"]) {
      if (n["state"] == "waiting" && n.value("reason", std::string()).find("waits for room in the queue") !=
                                         std::string::npos) {
        saw_waiting = true;
      }
    }
    return run["state"] != "running";
  })) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_TRUE(saw_waiting) << "no node was ever held back by the limit";
  EXPECT_EQ(run["state"], "completed") << run.dump(2);
  for (const auto& n : run["nodes"]) {
    EXPECT_EQ(n["state"], "completed") << n.dump();
    EXPECT_EQ(n["attempts"], 1) << n.dump();
  }
}

// GPU time counts every attempt: a retried node on half a GPU whose two
// attempts each last at least 0.4 s holds at least 0.4 GPU-seconds.
TEST_F(PipelineServiceTest, GpuTimeCountsEveryAttemptOfANode) {
  StartDaemon();
  const std::string yaml = R"(name: gpu-time
steps:
  train:
    gpus: 0.5
    gpu_mem: 1GiB
    retries: 1
    run: ["sh", "-c", "sleep 0.4; if [ ! -e $GPUHERD_CHECKPOINT_DIR/ckpt ]; then touch $GPUHERD_CHECKPOINT_DIR/ckpt; exit 3; fi"]
)";
  int64_t id = Run(yaml);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitFor([&] { return Show(id)["state"] != "running"; })) << Show(id).dump(2);
  json node = Node(Show(id), "train");
  EXPECT_EQ(node["attempts"], 2) << node.dump();
  const double last = 0.5 * (node["ended"].get<double>() - node["started"].get<double>()) / 1000;
  EXPECT_GE(node["gpu_seconds"].get<double>(), 0.4) << node.dump();
  EXPECT_GT(node["gpu_seconds"].get<double>(), last + 0.19) << "only the last attempt counted: " << node.dump();
}

TEST_F(PipelineServiceTest, AFailureSkipsWhatNeedsItAndRetryFinishesTheRun) {
  StartDaemon();
  const std::string marker = (home_ / "files" / "fixed").string();
  const std::string yaml = R"(name: chain
defaults: {gpus: 0}
steps:
  a: {run: ["sh", "-c", "test -e fixed"]}
  b: {needs: [a], run: "true"}
  c: {needs: [b], run: "true"}
  report: {needs: [c], if: always, run: "true"}
)";
  int64_t id = Run(yaml);
  ASSERT_TRUE(WaitState(id, "failed")) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_EQ(run["outcome"], "failed");
  EXPECT_EQ(Node(run, "a")["state"], "failed");
  EXPECT_EQ(Node(run, "b")["state"], "skipped");
  EXPECT_NE(Node(run, "b")["reason"].get<std::string>().find("it needs a, which failed"), std::string::npos);
  EXPECT_EQ(Node(run, "c")["state"], "skipped");
  EXPECT_EQ(Node(run, "report")["state"], "completed");
  EXPECT_EQ(Get("/v1/pipelines?all=1")["pipelines"][0]["nodes"]["skipped"], 2);

  std::ofstream(marker).put('\n');
  auto retried = Call("POST", "/v1/pipelines/" + std::to_string(id) + "/retry");
  ASSERT_EQ(retried.status, 200) << retried.body;
  EXPECT_EQ(json::parse(retried.body)["state"], "running");
  ASSERT_TRUE(WaitState(id, "completed")) << Show(id).dump(2);
  run = Show(id);
  EXPECT_EQ(Node(run, "a")["attempts"], 2);
  EXPECT_EQ(Node(run, "c")["state"], "completed");
  EXPECT_EQ(Node(run, "report")["attempts"], 1);  // it had completed: not run again
  auto again = Call("POST", "/v1/pipelines/" + std::to_string(id) + "/retry");
  EXPECT_EQ(again.status, 412) << again.body;
}

TEST_F(PipelineServiceTest, CancelStopsRunningJobsAndWaitingNodes) {
  StartDaemon();
  int64_t id = Run("name: long\ndefaults: {gpus: 1}\nsteps:\n  a: {run: \"sleep 60\"}\n"
                   "  b: {needs: [a], run: \"true\"}\n");
  ASSERT_TRUE(WaitFor([&] { return Node(Show(id), "a")["state"] == "running"; }));
  EXPECT_EQ(Node(Show(id), "a")["gpus"].size(), 1u);
  auto r = Call("POST", "/v1/pipelines/" + std::to_string(id) + "/cancel");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["state"], "cancelled");
  ASSERT_TRUE(WaitFor([&] { return Node(Show(id), "a")["state"] == "cancelled"; })) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_EQ(run["state"], "cancelled");
  EXPECT_EQ(run["outcome"], "cancelled");
  EXPECT_EQ(Node(run, "b")["state"], "cancelled");
  EXPECT_EQ(Call("POST", "/v1/pipelines/" + std::to_string(id) + "/cancel").status, 412);
}

TEST_F(PipelineServiceTest, MetricsAreCollectedAndANanStopsTheNodeOnce) {
  StartDaemon();
  const std::string yaml = R"(name: nan
defaults: {gpus: 0}
anomalies: {nan: stop}
steps:
  train:
    run:
      - sh
      - -c
      - >-
        echo '{"step": 1, "loss": 0.9, "acc": 0.5}' >> $GPUHERD_METRICS_FILE;
        echo '{"step": 2, "loss": 0.4, "acc": 0.7}' >> $GPUHERD_METRICS_FILE;
        echo '{"step": 3, "loss": NaN, "acc": 0.6}' >> $GPUHERD_METRICS_FILE;
        sleep 60
)";
  int64_t id = Run(yaml);
  ASSERT_TRUE(WaitState(id, "failed")) << Show(id).dump(2);
  json node = Node(Show(id), "train");
  EXPECT_EQ(node["state"], "failed");
  EXPECT_NE(node["reason"].get<std::string>().find("stopped by an anomaly check"), std::string::npos) << node;
  EXPECT_EQ(node["latest_metrics"]["step"], 3);
  EXPECT_TRUE(node["latest_metrics"]["loss"].is_null());
  EXPECT_EQ(node["best"]["loss"], 0.4);
  EXPECT_EQ(node["best"]["acc"], 0.7);

  json metrics = Get("/v1/pipelines/" + std::to_string(id) + "/metrics?node=train")["metrics"];
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics[0]["step"], 1);
  EXPECT_EQ(metrics[0]["values"]["loss"], 0.9);
  EXPECT_EQ(metrics[0]["attempt"], 1);
  EXPECT_FALSE(metrics[0]["values"].contains("step"));
  EXPECT_EQ(Call("GET", "/v1/pipelines/" + std::to_string(id) + "/metrics?node=nope").status, 404);

  json events = Get("/v1/events?kind=pipeline.anomaly")["events"];
  ASSERT_EQ(events.size(), 1u) << events.dump(2);
  EXPECT_NE(events[0]["message"].get<std::string>().find("action: stop"), std::string::npos) << events[0];

  // The anomaly was an alert too, resolved once its job had stopped.
  json alerts = Get("/v1/alerts?all=1")["alerts"];
  const json* nan_alert = nullptr;
  for (const json& a : alerts) {
    if (a["rule"] == "pipeline_nan") nan_alert = &a;
  }
  ASSERT_NE(nan_alert, nullptr) << alerts.dump(2);
  EXPECT_EQ((*nan_alert)["state"], "resolved");
  EXPECT_NE((*nan_alert)["subject"].get<std::string>().find("node train"), std::string::npos) << *nan_alert;
  EXPECT_EQ(Get("/v1/events?kind=alert.firing")["events"].size(), 1u);
}

TEST_F(PipelineServiceTest, ARestartedDaemonCarriesOnWithTheRun) {
  StartDaemon();
  int64_t id = Run("name: survive\ndefaults: {gpus: 0}\nsteps:\n  a: {run: \"sleep 1.5\"}\n"
                   "  b: {needs: [a], run: [\"sh\", \"-c\", \"echo done > ${{ workspace }}/out\"]}\n");
  ASSERT_TRUE(WaitFor([&] { return Node(Show(id), "a")["state"] == "running"; }));
  StopDaemon();
  // As if the daemon had stopped before its folder worker made b's
  // workspace: the reload makes the run's folders again before b starts.
  ASSERT_TRUE(fs::is_directory(RunDir(id) + "/b"));
  fs::remove_all(RunDir(id) + "/b");
  StartDaemon();
  ASSERT_TRUE(WaitState(id, "completed")) << Show(id).dump(2);
  EXPECT_EQ(Read(RunDir(id) + "/b/out"), "done\n");
  EXPECT_EQ(Node(Show(id), "a")["attempts"], 1);
  // Ids are never reused.
  EXPECT_EQ(Run("name: next\nsteps:\n  a: {run: \"true\", gpus: 0}\n"), id + 1);
}

// Stopped right after answering, while its worker makes a 2,000-point
// sweep's folders: the worker stops between two folders, and the next start
// makes every folder before the run goes on (on 2 shared cores the first
// daemon had made about 100 of the 2,000 workspaces when it stopped).
TEST_F(PipelineServiceTest, ADaemonStoppedWhileMakingFoldersMakesThemAtTheNextStart) {
  StartDaemon();
  std::string points;
  for (int i = 0; i < 2000; ++i) points += (i ? ", " : "") + std::to_string(i);
  const int64_t id = Run("name: wide\ndefaults: {gpus: 0}\nsteps:\n  prepare: {run: \"sleep 60\"}\n"
                         "  work:\n    needs: [prepare]\n    matrix: {i: [" + points + "]}\n    run: \"true\"\n");
  ASSERT_GT(id, 0);
  StopDaemon();
  StartDaemon();
  ASSERT_TRUE(WaitFor([&] { return Node(Show(id), "prepare")["state"] == "running"; })) << Show(id).dump(2);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(fs::is_directory(RunDir(id) + "/work/" + std::to_string(i))) << i;
  }
  EXPECT_TRUE(fs::is_directory(RunDir(id) + "/.checkpoints/work"));
  EXPECT_EQ(Show(id)["state"], "running");
}

TEST_F(PipelineServiceTest, PlainJobsHaveTheirMetricsCollectedToo) {
  StartDaemon();
  json spec = {{"command", {"sh", "-c", "echo '{\"step\": 1, \"loss\": 2.5}' >> $GPUHERD_METRICS_FILE"}},
               {"gpus", 0}};
  auto r = Call("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t job = json::parse(r.body)["id"].get<int64_t>();
  ASSERT_TRUE(WaitFor([&] { return Get("/v1/jobs/" + std::to_string(job))["state"] == "completed"; }));
  StopDaemon();
  store::StoreOptions read_only;
  read_only.read_only = true;
  auto store = store::Store::Open((home_ / "state.db").string(), read_only);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto lines = (*store)->ListJobMetrics(job);
  ASSERT_TRUE(lines.ok());
  ASSERT_EQ(lines->size(), 1u);
  EXPECT_EQ((*lines)[0].run_id, 0);
  EXPECT_EQ(json::parse((*lines)[0].line_json)["loss"], 2.5);
}

// The service on the queue's FakeExecutor (queue_harness.h), with a real
// event loop whose end of turn is the daemon's: the pipelines', then the
// queue's, the commit (which the test can make fail, as a full disk does),
// and the after-commits. Only the folder worker is a thread of its own.
class PipelineCommitTest : public ::testing::Test {
 protected:
  PipelineCommitTest()
      : loop_([this] { return Turn(); }),
        backend_(&q_.jobs(), &q_.state()),
        pipelines_(&q_.state(), {&backend_}, "local", q_.dir(),
                   [this](std::function<void()> task) { loop_.Post(std::move(task)); }) {}
  void SetUp() override {
    backend_.SetStateListener([this](const sched::Job& job) { pipelines_.OnJobChanged(job); });
    ASSERT_TRUE(pipelines_.Load().ok());
    runner_ = std::thread([this] { loop_.Run(); });
  }
  void TearDown() override {
    loop_.Stop();
    runner_.join();
  }

  // What the daemon's HTTP thread does with POST /v1/pipelines: prepare the
  // run there, create it on the loop; nullopt when the turn's commit failed
  // (the daemon then answers 503 and the client is told nothing was done).
  std::optional<int64_t> Create(const std::string& yaml) {
    api::PipelineCreateRequest request;
    request.yaml = yaml;
    request.source = "sweep.yaml";
    auto prepared = pipelines_.Prepare(request, q_.User());
    EXPECT_TRUE(prepared.ok()) << prepared.status().ToString();
    if (!prepared.ok()) return std::nullopt;
    return loop_.CallOr<std::optional<int64_t>>(
        [&]() -> std::optional<int64_t> {
          auto created = pipelines_.Create(std::move(prepared).value(), q_.User());
          EXPECT_TRUE(created.ok()) << created.status().ToString();
          return created.ok() ? std::optional<int64_t>(created->id) : std::nullopt;
        },
        std::nullopt);
  }
  // Runs `fn` on the loop, after the turns that were queued.
  template <typename T>
  T OnLoop(std::function<T()> fn) {
    auto got = loop_.CallOr<std::optional<T>>([&] { return std::optional<T>(fn()); }, std::nullopt);
    EXPECT_TRUE(got.has_value());
    return got.value_or(T{});
  }
  // Turns (and the folder worker's answers) until `done` holds on the loop
  // in a turn whose commit went through.
  bool TurnUntil(const std::function<bool()>& done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!loop_.CallOr<bool>(done, false)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  // Turns until the run is completed, every job it launched ending well
  // (on the loop: the FakeExecutor reports an exit on the calling thread).
  bool Complete(int64_t id) {
    return TurnUntil([&] {
      for (const auto& [job, attempt] : q_.executor().running()) {
        q_.executor().Exit(job, attempt, exec::ExitRecord::How::kExited, 0);
      }
      auto run = pipelines_.Show(id, q_.User());
      return run.ok() && run->summary.state == "completed";
    });
  }
  std::string RunState(int64_t id) {
    return OnLoop<std::string>([&] {
      auto shown = pipelines_.Show(id, q_.User());
      return shown.ok() ? shown->summary.state : shown.status().ToString();
    });
  }
  std::string RunDir(int64_t id) const { return q_.dir().root + "/pipelines/" + std::to_string(id); }

  // The daemon's turn (daemon.cc CommitTurn), on the loop thread.
  bool Turn() {
    q_.RunQueued();  // launches made and reported back
    pipelines_.EndOfTurn();
    q_.jobs().EndOfTurn();
    DaemonState& state = q_.state();
    bool ok = !fail_next_commit_.exchange(false);
    if (fail_next_submit_) {
      for (const auto& node : state.batch.pipeline_nodes) {
        if (node.state == "active") dropped_jobs_.insert(node.job_id);
      }
      ok = dropped_jobs_.empty();
      if (!ok) fail_next_submit_ = false;
    }
    if (!ok) ++failed_commits_;
    if (ok && !state.batch.empty()) ok = state.store->Commit(&state.batch).ok();
    state.batch = store::WriteBatch();
    q_.jobs().AfterCommit(ok);
    pipelines_.AfterCommit(ok);
    return ok;
  }

  testing::QueueHarness q_{2, {}, "pipeline_commit"};
  EventLoop loop_;
  LocalBackend backend_;
  PipelineService pipelines_;  // after what its worker's answers use
  std::thread runner_;
  std::atomic<bool> fail_next_commit_{false};
  std::atomic<bool> fail_next_submit_{false};  // the next commit that submits a node's job
  std::atomic<int> failed_commits_{0};
  std::set<int64_t> dropped_jobs_;  // submitted in a failed turn (loop thread)
};

constexpr char kSweep[] = "name: sweep\ndefaults: {gpus: 0}\nsteps:\n  prepare: {run: 'true'}\n"
                          "  work:\n    needs: [prepare]\n    matrix: {i: [0, 1, 2]}\n    run: 'true'\n";

// The commit of the turn that creates a run fails: the client gets the
// daemon's error, and nothing of the run is left: no row, no node, no job,
// no folder (they are made only once the run is stored). Its id stays
// taken, and the next create works from start to end.
TEST_F(PipelineCommitTest, AFailedCommitOfACreateLeavesNothingAndTheNextCreateWorks) {
  fail_next_commit_ = true;
  EXPECT_EQ(Create(kSweep), std::nullopt);
  EXPECT_EQ(failed_commits_, 1);

  const std::optional<int64_t> next = Create(kSweep);
  ASSERT_EQ(next, 2);
  // The folder worker runs its requests in order: once the second run's
  // folders are made, a request for the first one's would have run too.
  ASSERT_TRUE(TurnUntil([&] { return fs::is_directory(RunDir(2) + "/work/2"); }));
  ASSERT_TRUE(Complete(2)) << RunState(2);
  EXPECT_FALSE(fs::exists(RunDir(1)));
  EXPECT_EQ(OnLoop<Code>([&] { return pipelines_.Show(1, q_.User()).status().code(); }), Code::kNotFound);
  auto stored = OnLoop<bool>([&] {
    auto run = q_.state().store->GetPipelineRun(1);
    auto nodes = q_.state().store->ListPipelineNodes(1);
    return run.ok() && !run->has_value() && nodes.ok() && nodes->empty();
  });
  EXPECT_TRUE(stored);
  // Every job launched is one of the second run's four nodes, once each.
  const std::vector<exec::LaunchSpec> launches = OnLoop<std::vector<exec::LaunchSpec>>(
      [&] { return q_.executor().launches(); });
  auto run = OnLoop<api::PipelineDetail>([&] { return pipelines_.Show(2, q_.User()).value(); });
  ASSERT_EQ(run.nodes.size(), 4u);
  std::set<int64_t> jobs;
  for (const auto& node : run.nodes) jobs.insert(node.job_id);
  ASSERT_EQ(launches.size(), 4u);
  for (const auto& launch : launches) EXPECT_EQ(jobs.erase(launch.job_id), 1u) << launch.job_id;
}

// The commit of the turn that submits a run's first job fails: that job
// never launches, the node is waiting again, and the next turn submits it
// again, durably; each node's job launches once.
TEST_F(PipelineCommitTest, AFailedCommitOfASubmitLaunchesNothingAndTheNodeIsSubmittedAgain) {
  fail_next_submit_ = true;
  ASSERT_EQ(Create(kSweep), 1);
  ASSERT_TRUE(TurnUntil([&] { return failed_commits_ > 0; }));
  const std::set<int64_t> dropped = OnLoop<std::set<int64_t>>([&] { return dropped_jobs_; });
  ASSERT_EQ(dropped.size(), 1u);  // `prepare`'s job
  ASSERT_TRUE(Complete(1)) << RunState(1);
  auto run = OnLoop<api::PipelineDetail>([&] { return pipelines_.Show(1, q_.User()).value(); });
  std::set<int64_t> jobs;
  for (const auto& node : run.nodes) {
    EXPECT_EQ(node.attempts, 1) << node.id;
    jobs.insert(node.job_id);
  }
  const auto launches = OnLoop<std::vector<exec::LaunchSpec>>([&] { return q_.executor().launches(); });
  ASSERT_EQ(launches.size(), 4u);
  for (const auto& launch : launches) {
    EXPECT_EQ(dropped.count(launch.job_id), 0u) << launch.job_id;
    EXPECT_EQ(jobs.erase(launch.job_id), 1u) << launch.job_id;
  }
}

}  // namespace
}  // namespace gpuherd::daemon

int main(int argc, char** argv) {
  // The daemon starts this binary again as its job launcher.
  if (int code = gpuherd::exec::MaybeRunLauncher(argc, argv); code >= 0) return code;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}

namespace gpuherd::daemon {
namespace {

// Without --slurm-shared-dir a daemon has the local backend only: a run that
// asks for Slurm fails its nodes with the reason, and the local one runs.
TEST_F(PipelineServiceTest, ARunOnABackendTheDaemonLacksFailsWithTheFix) {
  StartDaemon();
  int64_t id = Run("name: s\nbackend: slurm\nsteps: {t: {run: 'true', gpus: 0}}\n");
  ASSERT_TRUE(WaitState(id, "failed")) << Show(id).dump(2);
  json run = Show(id);
  EXPECT_EQ(run["backend"], "slurm");
  EXPECT_NE(Node(run, "t")["reason"].get<std::string>().find("--slurm-shared-dir"), std::string::npos)
      << Node(run, "t").dump();
  int64_t local = Run("name: l\nbackend: local\nsteps: {t: {run: 'true', gpus: 0}}\n");
  ASSERT_TRUE(WaitState(local, "completed")) << Show(local).dump(2);
  EXPECT_EQ(Show(local)["backend"], "local");
  EXPECT_TRUE(Node(Show(local), "t")["slurm_job_id"].is_null());
}

}  // namespace
}  // namespace gpuherd::daemon
