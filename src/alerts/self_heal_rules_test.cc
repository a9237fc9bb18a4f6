#include "alerts/self_heal_rules.h"

#include <gtest/gtest.h>

namespace gpuherd::alerts {
namespace {

constexpr TimeMs kT0 = 1'700'000'000'000;

XidObservation Xid(TimeMs t, std::string gpu, int xid, std::string job, std::string owner = "ana") {
  return {t, std::move(gpu), xid, std::move(job), std::move(owner)};
}

TEST(SelfHealRulesTest, ApplicationXidOnOneJobsGpusTellsTheOwnerOnce) {
  SelfHealPolicy p;
  SelfHealState st;
  for (const char* gpu : {"GPU-a", "GPU-b", "GPU-c", "GPU-d"}) {
    RuleOutcome o = EvaluateXid(p, st, Xid(kT0, gpu, 13, "7"));
    EXPECT_EQ(o.rule, "application_xid");
    EXPECT_EQ(o.verdict, gpu::XidVerdict::kApplication);
    EXPECT_FALSE(o.input.has_value()) << "no GPU is drained or suspected";
    if (std::string(gpu) == "GPU-a") {
      ASSERT_EQ(o.notices.size(), 1u);
      EXPECT_EQ(o.notices[0].owner, "ana");
      EXPECT_EQ(o.notices[0].job_id, "7");
      EXPECT_NE(o.notices[0].message.find("not drained"), std::string::npos);
    } else {
      EXPECT_TRUE(o.notices.empty());
    }
  }
}

TEST(SelfHealRulesTest, ApplicationXidAcrossJobsOnDifferentGpusIsTheApplications) {
  SelfHealPolicy p;
  SelfHealState st;
  RuleOutcome a = EvaluateXid(p, st, Xid(kT0, "GPU-a", 31, "1", "ana"));
  RuleOutcome b = EvaluateXid(p, st, Xid(kT0 + 1000, "GPU-b", 31, "2", "bo"));
  RuleOutcome c = EvaluateXid(p, st, Xid(kT0 + 2000, "GPU-c", 31, "3", "cy"));
  for (const RuleOutcome* o : {&a, &b, &c}) {
    EXPECT_FALSE(o->input.has_value());
    ASSERT_EQ(o->notices.size(), 1u);
  }
  EXPECT_EQ(b.notices[0].owner, "bo");
}

TEST(SelfHealRulesTest, SameXidSameGpuThreeJobsIsSuspectThenQuarantined) {
  SelfHealPolicy p;
  SelfHealState st;
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0, "GPU-a", 31, "1")).input);
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0 + 3600'000, "GPU-a", 31, "1")).input);  // same job
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0 + 2 * 3600'000, "GPU-a", 31, "2")).input);
  RuleOutcome third = EvaluateXid(p, st, Xid(kT0 + 3 * 3600'000, "GPU-a", 31, "3"));
  EXPECT_EQ(third.rule, "same_xid_several_jobs");
  ASSERT_TRUE(third.input.has_value());
  EXPECT_EQ(third.input->kind, HealthInputKind::kSuspect);
  EXPECT_EQ(third.input->evidence.size(), 3u);
  EXPECT_NE(third.input->reason.find("3 different jobs"), std::string::npos);
  EXPECT_EQ(third.notices.size(), 1u);  // the owner still hears of it
  RuleOutcome fourth = EvaluateXid(p, st, Xid(kT0 + 4 * 3600'000, "GPU-a", 31, "4"));
  ASSERT_TRUE(fourth.input.has_value());
  EXPECT_EQ(fourth.input->kind, HealthInputKind::kQuarantine);

  // Fed to the card's state machine: suspect, then quarantined and drained.
  GpuStateMachine m;
  m.Apply(*third.input);
  EXPECT_EQ(m.state(), GpuHealth::kSuspect);
  auto d = m.Apply(*fourth.input);
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
  EXPECT_EQ(d.actions[0].kind, HealthActionKind::kDrainForFault);
}

TEST(SelfHealRulesTest, RepeatsOutsideTheWindowDoNotAddUp) {
  SelfHealPolicy p;
  SelfHealState st;
  const DurationMs day = 24 * kHourMs;
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0, "GPU-a", 13, "1")).input);
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0 + day / 2, "GPU-a", 13, "2")).input);
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0 + day + 1000, "GPU-a", 13, "3")).input);
  // Different XIDs from three jobs are three different application bugs.
  EXPECT_FALSE(EvaluateXid(p, st, Xid(kT0 + day + 2000, "GPU-a", 43, "4")).input);
}

