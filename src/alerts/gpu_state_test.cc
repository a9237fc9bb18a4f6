#include "alerts/gpu_state.h"

#include <gtest/gtest.h>

namespace gpuherd::alerts {
namespace {

constexpr TimeMs kT0 = 1'700'000'000'000;
constexpr DurationMs kMin = 60'000;

HealthInput In(HealthInputKind k, TimeMs t, std::string reason = "") {
  HealthInput in;
  in.kind = k;
  in.time = t;
  in.reason = std::move(reason);
  if (k == HealthInputKind::kQuarantine || k == HealthInputKind::kSuspect) {
    in.evidence.push_back({t, "xid", 48, "17", "XID 48"});
  }
  return in;
}

bool Has(const HealthDecision& d, HealthActionKind k) {
  for (const auto& a : d.actions) {
    if (a.kind == k) return true;
  }
  return false;
}

// The whole loop: fault, drain, idle, burn-in, back to service.
TEST(GpuStateMachineTest, QuarantineRequalifyReturnToService) {
  GpuStateMachine m;
  auto d = m.Apply(In(HealthInputKind::kQuarantine, kT0, "XID 48"));
  ASSERT_EQ(d.transitions.size(), 1u);
  EXPECT_EQ(d.transitions[0].from, GpuHealth::kInService);
  EXPECT_EQ(d.transitions[0].to, GpuHealth::kQuarantined);
  EXPECT_EQ(d.transitions[0].reason, "XID 48");
  ASSERT_EQ(d.transitions[0].evidence.size(), 1u);
  EXPECT_EQ(d.transitions[0].evidence[0].xid, 48);
  EXPECT_TRUE(Has(d, HealthActionKind::kDrainForFault));
  EXPECT_FALSE(d.shadow);

  // Idle, but not long enough yet.
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kGpuIdle, kT0 + kMin)).empty());
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 10 * kMin)).empty());
  d = m.Apply(In(HealthInputKind::kTick, kT0 + 11 * kMin));
  EXPECT_TRUE(Has(d, HealthActionKind::kQueueRequalification));
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
  // Asked for once, not on every tick.
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 12 * kMin)).empty());

  d = m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + 13 * kMin));
  EXPECT_EQ(m.state(), GpuHealth::kRequalifying);
  d = m.Apply(In(HealthInputKind::kRequalifyPassed, kT0 + 20 * kMin, "burn-in 4 passed"));
  EXPECT_EQ(m.state(), GpuHealth::kInService);
  EXPECT_TRUE(Has(d, HealthActionKind::kLiftFaultDrain));
  EXPECT_EQ(m.record().requalifications, 1);
  EXPECT_FALSE(m.record().fault_drained);
  ASSERT_EQ(m.record().history.size(), 3u);
  EXPECT_EQ(m.record().history[2].reason, "burn-in 4 passed");
}

TEST(GpuStateMachineTest, IdleClockStartsAtQuarantineNotBefore) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kGpuIdle, kT0));  // idle long before the fault
  m.Apply(In(HealthInputKind::kQuarantine, kT0 + 60 * kMin));
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 65 * kMin)).empty());
  EXPECT_TRUE(Has(m.Apply(In(HealthInputKind::kTick, kT0 + 70 * kMin)),
                  HealthActionKind::kQueueRequalification));
}

TEST(GpuStateMachineTest, BusyGpuIsNotRequalified) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kQuarantine, kT0));
  m.Apply(In(HealthInputKind::kGpuIdle, kT0));
  m.Apply(In(HealthInputKind::kGpuBusy, kT0 + 5 * kMin));  // a job still checkpointing
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 30 * kMin)).empty());
  m.Apply(In(HealthInputKind::kGpuIdle, kT0 + 30 * kMin));
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 39 * kMin)).empty());
  EXPECT_TRUE(Has(m.Apply(In(HealthInputKind::kTick, kT0 + 40 * kMin)),
                  HealthActionKind::kQueueRequalification));
}

TEST(GpuStateMachineTest, RequalifyAfterZeroTurnsItOff) {
  GpuStatePolicy p;
  p.requalify_after = 0;
  GpuStateMachine m(p);
  m.Apply(In(HealthInputKind::kQuarantine, kT0));
  m.Apply(In(HealthInputKind::kGpuIdle, kT0));
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 1000 * kMin)).empty());
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
}

