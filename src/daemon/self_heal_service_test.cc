// The self-heal service against a fake queue and a real store: faults in,
// drains, requalifications and events out, and what a restart keeps.
#include "daemon/self_heal_service.h"

#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "api/events.h"
#include "host/clock.h"
#include "telemetry/records_convert.h"
#include "telemetry/telemetry.h"

namespace gpuherd::daemon {
namespace {

using alerts::GpuHealth;
using nlohmann::json;

constexpr TimeMs kT0 = 1767225600000;

// What the queue was asked, and what it answers.
class FakeQueue : public SelfHealQueue {
 public:
  explicit FakeQueue(size_t gpus) : jobs_on(gpus), drain(gpus) {}

  void DrainForFault(int pos, const std::string& reason) override {
    drains_for_fault.push_back({pos, reason});
    if (drain[pos].empty()) drain[pos] = "fault";
    moved += static_cast<int>(jobs_on[pos].size());
    jobs_on[pos].clear();
  }
  Status LiftFaultDrain(int pos, const std::string& by) override {
    if (drain[pos] == "operator") return FailedPrecondition("GPU drained by an operator");
    drain[pos].clear();
    lifted.push_back({pos, by});
    return Status::Ok();
  }
  bool OperatorDrained(int pos) const override { return drain[pos] == "operator"; }
  bool Drained(int pos) const override { return !drain[pos].empty(); }
  Result<sched::JobId> QueueRequalification(int pos, int level, bool reset_first) override {
    requalifications.push_back({pos, level, reset_first});
    return next_job++;
  }
  void CancelRequalification(sched::JobId job, const std::string&) override { cancelled.push_back(job); }
  std::vector<int> JobsPerGpu() const override {
    std::vector<int> n;
    for (const auto& j : jobs_on) n.push_back(static_cast<int>(j.size()));
    return n;
  }
  std::vector<JobOnGpu> JobsOn(int pos) const override { return jobs_on[pos]; }
  void SetSuspect(int pos, bool mark) override {
    if (mark) {
      suspect.insert(pos);
    } else {
      suspect.erase(pos);
    }
  }
  std::set<int> suspect;

