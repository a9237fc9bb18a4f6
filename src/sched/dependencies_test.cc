#include "sched/dependencies.h"

#include <map>

#include <gtest/gtest.h>

namespace gpuherd::sched {
namespace {

// Dependencies' states, as the daemon would look them up.
struct States {
  std::map<JobId, JobState> states;
  DependencyStateFn fn() const {
    return [this](JobId id) -> std::optional<JobState> {
      auto it = states.find(id);
      if (it == states.end()) return std::nullopt;
      return it->second;
    };
  }
};

JobSpec After(std::vector<JobId> ok, std::vector<JobId> any = {}, std::vector<JobId> not_ok = {}) {
  JobSpec spec;
  spec.depends_on = std::move(ok);
  spec.after_any = std::move(any);
  spec.after_not_ok = std::move(not_ok);
  return spec;
}

TEST(DependenciesTest, NoDependenciesAreSatisfied) {
  States s;
  auto check = CheckDependencies(JobSpec{}, s.fn());
  ASSERT_TRUE(check);
  EXPECT_EQ(check->deps, Dependencies::kSatisfied);
  EXPECT_FALSE(HasDependencies(JobSpec{}));
}

TEST(DependenciesTest, Rule2aAfterNeedsCompletion) {
  States s{{{1, JobState::kRunning}}};
  EXPECT_EQ(CheckDependencies(After({1}), s.fn())->deps, Dependencies::kWaiting);
  s.states[1] = JobState::kCompleted;
  EXPECT_EQ(CheckDependencies(After({1}), s.fn())->deps, Dependencies::kSatisfied);
  for (JobState bad : {JobState::kFailed, JobState::kCancelled}) {
    s.states[1] = bad;
    auto check = CheckDependencies(After({1}), s.fn());
    EXPECT_EQ(check->deps, Dependencies::kFailed) << JobStateName(bad);
    EXPECT_EQ(check->blocking, 1);
    EXPECT_STREQ(check->kind, "after");
    EXPECT_EQ(DependencyFailureReason(*check),
              std::string("dependency job 1 ") + JobStateName(bad) + "; this job needed it to complete (--after)");
  }
}

TEST(DependenciesTest, Rule2bAfterAnyNeedsOnlyAnEnd) {
  States s{{{1, JobState::kPending}}};
  EXPECT_EQ(CheckDependencies(After({}, {1}), s.fn())->deps, Dependencies::kWaiting);
  for (JobState end : {JobState::kCompleted, JobState::kFailed, JobState::kCancelled}) {
    s.states[1] = end;
    EXPECT_EQ(CheckDependencies(After({}, {1}), s.fn())->deps, Dependencies::kSatisfied) << JobStateName(end);
  }
}

TEST(DependenciesTest, Rule2cAfterNotOkNeedsAFailureOrACancel) {
  States s{{{1, JobState::kStopping}}};
  EXPECT_EQ(CheckDependencies(After({}, {}, {1}), s.fn())->deps, Dependencies::kWaiting);
  s.states[1] = JobState::kFailed;
  EXPECT_EQ(CheckDependencies(After({}, {}, {1}), s.fn())->deps, Dependencies::kSatisfied);
  s.states[1] = JobState::kCancelled;
  EXPECT_EQ(CheckDependencies(After({}, {}, {1}), s.fn())->deps, Dependencies::kSatisfied);
  s.states[1] = JobState::kCompleted;
  auto check = CheckDependencies(After({}, {}, {1}), s.fn());
  EXPECT_EQ(check->deps, Dependencies::kFailed);
  EXPECT_EQ(DependencyFailureReason(*check),
            "dependency job 1 completed; this job needed it to fail or be cancelled (--afternotok)");
}

TEST(DependenciesTest, Rule2dTheFirstWaitingOneIsNamedAndNeverWinsOverWaiting) {
  States s{{{1, JobState::kHeld}, {2, JobState::kRunning}, {3, JobState::kCompleted}}};
  auto waiting = CheckDependencies(After({3, 1}, {2}), s.fn());
  EXPECT_EQ(waiting->deps, Dependencies::kWaiting);
  EXPECT_EQ(waiting->blocking, 1);
  EXPECT_EQ(waiting->blocking_state, JobState::kHeld);
  // Job 3 completed, so an afternotok on it can never be met, whatever 1 and 2 do.
  auto never = CheckDependencies(After({1}, {2}, {3}), s.fn());
  EXPECT_EQ(never->deps, Dependencies::kFailed);
  EXPECT_EQ(never->blocking, 3);
  EXPECT_STREQ(never->kind, "afternotok");
}

TEST(DependenciesTest, AnUnknownStateGivesNoVerdict) {
  States s{{{1, JobState::kCompleted}}};
  EXPECT_FALSE(CheckDependencies(After({1, 9}), s.fn()));
}

}  // namespace
}  // namespace gpuherd::sched