TEST(GpuStateMachineTest, FailedRequalificationRetires) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kQuarantine, kT0));
  m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + kMin));
  auto d = m.Apply(In(HealthInputKind::kRequalifyFailed, kT0 + 2 * kMin, "memory test failed"));
  EXPECT_EQ(m.state(), GpuHealth::kRetired);
  EXPECT_TRUE(Has(d, HealthActionKind::kRetire));
  EXPECT_FALSE(Has(d, HealthActionKind::kLiftFaultDrain));
  EXPECT_TRUE(m.record().fault_drained);
  // Nothing but an operator brings it back.
  for (auto k : {HealthInputKind::kRequalifyPassed, HealthInputKind::kRequalifyStarted,
                 HealthInputKind::kSuspect, HealthInputKind::kQuarantine, HealthInputKind::kRetire,
                 HealthInputKind::kGpuIdle, HealthInputKind::kTick}) {
    EXPECT_TRUE(m.Apply(In(k, kT0 + 1000 * kMin)).empty()) << HealthInputKindName(k);
    EXPECT_EQ(m.state(), GpuHealth::kRetired);
  }
  d = m.Apply(In(HealthInputKind::kOperatorReturn, kT0 + 2000 * kMin, "new card fitted"));
  EXPECT_EQ(m.state(), GpuHealth::kInService);
  EXPECT_TRUE(Has(d, HealthActionKind::kLiftFaultDrain));
}

TEST(GpuStateMachineTest, FaultDuringRequalificationRetires) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kQuarantine, kT0));
  m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + kMin));
  auto d = m.Apply(In(HealthInputKind::kQuarantine, kT0 + 2 * kMin, "XID 79"));
  EXPECT_EQ(m.state(), GpuHealth::kRetired);
  EXPECT_TRUE(Has(d, HealthActionKind::kCancelRequalification));
  EXPECT_TRUE(Has(d, HealthActionKind::kRetire));
}

TEST(GpuStateMachineTest, HungRequalificationTimesOut) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kQuarantine, kT0));
  m.Apply(In(HealthInputKind::kRequalifyStarted, kT0));
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 119 * kMin)).empty());
  auto d = m.Apply(In(HealthInputKind::kTick, kT0 + 120 * kMin));
  EXPECT_EQ(m.state(), GpuHealth::kRetired);
  EXPECT_TRUE(Has(d, HealthActionKind::kCancelRequalification));
}

TEST(GpuStateMachineTest, SuspectIsWatchedThenClearsOrEscalates) {
  GpuStateMachine m;
  auto d = m.Apply(In(HealthInputKind::kSuspect, kT0, "XID 31 from 3 jobs"));
  EXPECT_EQ(m.state(), GpuHealth::kSuspect);
  EXPECT_TRUE(Has(d, HealthActionKind::kAvoidForLongJobs));
  EXPECT_FALSE(Has(d, HealthActionKind::kDrainForFault));
  // A second suspicion renews the watch instead of moving.
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kSuspect, kT0 + 60 * kMin)).transitions.empty());
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 72 * 60 * kMin)).empty());
  d = m.Apply(In(HealthInputKind::kTick, kT0 + 73 * 60 * kMin));
  ASSERT_EQ(d.transitions.size(), 1u);
  EXPECT_EQ(d.transitions[0].to, GpuHealth::kInService);
  EXPECT_EQ(d.transitions[0].evidence.back().kind, "timer");

  GpuStateMachine n;
  n.Apply(In(HealthInputKind::kSuspect, kT0));
  d = n.Apply(In(HealthInputKind::kQuarantine, kT0 + kMin));
  EXPECT_EQ(n.state(), GpuHealth::kQuarantined);
  EXPECT_EQ(d.transitions[0].from, GpuHealth::kSuspect);
  EXPECT_TRUE(Has(d, HealthActionKind::kDrainForFault));
}

TEST(GpuStateMachineTest, OperatorDrainIsNeverLifted) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kOperatorDrain, kT0, "fault: fan noisy"));
  m.Apply(In(HealthInputKind::kQuarantine, kT0 + kMin));
  m.Apply(In(HealthInputKind::kGpuIdle, kT0 + kMin));
  m.Apply(In(HealthInputKind::kTick, kT0 + 20 * kMin));
  m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + 21 * kMin));
  auto d = m.Apply(In(HealthInputKind::kRequalifyPassed, kT0 + 30 * kMin));
  EXPECT_EQ(m.state(), GpuHealth::kInService);
  // Only the fault drain is lifted; the operator's stands, whatever its reason text.
  ASSERT_EQ(d.actions.size(), 1u);
  EXPECT_EQ(d.actions[0].kind, HealthActionKind::kLiftFaultDrain);
  EXPECT_TRUE(m.record().operator_drained);
  m.Apply(In(HealthInputKind::kOperatorUndrain, kT0 + 40 * kMin));
  EXPECT_FALSE(m.record().operator_drained);
}