  struct Requalification {
    int pos, level;
    bool reset;
  };
  std::vector<std::vector<JobOnGpu>> jobs_on;
  std::vector<std::string> drain;  // "", "fault", "operator"
  std::vector<std::pair<int, std::string>> drains_for_fault, lifted;
  std::vector<Requalification> requalifications;
  std::vector<sched::JobId> cancelled;
  sched::JobId next_job = 100;
  int moved = 0;
};

class SelfHealServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuherd-selfheal-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    OpenState();
    for (int i = 0; i < 3; ++i) {
      gpu::GpuInfo g;
      g.index = i;
      g.uuid = "GPU-" + std::to_string(i);
      g.name = "NVIDIA H100";
      state_.fleet.gpus.push_back(g);
      state_.batch.gpus.push_back(telemetry::ToGpuRecord(g, kT0));
    }
    Commit();
    options_.states.requalify_after = 10 * kMinuteMs;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void OpenState() {
    auto store = store::Store::Open((dir_ / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    state_.store = std::move(store).value();
    state_.clock = &clock_;
  }
  // Job `id` as the queue tells the service of its change to `state`.
  static sched::Job JobIn(int64_t id, sched::JobState state) {
    sched::Job job;
    job.id = id;
    job.state = state;
    return job;
  }
  // Alice's job `id` in `state`, as the queue stores it, for the next Commit.
  void AddJob(int64_t id, const std::string& state) {
    store::JobRecord job;
    job.id = id;
    job.user = "alice";
    job.state = state;
    job.spec_json = "{}";
    state_.batch.jobs.push_back(job);
  }
  void Commit() {
    Status s = state_.store->Commit(&state_.batch);
    ASSERT_TRUE(s.ok()) << s.ToString();
    for (auto& e : state_.batch.events) events_.push_back(e);
    state_.batch = store::WriteBatch();
  }
  std::unique_ptr<SelfHealService> Start() {
    auto s = std::make_unique<SelfHealService>(&state_, &queue_, options_);
    Status loaded = s->Load();
    EXPECT_TRUE(loaded.ok()) << loaded.ToString();
    s->SetAlertSink([this](const alerts::AlertTransition& t) { alerts_.push_back(t); });
    return s;
  }
  store::EventRecord Xid(int gpu, int xid) {
    return api::NewEvent(clock_.Now(), telemetry::kEventGpuXid, store::Severity::kWarning,
                         "XID " + std::to_string(xid), "GPU-" + std::to_string(gpu), {{"xid", xid}});
  }
  // Rounds every minute for `minutes`, committing each turn.
  void Rounds(SelfHealService& s, int minutes) {
    for (int i = 0; i < minutes; ++i) {
      clock_.Advance(kMinuteMs);
      s.OnRound(clock_.Now());
      Commit();
    }
  }
  std::vector<store::EventRecord> EventsOf(const std::string& kind) const {
    std::vector<store::EventRecord> out;
    for (const auto& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  burnin::BurnInRun Run(int gpu, sched::JobId job, bool pass) {
    burnin::BurnInRun r;
    r.gpu_uuid = "GPU-" + std::to_string(gpu);
    r.level = 2;
    r.job_id = job;
    r.outcome = pass ? burnin::RunOutcome::kPassed : burnin::RunOutcome::kFaultsFound;
    r.health.verdict = pass ? burnin::Verdict::kHealthy : burnin::Verdict::kUnhealthy;
    r.health.score = pass ? 97 : 20;
    return r;
  }

  std::filesystem::path dir_;
  host::FakeClock clock_{kT0};
  DaemonState state_;
  FakeQueue queue_{3};
  SelfHealOptions options_;
  std::vector<store::EventRecord> events_;
  std::vector<alerts::AlertTransition> alerts_;
};

TEST_F(SelfHealServiceTest, FatalXidQuarantinesRequalifiesAndReturnsTheGpu) {
  auto s = Start();
  queue_.jobs_on[0] = {{7, "alice"}};
  s->OnGpuEvents({Xid(0, 48)});
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kQuarantined);
  ASSERT_EQ(queue_.drains_for_fault.size(), 1u);
  EXPECT_EQ(queue_.drains_for_fault[0].first, 0);
  EXPECT_EQ(queue_.moved, 1);
  auto health = EventsOf("gpu.health");
  ASSERT_EQ(health.size(), 1u);
  json data = json::parse(health[0].data_json);
  EXPECT_EQ(data["to"], "quarantined");
  EXPECT_EQ(data["rule"], "fatal_fault");
  EXPECT_EQ(data["evidence"][0]["xid"], 48);
  EXPECT_EQ(data["evidence"][0]["job_id"], "7");
  EXPECT_EQ(health[0].severity, store::Severity::kCritical);

  // Idle for less than --requalify-after: nothing; then the burn-in.
  Rounds(*s, 9);
  EXPECT_TRUE(queue_.requalifications.empty());
  Rounds(*s, 2);
  ASSERT_EQ(queue_.requalifications.size(), 1u);
  EXPECT_EQ(queue_.requalifications[0].level, 2);
  EXPECT_FALSE(queue_.requalifications[0].reset);
  EXPECT_EQ(s->StateOf(0), GpuHealth::kRequalifying);
  EXPECT_EQ(s->HealthState(0).requalify_job, 100);

  // A plain burn-in's run on the card: the service keeps the decision.
  EXPECT_EQ(s->OnBurnInRuns({Run(0, 55, true)}), std::set<int>{0});
  EXPECT_EQ(s->StateOf(0), GpuHealth::kRequalifying);
  EXPECT_EQ(s->OnBurnInRuns({Run(0, 100, true)}), std::set<int>{0});
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kInService);
  ASSERT_EQ(queue_.lifted.size(), 1u);
  EXPECT_FALSE(queue_.Drained(0));
  auto transitions = state_.store->ListHealthTransitions("GPU-0");
  ASSERT_TRUE(transitions.ok());
  std::vector<std::string> path;
  for (const auto& t : *transitions) path.push_back(t.to_state);
  EXPECT_EQ(path, (std::vector<std::string>{"quarantined", "requalifying", "in_service"}));
  EXPECT_EQ(s->HealthState(0).requalifications, 1);
}

TEST_F(SelfHealServiceTest, FailedRequalificationRetiresAndTellsTheOperator) {
  auto s = Start();
  s->OnGpuEvents({Xid(1, 79)});
  Rounds(*s, 11);
  ASSERT_EQ(s->StateOf(1), GpuHealth::kRequalifying);
  s->OnBurnInRuns({Run(1, 100, false)});
  Commit();
  EXPECT_EQ(s->StateOf(1), GpuHealth::kRetired);
  EXPECT_TRUE(queue_.Drained(1));
  ASSERT_FALSE(alerts_.empty());
  EXPECT_EQ(alerts_.back().alert.rule, "gpu_retired");
  EXPECT_EQ(alerts_.back().alert.severity, store::Severity::kCritical);
  // Retired stays retired: no new requalification however long it idles.
  Rounds(*s, 30);
  EXPECT_EQ(queue_.requalifications.size(), 1u);
  // An operator returns it by lifting the drain.
  queue_.drain[1].clear();
  Rounds(*s, 1);
  EXPECT_EQ(s->StateOf(1), GpuHealth::kInService);
}

TEST_F(SelfHealServiceTest, TheThirdQuarantineWithinAWeekRetires) {
  auto s = Start();
  for (int round = 0; round < 3; ++round) {
    s->OnGpuEvents({Xid(0, 48)});
    Commit();
    if (round == 2) break;
    Rounds(*s, 11);
    s->OnBurnInRuns({Run(0, queue_.next_job - 1, true)});
    Commit();
    ASSERT_EQ(s->StateOf(0), GpuHealth::kInService) << round;
  }
  EXPECT_EQ(s->StateOf(0), GpuHealth::kRetired);
  EXPECT_EQ(queue_.requalifications.size(), 2u);
}

TEST_F(SelfHealServiceTest, ApplicationXidsAcrossJobsTellTheOwnersAndDrainNothing) {
  auto s = Start();
  queue_.jobs_on[0] = {{1, "alice"}};
  queue_.jobs_on[1] = {{2, "bob"}};
  s->OnGpuEvents({Xid(0, 31), Xid(1, 31)});
  Commit();
  EXPECT_TRUE(queue_.drains_for_fault.empty());
  EXPECT_EQ(s->StateOf(0), GpuHealth::kInService);
  EXPECT_EQ(s->StateOf(1), GpuHealth::kInService);
  auto told = EventsOf("job.xid");
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(json::parse(told[0].data_json)["owner"], "alice");
  EXPECT_EQ(json::parse(told[1].data_json)["owner"], "bob");
  ASSERT_EQ(alerts_.size(), 2u);
  EXPECT_EQ(alerts_[0].alert.subject, "job 1 xid 31");
  // The job's end resolves its alert.
  s->OnJobChanged(JobIn(1, sched::JobState::kFailed));
  ASSERT_EQ(alerts_.size(), 3u);
  EXPECT_EQ(alerts_[2].to, alerts::AlertState::kResolved);
}

// What a restarted daemon's alert service hands back (AlertService::TakeAdopted).
std::vector<alerts::Alert> Firing(const std::vector<alerts::AlertTransition>& transitions) {
  std::map<std::pair<std::string, std::string>, alerts::Alert> firing;
  for (const auto& t : transitions) {
    if (t.to == alerts::AlertState::kFiring) firing[{t.alert.rule, t.alert.subject}] = t.alert;
    if (t.to == alerts::AlertState::kResolved) firing.erase({t.alert.rule, t.alert.subject});
  }
  std::vector<alerts::Alert> out;
  for (const auto& [key, a] : firing) out.push_back(a);
  return out;
}

TEST_F(SelfHealServiceTest, ApplicationXidAlertsOutliveARestartUntilTheirJobEndsOrTheirWindowPasses) {
  for (int id : {1, 2, 3}) AddJob(id, "running");
  Commit();
  {
    auto s = Start();
    for (int gpu : {0, 1, 2}) {
      queue_.jobs_on[gpu] = {{gpu + 1, "alice"}};
      s->OnGpuEvents({Xid(gpu, 31)});
    }
    Commit();
    ASSERT_EQ(Firing(alerts_).size(), 3u);
  }
  // Job 2 ended while no daemon ran; jobs 1 and 3 still run.
  AddJob(2, "completed");
  Commit();
  std::vector<alerts::Alert> left = Firing(alerts_);
  alerts_.clear();
  auto s = Start();
  s->AdoptAlerts(left);
  ASSERT_EQ(alerts_.size(), 1u);
  EXPECT_EQ(alerts_[0].alert.subject, "job 2 xid 31");
  EXPECT_EQ(alerts_[0].to, alerts::AlertState::kResolved);
  // Job 1 ends: its alert resolves.
  s->OnJobChanged(JobIn(1, sched::JobState::kCompleted));
  ASSERT_EQ(alerts_.size(), 2u);
  EXPECT_EQ(alerts_[1].alert.subject, "job 1 xid 31");
  EXPECT_EQ(alerts_[1].to, alerts::AlertState::kResolved);
  // Job 3 runs on; a window after the XID its alert resolves anyway.
  Rounds(*s, 1);
  EXPECT_EQ(alerts_.size(), 2u);
  clock_.Advance(options_.rules.window);
  Rounds(*s, 1);
  ASSERT_EQ(alerts_.size(), 3u);
  EXPECT_EQ(alerts_[2].alert.subject, "job 3 xid 31");
  EXPECT_EQ(alerts_[2].to, alerts::AlertState::kResolved);
  EXPECT_TRUE(Firing(alerts_).empty());
}

TEST_F(SelfHealServiceTest, TwoXidsOnOneJobAreTwoAlertsAndEachResolvesAlone) {
  auto s = Start();
  queue_.jobs_on[0] = {{1, "alice"}};
  s->OnGpuEvents({Xid(0, 31)});
  Commit();
  Rounds(*s, 60);
  s->OnGpuEvents({Xid(0, 13)});
  Commit();
  std::vector<alerts::Alert> firing = Firing(alerts_);
  ASSERT_EQ(firing.size(), 2u);
  EXPECT_EQ(firing[0].subject, "job 1 xid 13");
  EXPECT_EQ(firing[1].subject, "job 1 xid 31");
  // XID 31's window ends an hour before XID 13's: only its alert resolves.
  clock_.Advance(options_.rules.window - 61 * kMinuteMs);
  Rounds(*s, 1);
  firing = Firing(alerts_);
  ASSERT_EQ(firing.size(), 1u);
  EXPECT_EQ(firing[0].subject, "job 1 xid 13");
  EXPECT_EQ(firing[0].value, 13);
  // The job's end resolves the other.
  s->OnJobChanged(JobIn(1, sched::JobState::kCompleted));
  EXPECT_TRUE(Firing(alerts_).empty());
  // Each alert fired once and resolved once.
  ASSERT_EQ(alerts_.size(), 4u);
  EXPECT_EQ(alerts_[2].alert.subject, "job 1 xid 31");
  EXPECT_EQ(alerts_[3].alert.subject, "job 1 xid 13");
  EXPECT_EQ(alerts_[3].to, alerts::AlertState::kResolved);
}

TEST_F(SelfHealServiceTest, AnAlertAPreviousVersionStoredOnJobNStillResolvesAtItsJobsEnd) {
  AddJob(4, "running");
  Commit();
  alerts::Alert old;
  old.rule = "application_xid";
  old.subject = "job 4";
  old.gpu_index = 0;
  old.state = alerts::AlertState::kFiring;
  old.pending_since = old.fired_at = clock_.Now();
  auto s = Start();
  s->AdoptAlerts({old});
  EXPECT_TRUE(alerts_.empty());
  s->OnJobChanged(JobIn(4, sched::JobState::kFailed));
  ASSERT_EQ(alerts_.size(), 1u);
  EXPECT_EQ(alerts_[0].alert.subject, "job 4");
  EXPECT_EQ(alerts_[0].to, alerts::AlertState::kResolved);
}

TEST_F(SelfHealServiceTest, ARetiredGpusAlertFiresAcrossARestartAndResolvesWhenAnOperatorReturnsIt) {
  options_.rules.retire_fatal = 1;
  std::vector<alerts::Alert> left;
  {
    auto s = Start();
    s->OnGpuEvents({Xid(1, 79)});
    Commit();
    ASSERT_EQ(s->StateOf(1), GpuHealth::kRetired);
    left = Firing(alerts_);
    ASSERT_EQ(left.size(), 1u);
    EXPECT_EQ(left[0].rule, "gpu_retired");
  }
  alerts_.clear();
  auto s = Start();
  s->AdoptAlerts(left);
  EXPECT_TRUE(alerts_.empty()) << "resolved while the GPU is still retired";
  queue_.drain[1].clear();  // the operator's undrain
  Rounds(*s, 1);
  EXPECT_EQ(s->StateOf(1), GpuHealth::kInService);
  ASSERT_EQ(alerts_.size(), 1u);
  EXPECT_EQ(alerts_[0].alert.rule, "gpu_retired");
  EXPECT_EQ(alerts_[0].to, alerts::AlertState::kResolved);
  // An alert for a GPU that is no longer retired resolves at adoption.
  alerts_.clear();
  auto again = Start();
  again->AdoptAlerts(left);
  ASSERT_EQ(alerts_.size(), 1u);
  EXPECT_EQ(alerts_[0].to, alerts::AlertState::kResolved);
}

TEST_F(SelfHealServiceTest, TheSameXidFromThreeJobsOnOneGpuMakesItSuspectThenFourQuarantine) {
  auto s = Start();
  for (int job = 1; job <= 4; ++job) {
    queue_.jobs_on[2] = {{job, "carol"}};
    s->OnGpuEvents({Xid(2, 31)});
    Commit();
    clock_.Advance(kHourMs);
    if (job == 2) {
      EXPECT_EQ(s->StateOf(2), GpuHealth::kInService);
    }
    if (job == 3) {
      EXPECT_EQ(s->StateOf(2), GpuHealth::kSuspect);
      // The scheduler is told (rule 12: last for long jobs).
      EXPECT_EQ(queue_.suspect, std::set<int>{2});
    }
  }
  EXPECT_EQ(s->StateOf(2), GpuHealth::kQuarantined);
  ASSERT_EQ(queue_.drains_for_fault.size(), 1u);
  EXPECT_TRUE(queue_.suspect.empty());
}

TEST_F(SelfHealServiceTest, DoubleBitEccQuarantines) {
  auto s = Start();
  s->OnGpuEvents({api::NewEvent(kT0, telemetry::kEventGpuEcc, store::Severity::kCritical,
                                "1 new uncorrectable (double-bit) ECC error(s)", "GPU-1", {{"type", "dbe"}})});
  EXPECT_EQ(s->StateOf(1), GpuHealth::kQuarantined);
  // A correctable error is no fault.
  EXPECT_FALSE(SelfHealService::Judges(api::NewEvent(kT0, telemetry::kEventGpuEcc, store::Severity::kWarning,
                                                     "sbe", "GPU-2", {{"type", "sbe"}})));
}

TEST_F(SelfHealServiceTest, AFatalXidAndTheLossItCausesCountOnce) {
  options_.rules.retire_fatal = 2;
  auto s = Start();
  s->OnGpuEvents({Xid(0, 79)});
  clock_.Advance(5 * kSecondMs);
  s->OnGpuEvents({api::NewEvent(clock_.Now(), telemetry::kEventGpuLost, store::Severity::kCritical, "lost", "GPU-0")});
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kQuarantined);
  // A loss on its own, later, is a second incident.
  clock_.Advance(10 * kMinuteMs);
  s->OnGpuEvents({api::NewEvent(clock_.Now(), telemetry::kEventGpuLost, store::Severity::kCritical, "lost", "GPU-0")});
  EXPECT_EQ(s->StateOf(0), GpuHealth::kRetired);
}

TEST_F(SelfHealServiceTest, AnOperatorsDrainSurvivesRequalification) {
  auto s = Start();
  queue_.drain[0] = "operator";  // "fault: looks like a fault" in its reason changes nothing
  Rounds(*s, 1);
  s->OnGpuEvents({Xid(0, 48)});
  Rounds(*s, 11);
  ASSERT_EQ(s->StateOf(0), GpuHealth::kRequalifying);
  s->OnBurnInRuns({Run(0, 100, true)});
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kInService);
  EXPECT_EQ(queue_.drain[0], "operator");
  EXPECT_TRUE(queue_.lifted.empty());
  auto kept = EventsOf("gpu.requalify");
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(json::parse(kept.back().data_json).value("drain_kept", false));
}

TEST_F(SelfHealServiceTest, ShadowRuleRecordsAndDoesNothingButTheOldDrain) {
  ASSERT_TRUE(SetSelfHealShadow(&options_, "same_xid_several_jobs,fatal_fault").ok());
  auto s = Start();
  s->OnGpuEvents({Xid(0, 48)});
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kInService);
  auto health = EventsOf("gpu.health");
  ASSERT_EQ(health.size(), 1u);
  EXPECT_TRUE(json::parse(health[0].data_json)["shadow"].get<bool>());
  EXPECT_NE(health[0].message.find("shadow"), std::string::npos);
  // Without self-healing's decision the fault drains as before, for good.
  EXPECT_EQ(queue_.drains_for_fault.size(), 1u);
  Rounds(*s, 20);
  EXPECT_TRUE(queue_.requalifications.empty());
  auto stored = state_.store->ListHealthTransitions("GPU-0");
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_TRUE((*stored)[0].shadow);
  EXPECT_FALSE(SetSelfHealShadow(&options_, "no_such_rule").ok());
}

