#include "sched/job.h"

namespace gpuherd::sched {

namespace {
constexpr JobState kAllStates[] = {JobState::kPending, JobState::kHeld,      JobState::kRunning,
                                   JobState::kStopping, JobState::kCompleted, JobState::kFailed,
                                   JobState::kCancelled};
}  // namespace

const char* JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending: return "pending";
    case JobState::kHeld: return "held";
    case JobState::kRunning: return "running";
    case JobState::kStopping: return "stopping";
    case JobState::kCompleted: return "completed";
    case JobState::kFailed: return "failed";
    case JobState::kCancelled: return "cancelled";
  }
  return "unknown";
}

std::optional<JobState> ParseJobState(const std::string& name) {
  for (JobState s : kAllStates) {
    if (name == JobStateName(s)) return s;
  }
  return std::nullopt;
}

}  // namespace gpuherd::sched
