// The queue's behaviour on a FakeExecutor and a virtual clock (queue_harness.h):
// what it launches and signals, and when, without processes.
#include <signal.h>

#include <gtest/gtest.h>

#include "daemon/attempt_log.h"
#include "daemon/queue/queue_harness.h"
#include "daemon/routes/routes.h"
#include "telemetry/sampler.h"
#include "telemetry/telemetry.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using testing::QueueHarness;
using How = exec::ExitRecord::How;

sched::JobSpec Spec(double gpus = 1, json extra = json::object()) {
  json s = {{"command", {"train"}}, {"gpus", gpus}};
  for (auto& [k, v] : extra.items()) s[k] = v;
  return testing::ParsedSpec(s);
}

TEST(QueueTest, LaunchesOnceCommitted) {
  QueueHarness q(2);
  auto id = q.jobs().Submit(Spec(), q.User());
  ASSERT_TRUE(id.ok());
  q.Settle();
  ASSERT_EQ(q.executor().launches().size(), 1u);
  EXPECT_EQ(q.executor().launches()[0].job_id, *id);
  EXPECT_EQ(q.StateOf(*id), "running");
  ASSERT_TRUE(q.executor().Exit(*id, 1, How::kExited, 0));
  q.Settle();
  EXPECT_EQ(q.StateOf(*id), "completed");
}

// A request answered in the turn in which a job ended (the answer goes out
// after the commit) sees the job: it is out of the queue's memory and its
// final record is not in the store until that commit.
TEST(QueueTest, AJobThatEndedInThisTurnIsListedAndShownBeforeItsCommit) {
  QueueHarness q(2);
  auto id = q.jobs().Submit(Spec(), q.User());
  ASSERT_TRUE(id.ok());
  q.Settle();
  ASSERT_TRUE(q.executor().Exit(*id, 1, How::kExited, 0));
  q.RunQueued();
  auto listing = q.jobs().List(true, "", "");
  ASSERT_EQ(listing.jobs.size(), 1u);
  EXPECT_EQ(listing.jobs[0].view->id, *id);
  EXPECT_EQ(listing.jobs[0].view->state, "completed");
  EXPECT_EQ(q.jobs().List(true, "", "completed").jobs.size(), 1u);
  EXPECT_EQ(q.jobs().List(true, "", "running").jobs.size(), 0u);
  auto shown = q.jobs().Show(*id);
  ASSERT_TRUE(shown.ok()) << shown.status().ToString();
  EXPECT_EQ(shown->state, "completed");
  q.Turn();
  listing = q.jobs().List(true, "", "");
  ASSERT_EQ(listing.jobs.size(), 1u);
  EXPECT_EQ(listing.jobs[0].view->state, "completed");
}

// `show` in the turn in which a job ended (before its commit) gives the end
// of its attempt too, not the stored record of a running one: the job's state
// and its attempts agree.
TEST(QueueTest, AJobShownInTheTurnItEndedHasItsAttemptsEnd) {
  QueueHarness q(2);
  AttemptLog attempts(&q.state());
  q.jobs().SetAttemptLog(&attempts);
  auto id = q.jobs().Submit(Spec(), q.User());
  ASSERT_TRUE(id.ok());
  q.Settle();
  routes::RouteContext ctx;
  ctx.state = &q.state();
  ctx.jobs = &q.jobs();
  ctx.attempts = &attempts;
  json detail;
  ASSERT_TRUE(routes::AddJobDetail(ctx, *id, true, &detail).ok());
  ASSERT_EQ(detail["attempts"].size(), 1u);
  EXPECT_EQ(detail["attempts"][0]["end_cause"], "");
  JobService::CancelRequest cancel;
  cancel.ids = {*id};
  ASSERT_TRUE(q.jobs().CancelMany(cancel, q.User()).ok());
  q.RunQueued();
  ASSERT_TRUE(q.executor().Exit(*id, 1, How::kStopped, 0, SIGTERM));
  q.RunQueued();  // the exit is handled; the turn has not committed yet
  ASSERT_EQ(q.StateOf(*id), "cancelled");
  detail = json::object();
  ASSERT_TRUE(routes::AddJobDetail(ctx, *id, true, &detail).ok());
  ASSERT_EQ(detail["attempts"].size(), 1u);
  EXPECT_EQ(detail["attempts"][0]["end_cause"], "cancelled");
  EXPECT_NE(detail["attempts"][0]["ended"], 0);
  q.Turn();
  detail = json::object();
  ASSERT_TRUE(routes::AddJobDetail(ctx, *id, true, &detail).ok());
  ASSERT_EQ(detail["attempts"].size(), 1u);
  EXPECT_EQ(detail["attempts"][0]["end_cause"], "cancelled");
  q.jobs().SetAttemptLog(nullptr);
}

