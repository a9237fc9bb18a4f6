#include "sched/dependencies.h"

#include <fmt/format.h>

namespace gpuherd::sched {
namespace {

enum class Kind { kAfter, kAfterAny, kAfterNotOk };

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kAfter: return "after";
    case Kind::kAfterAny: return "afterany";
    case Kind::kAfterNotOk: return "afternotok";
  }
  return "";
}

// Whether a dependency in final state `state` lets the job run (rules 2a-2c).
bool Met(Kind kind, JobState state) {
  switch (kind) {
    case Kind::kAfter: return state == JobState::kCompleted;
    case Kind::kAfterAny: return true;
    case Kind::kAfterNotOk: return state == JobState::kFailed || state == JobState::kCancelled;
  }
  return false;
}

}  // namespace

std::optional<DependencyCheck> CheckDependencies(const JobSpec& spec, const DependencyStateFn& state_of) {
  DependencyCheck out;
  const std::pair<Kind, const std::vector<JobId>*> lists[] = {
      {Kind::kAfter, &spec.depends_on}, {Kind::kAfterAny, &spec.after_any}, {Kind::kAfterNotOk, &spec.after_not_ok}};
  for (const auto& [kind, ids] : lists) {
    for (JobId id : *ids) {
      std::optional<JobState> state = state_of(id);
      if (!state) return std::nullopt;
      if (!IsFinal(*state)) {
        if (out.deps == Dependencies::kSatisfied) {  // rule 2d: the first waiting one is named
          out = {Dependencies::kWaiting, id, *state, KindName(kind)};
        }
        continue;
      }
      if (!Met(kind, *state)) return DependencyCheck{Dependencies::kFailed, id, *state, KindName(kind)};
    }
  }
  return out;
}

std::string DependencyFailureReason(const DependencyCheck& check) {
  const std::string kind = check.kind;
  const char* needed = kind == "afternotok" ? "to fail or be cancelled" : "to complete";
  return fmt::format("dependency job {} {}; this job needed it {} (--{})", check.blocking,
                     JobStateName(check.blocking_state), needed, kind);
}

}  // namespace gpuherd::sched