TEST(GpuStateMachineTest, OperatorDrainAloneChangesNoState) {
  GpuStateMachine m;
  auto d = m.Apply(In(HealthInputKind::kOperatorDrain, kT0));
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(m.state(), GpuHealth::kInService);
  // Time passing on an operator-drained healthy card does nothing either.
  m.Apply(In(HealthInputKind::kGpuIdle, kT0));
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 1000 * kMin)).empty());
}

TEST(GpuStateMachineTest, ThirdQuarantineInAWeekRetires) {
  GpuStateMachine m;
  TimeMs t = kT0;
  for (int round = 0; round < 2; ++round) {
    m.Apply(In(HealthInputKind::kQuarantine, t));
    m.Apply(In(HealthInputKind::kRequalifyStarted, t + kMin));
    m.Apply(In(HealthInputKind::kRequalifyPassed, t + 2 * kMin));
    ASSERT_EQ(m.state(), GpuHealth::kInService);
    t += 24 * 60 * kMin;
  }
  auto d = m.Apply(In(HealthInputKind::kQuarantine, t, "XID 48"));
  EXPECT_EQ(m.state(), GpuHealth::kRetired);
  EXPECT_TRUE(Has(d, HealthActionKind::kRetire));
  EXPECT_NE(d.transitions[0].reason.find("3 times"), std::string::npos);

  // Spread over more than a week, the same three are separate incidents.
  GpuStateMachine slow;
  t = kT0;
  for (int round = 0; round < 3; ++round) {
    slow.Apply(In(HealthInputKind::kQuarantine, t));
    EXPECT_EQ(slow.state(), GpuHealth::kQuarantined);
    slow.Apply(In(HealthInputKind::kRequalifyStarted, t + kMin));
    slow.Apply(In(HealthInputKind::kRequalifyPassed, t + 2 * kMin));
    t += 4 * 24 * 60 * kMin;
  }
}

TEST(GpuStateMachineTest, ShadowModeMarksEveryDecision) {
  GpuStatePolicy p;
  p.shadow = true;
  GpuStateMachine m(p);
  auto d = m.Apply(In(HealthInputKind::kQuarantine, kT0));
  EXPECT_TRUE(d.shadow);
  EXPECT_TRUE(Has(d, HealthActionKind::kDrainForFault));
  // The would-be state is kept, so the record shows what would have happened.
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
}

TEST(GpuStateMachineTest, RequalificationInputsOutOfOrderAreIgnored) {
  GpuStateMachine m;
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kRequalifyPassed, kT0)).empty());
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kRequalifyFailed, kT0)).empty());
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kRequalifyStarted, kT0)).empty());
  EXPECT_EQ(m.state(), GpuHealth::kInService);
  m.Apply(In(HealthInputKind::kQuarantine, kT0));
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kRequalifyPassed, kT0)).empty());
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
}

// A burn-in that ended without a result says nothing about the card: it is
// quarantined again, waits a full idle period, and this is no new quarantine.
TEST(GpuStateMachineTest, AbortedRequalificationIsQueuedAgainAndCountsNoQuarantine) {
  GpuStateMachine m;
  m.Apply(In(HealthInputKind::kQuarantine, kT0, "XID 48"));
  m.Apply(In(HealthInputKind::kGpuIdle, kT0));
  EXPECT_TRUE(Has(m.Apply(In(HealthInputKind::kTick, kT0 + 11 * kMin)), HealthActionKind::kQueueRequalification));
  m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + 11 * kMin));
  auto d = m.Apply(In(HealthInputKind::kRequalifyAborted, kT0 + 12 * kMin, "cancelled"));
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
  EXPECT_TRUE(d.actions.empty());
  EXPECT_TRUE(m.Apply(In(HealthInputKind::kTick, kT0 + 20 * kMin)).empty());
  EXPECT_TRUE(Has(m.Apply(In(HealthInputKind::kTick, kT0 + 23 * kMin)), HealthActionKind::kQueueRequalification));
  // Two more aborted rounds and then a real fault: still only the second quarantine.
  for (int i = 0; i < 2; ++i) {
    m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + (30 + i * 20) * kMin));
    m.Apply(In(HealthInputKind::kRequalifyAborted, kT0 + (31 + i * 20) * kMin));
    m.Apply(In(HealthInputKind::kTick, kT0 + (45 + i * 20) * kMin));
  }
  m.Apply(In(HealthInputKind::kRequalifyStarted, kT0 + 90 * kMin));
  m.Apply(In(HealthInputKind::kRequalifyPassed, kT0 + 91 * kMin));
  ASSERT_EQ(m.state(), GpuHealth::kInService);
  m.Apply(In(HealthInputKind::kQuarantine, kT0 + 100 * kMin, "XID 48 again"));
  EXPECT_EQ(m.state(), GpuHealth::kQuarantined);
}