// A failed commit drops every side effect of its turn: the job submitted and
// started in it never launches, not even after the next good commit.
TEST(QueueTest, FailedCommitLaunchesNothing) {
  QueueHarness q(2);
  auto id = q.jobs().Submit(Spec(), q.User());
  ASSERT_TRUE(id.ok());
  EXPECT_FALSE(q.Turn(/*fail_commit=*/true));
  q.Settle();
  EXPECT_TRUE(q.executor().launches().empty());
  EXPECT_FALSE(q.jobs().Show(*id).ok());  // never acknowledged, never stored
}

// A job that starts in a turn whose commit fails is pending again; it
// launches once, in a later turn whose record of it is durable.
TEST(QueueTest, FailedCommitOfAStartLaunchesLaterOnce) {
  QueueHarness q(1);
  auto first = q.jobs().Submit(Spec(), q.User());
  auto second = q.jobs().Submit(Spec(), q.User());
  q.Settle();
  ASSERT_EQ(q.executor().launches().size(), 1u);
  ASSERT_TRUE(q.executor().Exit(*first, 1, How::kExited, 0));
  EXPECT_FALSE(q.Turn(/*fail_commit=*/true));  // the exit and the start of `second`
  EXPECT_EQ(q.executor().launches().size(), 1u);
  auto stored = q.state().store->GetJob(*second);
  ASSERT_TRUE(stored.ok() && stored->has_value());
  EXPECT_EQ((*stored)->state, "pending");
  q.Settle();  // the exit is replayed, `second` starts again, now durably
  ASSERT_EQ(q.executor().launches().size(), 2u);
  EXPECT_EQ(q.executor().launches()[1].job_id, *second);
  EXPECT_EQ(q.StateOf(*first), "completed");
  stored = q.state().store->GetJob(*second);
  EXPECT_EQ((*stored)->state, "running");
}

TEST(QueueTest, FailedCommitSendsNoSignal) {
  QueueHarness q(1);
  auto id = q.jobs().Submit(Spec(), q.User());
  q.Settle();
  ASSERT_TRUE(q.jobs().Act(*id, "cancel", q.User()).ok());
  EXPECT_FALSE(q.Turn(/*fail_commit=*/true));
  q.Settle();
  EXPECT_TRUE(q.executor().signals().empty());
  EXPECT_EQ(q.StateOf(*id), "running");  // the cancel was refused with the commit
}

TEST(QueueTest, RestartAdoptsRunningAttempts) {
  QueueHarness q(2);
  auto id = q.jobs().Submit(Spec(), q.User());
  q.Settle();
  q.Restart();
  ASSERT_EQ(q.executor().adopted().size(), 1u);
  EXPECT_EQ(q.StateOf(*id), "running");
  EXPECT_EQ(q.executor().launches().size(), 1u);
}

// An operator's drain is an operator's whatever its reason says: a passing
// burn-in does not lift it. A fault's drain it lifts. Origins survive a restart.
TEST(QueueTest, DrainOriginDecidesWhatLiftsIt) {
  QueueHarness q(4);
  ASSERT_TRUE(q.jobs().Drain(3, "fault: fan noisy", q.Admin()).ok());
  q.jobs().MoveJobsOff(2, "fault: GPU 2 XID 79");
  q.Settle();
  q.Restart();
  const auto& gpus = q.state().fleet.gpus;
  ASSERT_TRUE(q.jobs().DrainOf(gpus[3].uuid).has_value());
  EXPECT_EQ(q.jobs().DrainOf(gpus[3].uuid)->origin, queue::DrainOrigin::kOperator);
  EXPECT_EQ(q.jobs().DrainOf(gpus[2].uuid)->origin, queue::DrainOrigin::kFault);
  EXPECT_FALSE(q.jobs().LiftAfterBurnIn(3, "burn-in 7").ok());
  EXPECT_TRUE(q.jobs().LiftAfterBurnIn(2, "burn-in 8").ok());
  q.Settle();
  EXPECT_TRUE(q.jobs().DrainOf(gpus[3].uuid).has_value());
  EXPECT_FALSE(q.jobs().DrainOf(gpus[2].uuid).has_value());
  // Only an operator returns it; then it takes jobs again.
  EXPECT_TRUE(q.jobs().Undrain(3, q.Admin()).ok());
  q.Settle();
  EXPECT_FALSE(q.jobs().DrainOf(gpus[3].uuid).has_value());
}

