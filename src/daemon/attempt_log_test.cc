// Per-attempt records through a real daemon on a simulated fleet (its jobs
// are real processes): why each attempt ended, what it used of its GPUs,
// `show`'s spec and attempts and /v1/acct.
#include "daemon/attempt_log.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/service_test_fixture.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using How = exec::ExitRecord::How;

exec::ExitRecord Exit(How how, int code = 0, int signal = 0, bool oom = false) {
  exec::ExitRecord r;
  r.how = how;
  r.code = code;
  r.signal = signal;
  r.out_of_memory = oom;
  return r;
}

TEST(AttemptEndCauseTest, TheQueuesStopFirstThenHowTheProcessEnded) {
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kExited, 0)), "completed");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kExited, 3)), "failed");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kSignaled, 0, 9)), "failed");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kTimeLimit, 143, 15)), "time_limit");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kLaunchFailed)), "launch_failed");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kShimLost)), "supervisor_lost");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kNone, "", Exit(How::kSignaled, 0, 9, true)), "out_of_memory");
  // A stop the queue asked for names the cause, however the process took it.
  EXPECT_EQ(AttemptEndCause(AttemptStop::kCancel, "cancelled by ada", Exit(How::kStopped, 143)), "cancelled");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kRequeue, "preempted for job 9", Exit(How::kStopped)), "preempted");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kRequeue, "requeued by ada", Exit(How::kExited, 0)), "requeued");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kFault, "GPU 1 fault", Exit(How::kStopped)), "gpu_fault");
  EXPECT_EQ(AttemptEndCause(AttemptStop::kMemory, "over its share", Exit(How::kStopped)), "gpu_memory");
}

class AttemptLogTest : public DaemonServiceTest {
 protected:
  void TearDown() override {
    CancelUnfinished();
    DaemonServiceTest::TearDown();
  }
  void StartDaemon() { DaemonServiceTest::StartDaemon(Options(2)); }
};

TEST_F(AttemptLogTest, ACompletedJobsAttemptHasItsUseAndShowHasTheWholeSpec) {
  StartDaemon();
  // The simulated GPU shows the memory the job reports in GPUHERD_SIM_GPU_MEM_FILE.
  int64_t id = Submit({{"command", {"sh", "-c", "echo 3000 > \"$GPUHERD_SIM_GPU_MEM_FILE\"; sleep 1.5"}},
                       {"gpus", 1},
                       {"cwd", "/tmp"},
                       {"env", {{"SEED", "7"}}},
                       {"labels", {{"team", "vision"}}},
                       {"cpus", 1},
                       {"time_limit", "1h"},
                       {"max_restarts", 2},
                       {"name", "measured"}});
  ASSERT_GT(id, 0);
  json running;
  ASSERT_TRUE(WaitFor([&] {
    running = Job(id);
    return running["state"] == "running" && running["attempts"].size() == 1 &&
           running["attempts"][0]["util_samples"].get<int>() > 0;
  }));
  // The running attempt as measured so far, before any record was rewritten.
  EXPECT_EQ(running["attempts"][0]["ended"], 0);
  EXPECT_EQ(running["attempts"][0]["end_cause"], "");

  json job;
  ASSERT_TRUE(WaitFor([&] { return (job = Job(id))["state"] == "completed"; }));
  const json& spec = job["spec"];
  EXPECT_EQ(spec["command"], json({"sh", "-c", "echo 3000 > \"$GPUHERD_SIM_GPU_MEM_FILE\"; sleep 1.5"}));
  EXPECT_EQ(spec["cwd"], "/tmp");
  EXPECT_EQ(spec["env"]["SEED"], "7");
  EXPECT_EQ(spec["labels"]["team"], "vision");
  EXPECT_EQ(spec["cpus"], 1);
  EXPECT_EQ(spec["time_limit_ms"], 3600000);
  EXPECT_EQ(spec["max_restarts"], 2);
  EXPECT_EQ(spec["gpu_twentieths"], 20);
  ASSERT_EQ(job["attempts"].size(), 1u);
  const json& a = job["attempts"][0];
  EXPECT_EQ(a["attempt"], 1);
  EXPECT_EQ(a["end_cause"], "completed");
  EXPECT_EQ(a["exit_code"], 0);
  EXPECT_EQ(a["gpu_uuids"], job["gpu_uuids"]);
  EXPECT_EQ(a["gpus"].size(), 1u);
  EXPECT_GE(a["ended"].get<int64_t>() - a["started"].get<int64_t>(), 1500);
  EXPECT_GT(a["util_samples"].get<int>(), 3);
  EXPECT_GT(a["gpu_util_mean"].get<double>(), 0);
  EXPECT_EQ(a["peak_gpu_mem_bytes"].get<uint64_t>(), uint64_t{3000} << 20);

  json acct = Get("/v1/acct");
  ASSERT_EQ(acct["jobs"].size(), 1u);
  const json& row = acct["jobs"][0];
  EXPECT_EQ(row["id"], id);
  EXPECT_EQ(row["attempts"], 1);
  EXPECT_NEAR(row["gpu_hours"].get<double>(),
              (a["ended"].get<int64_t>() - a["started"].get<int64_t>()) / 3.6e6, 1e-9);
  EXPECT_EQ(row["peak_gpu_mem_bytes"], a["peak_gpu_mem_bytes"]);
  EXPECT_TRUE(row["efficiency"].is_number());
  EXPECT_EQ(acct["users"].size(), 1u);
  EXPECT_EQ(Get("/v1/acct?user=nobody-else")["jobs"].size(), 0u);
  EXPECT_EQ(Call("GET", "/v1/acct?since=soon").status, 400);
  EXPECT_EQ(Call("POST", "/v1/acct").status, 405);
}