// Every input in every state: the machine stays within its five states, each
// transition is recorded, retired leaves only through an operator, and no
// action ever speaks of the operator's drain.
TEST(GpuStateMachineTest, ExhaustiveInputsFromEveryState) {
  const HealthInputKind kinds[] = {
      HealthInputKind::kSuspect,         HealthInputKind::kQuarantine,
      HealthInputKind::kRetire,          HealthInputKind::kRequalifyStarted,
      HealthInputKind::kRequalifyPassed, HealthInputKind::kRequalifyFailed,
      HealthInputKind::kRequalifyAborted,
      HealthInputKind::kGpuIdle,         HealthInputKind::kGpuBusy,
      HealthInputKind::kOperatorDrain,   HealthInputKind::kOperatorUndrain,
      HealthInputKind::kOperatorReturn,  HealthInputKind::kTick};
  const GpuHealth states[] = {GpuHealth::kInService, GpuHealth::kSuspect, GpuHealth::kQuarantined,
                              GpuHealth::kRequalifying, GpuHealth::kRetired};
  for (GpuHealth s : states) {
    for (HealthInputKind k : kinds) {
      for (bool op : {false, true}) {
        GpuHealthRecord r;
        r.state = s;
        r.since = kT0;
        r.operator_drained = op;
        r.fault_drained = s == GpuHealth::kQuarantined || s == GpuHealth::kRequalifying ||
                          s == GpuHealth::kRetired;
        GpuStateMachine m({}, r);
        auto d = m.Apply(In(k, kT0 + kMin));
        SCOPED_TRACE(std::string(GpuHealthName(s)) + " + " + std::string(HealthInputKindName(k)));
        EXPECT_EQ(m.record().operator_drained,
                  k == HealthInputKind::kOperatorDrain ? true
                  : k == HealthInputKind::kOperatorUndrain ? false
                                                           : op);
        for (const auto& t : d.transitions) {
          EXPECT_EQ(t.from, s);
          EXPECT_NE(t.from, t.to);
          EXPECT_FALSE(t.reason.empty());
        }
        EXPECT_EQ(m.record().history.size(), d.transitions.size());
        if (s == GpuHealth::kRetired && k != HealthInputKind::kOperatorReturn) {
          EXPECT_EQ(m.state(), GpuHealth::kRetired);
        }
        if (m.state() == GpuHealth::kInService && s != GpuHealth::kInService &&
            s != GpuHealth::kSuspect) {
          EXPECT_TRUE(k == HealthInputKind::kRequalifyPassed ||
                      k == HealthInputKind::kOperatorReturn);
        }
        if (Has(d, HealthActionKind::kDrainForFault)) {
          EXPECT_TRUE(m.state() == GpuHealth::kQuarantined || m.state() == GpuHealth::kRetired);
        }
        if (Has(d, HealthActionKind::kLiftFaultDrain)) {
          EXPECT_EQ(m.state(), GpuHealth::kInService);
        }
      }
    }
  }
}

TEST(GpuStateMachineTest, NamesRoundTrip) {
  for (GpuHealth s : {GpuHealth::kInService, GpuHealth::kSuspect, GpuHealth::kQuarantined,
                      GpuHealth::kRequalifying, GpuHealth::kRetired}) {
    EXPECT_EQ(GpuHealthFromName(GpuHealthName(s)), s);
  }
  EXPECT_FALSE(GpuHealthFromName("healthy").has_value());
}

}  // namespace
}  // namespace gpuherd::alerts