TEST(SelfHealRulesTest, ThresholdsAreConfigurable) {
  SelfHealPolicy p;
  p.suspect_jobs = 2;
  SelfHealState st;
  EvaluateXid(p, st, Xid(kT0, "GPU-a", 13, "1"));
  auto o = EvaluateXid(p, st, Xid(kT0 + 1, "GPU-a", 13, "2"));
  ASSERT_TRUE(o.input);
  EXPECT_EQ(o.input->kind, HealthInputKind::kSuspect);
}

TEST(SelfHealRulesTest, FatalXidQuarantinesAndFiveInADayRetire) {
  SelfHealPolicy p;
  SelfHealState st;
  for (int i = 0; i < 4; ++i) {
    auto o = EvaluateXid(p, st, Xid(kT0 + i * kHourMs, "GPU-a", 48, std::to_string(i)));
    EXPECT_EQ(o.rule, "fatal_fault");
    ASSERT_TRUE(o.input);
    EXPECT_EQ(o.input->kind, HealthInputKind::kQuarantine);
    EXPECT_TRUE(o.notices.empty());
  }
  auto fifth = EvaluateXid(p, st, Xid(kT0 + 5 * kHourMs, "GPU-a", 79, "9"));
  EXPECT_EQ(fifth.rule, "fatal_faults_repeated");
  ASSERT_TRUE(fifth.input);
  EXPECT_EQ(fifth.input->kind, HealthInputKind::kRetire);
  EXPECT_EQ(fifth.input->evidence.size(), 5u);
  // Other GPUs are untouched by this one's history.
  auto other = EvaluateXid(p, st, Xid(kT0 + 5 * kHourMs, "GPU-b", 48, "9"));
  EXPECT_EQ(other.input->kind, HealthInputKind::kQuarantine);
}

TEST(SelfHealRulesTest, HardwareFaultsCountWithFatalXids) {
  SelfHealPolicy p;
  p.retire_fatal = 2;
  SelfHealState st;
  auto a = EvaluateHardwareFault(p, st, "GPU-a", kT0, "ecc_dbe", "3", "1 double-bit error");
  ASSERT_TRUE(a.input);
  EXPECT_EQ(a.input->kind, HealthInputKind::kQuarantine);
  EXPECT_EQ(a.input->reason, "ecc_dbe: 1 double-bit error");
  auto b = EvaluateXid(p, st, Xid(kT0 + 1, "GPU-a", 79, ""));
  EXPECT_EQ(b.input->kind, HealthInputKind::kRetire);
}

TEST(SelfHealRulesTest, UnknownXidIsSuspectNeverIgnored) {
  SelfHealPolicy p;
  SelfHealState st;
  auto o = EvaluateXid(p, st, Xid(kT0, "GPU-a", 4242, "1"));
  EXPECT_EQ(o.rule, "unknown_xid");
  ASSERT_TRUE(o.input);
  EXPECT_EQ(o.input->kind, HealthInputKind::kSuspect);
  EXPECT_NE(o.input->reason.find("not in NVIDIA's catalogue"), std::string::npos);
  auto unused = EvaluateXid(p, st, Xid(kT0, "GPU-b", 2, "1"));
  EXPECT_EQ(unused.rule, "unknown_xid");
  ASSERT_TRUE(unused.input);
}

TEST(SelfHealRulesTest, InformationalXidOnlyRecorded) {
  SelfHealPolicy p;
  SelfHealState st;
  auto o = EvaluateXid(p, st, Xid(kT0, "GPU-a", 63, "1"));
  EXPECT_EQ(o.verdict, gpu::XidVerdict::kInformational);
  EXPECT_FALSE(o.input);
  EXPECT_TRUE(o.notices.empty());
  EXPECT_EQ(st.by_gpu["GPU-a"].size(), 1u);
}

TEST(SelfHealRulesTest, ApplicationXidWithNoJobMakesTheCardSuspect) {
  SelfHealPolicy p;
  SelfHealState st;
  auto o = EvaluateXid(p, st, Xid(kT0, "GPU-a", 13, ""));
  EXPECT_EQ(o.rule, "application_xid_without_job");
  ASSERT_TRUE(o.input);
  EXPECT_EQ(o.input->kind, HealthInputKind::kSuspect);
}

TEST(SelfHealRulesTest, ShadowModeMarksOutcomes) {
  SelfHealPolicy p;
  p.shadow = true;
  SelfHealState st;
  EXPECT_TRUE(EvaluateXid(p, st, Xid(kT0, "GPU-a", 48, "1")).shadow);
  EXPECT_TRUE(EvaluateXid(p, st, Xid(kT0, "GPU-a", 13, "1")).shadow);
}

}  // namespace
}  // namespace gpuherd::alerts