// A fault's drain taken over by an operator's is the operator's.
TEST(QueueTest, OperatorDrainTakesOverAFaultDrain) {
  QueueHarness q(2);
  q.jobs().MoveJobsOff(1, "fault: GPU 1 lost");
  ASSERT_TRUE(q.jobs().Drain(1, "replace the fan", q.Admin()).ok());
  q.Settle();
  EXPECT_EQ(q.jobs().DrainOf(q.state().fleet.gpus[1].uuid)->origin, queue::DrainOrigin::kOperator);
  EXPECT_FALSE(q.jobs().LiftAfterBurnIn(1, "burn-in").ok());
}

// One restart counter: `show`, the JSON and GPUHERD_RESTART_COUNT agree after
// a requeue and after a fault; only faults count against --max-restarts; a
// new attempt shows no exit code of the last one.
TEST(QueueTest, OneRestartCounter) {
  QueueHarness q(2);
  auto id = q.jobs().Submit(Spec(1, {{"max_restarts", 1}}), q.User());
  q.Settle();
  ASSERT_TRUE(q.jobs().Act(*id, "requeue", q.User()).ok());
  q.Settle();
  ASSERT_TRUE(q.executor().Exit(*id, 1, How::kStopped, 143));
  q.Settle();
  ASSERT_EQ(q.executor().launches().size(), 2u);
  json j = q.Show(*id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["restarts"], 1);
  EXPECT_EQ(j["fault_restarts"], 0);
  EXPECT_FALSE(j.contains("exit_code")) << j.dump();
  EXPECT_EQ(q.executor().launches()[1].env.at("GPUHERD_RESTART_COUNT"), "1");

  const int gpu = j["assigned_gpus"][0];
  q.jobs().MoveJobsOff(gpu, "fault: XID 79");
  q.Settle();
  ASSERT_TRUE(q.executor().Exit(*id, 2, How::kStopped, 143));
  q.Settle();
  ASSERT_EQ(q.executor().launches().size(), 3u);
  j = q.Show(*id);
  EXPECT_EQ(j["restarts"], 2);
  EXPECT_EQ(j["fault_restarts"], 1);
  EXPECT_EQ(q.executor().launches()[2].env.at("GPUHERD_RESTART_COUNT"), "2");

  // A second fault: no restarts after faults left.
  q.jobs().MoveJobsOff(j["assigned_gpus"][0].get<int>(), "fault: XID 79");
  q.Settle();
  ASSERT_TRUE(q.executor().Exit(*id, 3, How::kStopped, 143));
  q.Settle();
  EXPECT_EQ(q.StateOf(*id), "failed");
  EXPECT_EQ(q.executor().launches().size(), 3u);
}

// Preemption: 8 preemptible jobs fill 8 GPUs; an urgent 2-GPU job arrives.
// Its victims are marked, stopped once, its GPUs claimed; no victim comes back
// onto them; it starts as soon as they are free; every victim starts at most
// twice however many passes run meanwhile.
TEST(QueueTest, PreemptionStopsEachVictimOnceAndKeepsTheClaim) {
  QueueHarness q(8);
  auto low = q.jobs().SubmitArray(Spec(1, {{"priority", -10}, {"preemptible", true}}), 8, q.User("bob", 1001));
  ASSERT_TRUE(low.ok());
  q.Settle();
  ASSERT_EQ(q.executor().launches().size(), 8u);
  q.clock().Advance(60 * kSecondMs);
  auto high = q.jobs().Submit(Spec(2, {{"priority", 50}}), q.User());
  ASSERT_TRUE(high.ok());
  for (int i = 0; i < 5; ++i) {  // passes while the victims take their time
    q.Settle();
    q.jobs().OnRound();
    q.clock().Advance(kSecondMs);
  }
  auto signals = q.executor().signals();
  ASSERT_EQ(signals.size(), 2u);
  ASSERT_TRUE(q.jobs().claims().count(*high));
  std::vector<int> claim = q.jobs().claims().at(*high);
  EXPECT_EQ(claim.size(), 2u);
  for (const auto& sig : signals) {
    EXPECT_EQ(sig.signal, SIGTERM);
    json v = q.Show(sig.job_id);
    EXPECT_EQ(v["state"], "stopping");
    EXPECT_EQ(v["reason"], "preempted for job " + std::to_string(*high));
  }
  // The first victim ends: its GPU stays claimed, nobody starts on it.
  ASSERT_TRUE(q.executor().Exit(signals[0].job_id, 1, How::kStopped, 0));
  for (int i = 0; i < 3; ++i) {
    q.Settle();
    q.jobs().OnRound();
  }
  EXPECT_EQ(q.executor().launches().size(), 8u);
  EXPECT_EQ(q.StateOf(*high), "pending");
  // The second ends: the preemptor starts at once, on the claimed GPUs.
  ASSERT_TRUE(q.executor().Exit(signals[1].job_id, 1, How::kStopped, 0));
  q.Settle();
  EXPECT_EQ(q.StateOf(*high), "running");
  std::vector<int> got = q.Show(*high)["assigned_gpus"];
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, claim);
  EXPECT_FALSE(q.jobs().claims().count(*high));
  for (int i = 0; i < 10; ++i) {
    q.Settle();
    q.jobs().OnRound();
    q.clock().Advance(10 * kSecondMs);
  }
  EXPECT_EQ(q.executor().signals().size(), 2u);
  std::map<int64_t, int> starts;
  for (const auto& l : q.executor().launches()) ++starts[l.job_id];
  for (auto [id, n] : starts) EXPECT_LE(n, 2) << "job " << id;
}