TEST_F(SelfHealServiceTest, ARestartMidRequalificationCarriesOn) {
  {
    auto s = Start();
    s->OnGpuEvents({Xid(0, 48)});
    Rounds(*s, 11);
    ASSERT_EQ(s->StateOf(0), GpuHealth::kRequalifying);
  }
  // The daemon is gone; the job's record says it still runs.
  auto s = Start();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kRequalifying);
  EXPECT_EQ(s->HealthState(0).requalify_job, 100);
  Rounds(*s, 5);
  EXPECT_EQ(queue_.requalifications.size(), 1u) << "queued a second burn-in";
  s->OnBurnInRuns({Run(0, 100, true)});
  EXPECT_EQ(s->StateOf(0), GpuHealth::kInService);
}

TEST_F(SelfHealServiceTest, TheRulesRememberTheWindowAcrossARestart) {
  {
    auto s = Start();
    for (int job = 1; job <= 2; ++job) {
      queue_.jobs_on[1] = {{job, "dave"}};
      s->OnGpuEvents({Xid(1, 13)});
      Commit();
    }
  }
  auto s = Start();
  queue_.jobs_on[1] = {{3, "dave"}};
  s->OnGpuEvents({Xid(1, 13)});
  Commit();
  EXPECT_EQ(s->StateOf(1), GpuHealth::kSuspect);
  // A restart marks it for the scheduler again.
  queue_.suspect.clear();
  s = Start();
  EXPECT_EQ(queue_.suspect, std::set<int>{1});
}