TEST_F(AttemptLogTest, EveryAttemptSaysWhyItEndedAcrossARestart) {
  StartDaemon();
  int64_t failed = Submit({{"command", {"sh", "-c", "exit 3"}}, {"gpus", 0}});
  int64_t id = Submit({{"command", {"sleep", "60"}}, {"gpus", 1}, {"checkpoint", {{"grace", "1s"}}}});
  ASSERT_TRUE(WaitFor([&] { return Job(id)["state"] == "running" && Job(failed)["state"] == "failed"; }));
  json f = Job(failed)["attempts"];
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["end_cause"], "failed");
  EXPECT_EQ(f[0]["exit_code"], 3);

  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(id) + "/requeue").status, 200);
  ASSERT_TRUE(WaitFor([&] { return Job(id)["attempts"].size() == 2 && Job(id)["state"] == "running"; }));
  json first = Job(id)["attempts"][0];
  EXPECT_EQ(first["end_cause"], "requeued");
  EXPECT_NE(first["ended"], 0);

  // The running attempt's record survives the daemon; the job runs on under its
  // shim. (A job is "running" from the turn that starts it; its shim exists once
  // the launch, off the loop, is done: a launch the daemon stopped before is
  // run again as a new attempt, which is not what this test is about.)
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(home_ / "run" / "jobs" / std::to_string(id) / "2" / "shim"); }));
  StopDaemon();
  StartDaemon();
  json after = Job(id);
  ASSERT_EQ(after["attempts"].size(), 2u);
  EXPECT_EQ(after["attempts"][1]["end_cause"], "");
  ASSERT_EQ(Call("POST", "/v1/jobs/" + std::to_string(id) + "/cancel").status, 200);
  json done;
  ASSERT_TRUE(WaitFor([&] { return (done = Job(id))["state"] == "cancelled"; }));
  ASSERT_EQ(done["attempts"].size(), 2u);
  EXPECT_EQ(done["attempts"][1]["end_cause"], "cancelled");
  EXPECT_EQ(done["attempts"][0]["end_cause"], "requeued");

  json acct = Get("/v1/acct");
  ASSERT_EQ(acct["jobs"].size(), 2u);
  EXPECT_EQ(acct["jobs"][1]["attempts"], 2);
  EXPECT_EQ(acct["jobs"][0]["gpu_hours"], 0.0);  // no GPU: no GPU time
}

}  // namespace
}  // namespace gpuherd::daemon