// The memory watchdog counts a fractional job's processes by its control
// group where it has one: a process that left the job's session (setsid) and
// holds GPU memory over the job's share still gets the job stopped.
void SampleGpu0(QueueHarness& q, int pid, uint64_t bytes) {
  telemetry::SampleRound round;
  round.time = q.clock().Now();
  for (int i = 0; i < static_cast<int>(q.state().fleet.gpus.size()); ++i) {
    gpu::GpuSample s;
    s.time = round.time;
    if (i == 0) s.processes.push_back({pid, bytes, "escaped"});
    round.readings.push_back({i, s});
  }
  q.state().telemetry->Ingest(round);
}

void WatchdogSetUp(QueueHarness& q) {
  q.state().host = host::NewHost();
  q.state().telemetry = std::make_unique<telemetry::Telemetry>(telemetry::TelemetryOptions{});
  q.state().telemetry->SetFleet(q.state().fleet);
}

bool Terminated(QueueHarness& q, sched::JobId id) {
  for (const auto& s : q.executor().signals()) {
    if (s.job_id == id && s.signal == SIGTERM) return true;
  }
  return false;
}

TEST(QueueTest, MemoryWatchdogFindsAnEscapedProcessInTheJobsGroup) {
  QueueConfig config;
  config.memory_watchdog_grace = 5 * kSecondMs;
  for (bool in_group : {true, false}) {
    QueueHarness q(1, config, in_group ? "wd_group" : "wd_nogroup");
    WatchdogSetUp(q);
    auto id = q.jobs().Submit(Spec(0.5, {{"gpu_mem", "1GiB"}}), q.User());
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    q.Settle();
    ASSERT_EQ(q.StateOf(*id), "running");
    // A pid in no session of the job: pid 1 (init) is never the job's.
    if (in_group) q.executor().SetGroupProcesses(*id, 1, {1});
    SampleGpu0(q, 1, uint64_t{3} << 30);
    q.jobs().OnRound();
    q.Settle();
    q.clock().Advance(6 * kSecondMs);
    SampleGpu0(q, 1, uint64_t{3} << 30);
    q.jobs().OnRound();
    q.Settle();
    EXPECT_EQ(Terminated(q, *id), in_group) << (in_group ? "with" : "without") << " a control group";
  }
}

// A position that names no GPU is an answer (404), never an exception out of
// the queue; gpuherd's own drains and moves of such a GPU do nothing.
TEST(QueueTest, DrainsOfAGpuThatIsNotThereAreRefusedNotThrown) {
  QueueHarness q(2);
  for (int pos : {-1, 2, 99}) {
    Status drained = q.jobs().Drain(pos, "fan noisy", q.Admin());
    EXPECT_EQ(drained.code(), Code::kNotFound) << pos << ": " << drained.ToString();
    EXPECT_EQ(q.jobs().Undrain(pos, q.Admin()).code(), Code::kNotFound) << pos;
    EXPECT_EQ(q.jobs().LiftAfterBurnIn(pos, "burn-in").code(), Code::kNotFound) << pos;
    q.jobs().DrainFor(pos, queue::DrainOrigin::kFault, "XID 79");
    EXPECT_EQ(q.jobs().MoveJobsOff(pos, "fault: XID 79"), 0);
  }
  EXPECT_TRUE(q.Turn());
  auto drains = q.state().store->ListDrains();
  ASSERT_TRUE(drains.ok());
  EXPECT_TRUE(drains->empty());
}

}  // namespace
}  // namespace gpuherd::daemon