TEST_F(SelfHealServiceTest, ARequalificationThatEndsWithoutAResultIsTriedAgain) {
  auto s = Start();
  s->OnGpuEvents({Xid(0, 48)});
  Rounds(*s, 11);
  ASSERT_EQ(queue_.requalifications.size(), 1u);
  s->OnJobChanged(JobIn(100, sched::JobState::kCancelled));
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kQuarantined);
  Rounds(*s, 11);
  EXPECT_EQ(queue_.requalifications.size(), 2u);
  EXPECT_EQ(s->StateOf(0), GpuHealth::kRequalifying);
}

TEST_F(SelfHealServiceTest, RequalifyAfterZeroTurnsRequalificationOff) {
  options_.states.requalify_after = 0;
  auto s = Start();
  s->OnGpuEvents({Xid(0, 48)});
  Rounds(*s, 60);
  EXPECT_TRUE(queue_.requalifications.empty());
  EXPECT_EQ(s->StateOf(0), GpuHealth::kQuarantined);
}

TEST_F(SelfHealServiceTest, AFailedCommitLeavesNoTrace) {
  auto s = Start();
  s->OnGpuEvents({Xid(0, 48)});
  ASSERT_EQ(s->StateOf(0), GpuHealth::kQuarantined);
  // The turn's batch is lost; the queue has put its drains back as stored.
  state_.batch = store::WriteBatch();
  queue_.drain[0].clear();
  s->AfterCommit(false);
  EXPECT_EQ(s->StateOf(0), GpuHealth::kInService);
  // The fault is seen again and decided again.
  s->OnGpuEvents({Xid(0, 48)});
  Commit();
  EXPECT_EQ(s->StateOf(0), GpuHealth::kQuarantined);
  EXPECT_EQ(state_.store->ListHealthTransitions("GPU-0")->size(), 1u);
}

TEST(SelfHealOptionsTest, ThresholdsAreChecked) {
  SelfHealOptions o;
  EXPECT_TRUE(SetSelfHealThreshold(&o, "window=12h").ok());
  EXPECT_EQ(o.rules.window, 12 * kHourMs);
  EXPECT_TRUE(SetSelfHealThreshold(&o, "retire_quarantines=2").ok());
  EXPECT_EQ(o.states.quarantines_for_retire, 2);
  EXPECT_EQ(o.short_job_max, kHourMs);
  EXPECT_TRUE(SetSelfHealThreshold(&o, "short_job_max=30m").ok());
  EXPECT_EQ(o.short_job_max, 30 * kMinuteMs);
  EXPECT_FALSE(SetSelfHealThreshold(&o, "window=0s").ok());
  EXPECT_FALSE(SetSelfHealThreshold(&o, "suspect_jobs=-1").ok());
  EXPECT_FALSE(SetSelfHealThreshold(&o, "suspect_jobs=3x").ok());
  Status bad = SetSelfHealThreshold(&o, "nope=1");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("retire_fatal"), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::daemon
