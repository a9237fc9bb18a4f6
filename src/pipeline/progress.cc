#include "pipeline/progress.h"

#include <fmt/format.h>

namespace gpuherd::pipeline {
namespace {

// For "it needs X, which failed": how a final, not completed node ended.
const char* EndedHow(NodeState state) {
  switch (state) {
    case NodeState::kFailed: return "failed";
    case NodeState::kCancelled: return "was cancelled";
    default: return "was skipped";
  }
}

// Done for the nodes that need it: a point stopped early is a result too.
bool Done(NodeState state) { return state == NodeState::kCompleted || state == NodeState::kStopped; }

}  // namespace

const char* NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kWaiting: return "waiting";
    case NodeState::kActive: return "active";
    case NodeState::kCompleted: return "completed";
    case NodeState::kFailed: return "failed";
    case NodeState::kCancelled: return "cancelled";
    case NodeState::kSkipped: return "skipped";
    case NodeState::kStopped: return "stopped";
  }
  return "unknown";
}

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kSucceeded: return "succeeded";
    case Outcome::kFailed: return "failed";
    case Outcome::kCancelled: return "cancelled";
  }
  return "unknown";
}

const char* NodeActionKindName(NodeAction::Kind kind) {
  switch (kind) {
    case NodeAction::Kind::kSubmit: return "submit";
    case NodeAction::Kind::kRetry: return "retry";
    case NodeAction::Kind::kSkip: return "skip";
    case NodeAction::Kind::kFinish: return "finish";
  }
  return "unknown";
}

bool IsFinal(const PlanNode& node, const NodeStatus& status) {
  switch (status.state) {
    case NodeState::kCompleted:
    case NodeState::kStopped:
    case NodeState::kCancelled:
    case NodeState::kSkipped:
      return true;
    case NodeState::kFailed:
      return status.attempts > node.retries;
    case NodeState::kWaiting:
    case NodeState::kActive:
      return false;
  }
  return false;
}

std::vector<NodeAction> NextActions(const Plan& plan, const std::vector<NodeStatus>& statuses) {
  // A working copy, so that skips decided here cascade to later nodes (the
  // plan is in topological order, so one pass suffices).
  std::vector<NodeStatus> s(plan.nodes.size());
  for (size_t i = 0; i < s.size() && i < statuses.size(); ++i) s[i] = statuses[i];

  std::vector<NodeAction> actions;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const PlanNode& node = plan.nodes[i];
    NodeStatus& status = s[i];
    if (status.state == NodeState::kFailed && !IsFinal(node, status)) {
      actions.push_back({NodeAction::Kind::kRetry, static_cast<int>(i), status.attempts + 1, true,
                         Outcome::kSucceeded,
                         fmt::format("attempt {} failed; retry {} of {}", status.attempts,
                                     status.attempts, node.retries)});
      continue;
    }
    if (status.state != NodeState::kWaiting) continue;
    bool all_completed = true, all_final = true;
    int blocker = -1;  // a need that ended without completing
    for (size_t n : node.need_nodes) {
      const bool final = IsFinal(plan.nodes[n], s[n]);
      all_completed = all_completed && Done(s[n].state);
      all_final = all_final && final;
      if (final && !Done(s[n].state) && blocker < 0) {
        blocker = static_cast<int>(n);
      }
    }
    if (all_completed || (node.always && all_final)) {
      actions.push_back({NodeAction::Kind::kSubmit, static_cast<int>(i), status.attempts + 1,
                         false, Outcome::kSucceeded, ""});
    } else if (blocker >= 0 && !node.always) {
      status.state = NodeState::kSkipped;
      actions.push_back({NodeAction::Kind::kSkip, static_cast<int>(i), 0, false,
                         Outcome::kSucceeded,
                         fmt::format("it needs {}, which {}", plan.nodes[blocker].id,
                                     EndedHow(s[blocker].state))});
    }
  }

  int completed = 0, stopped = 0, failed = 0, cancelled = 0;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    if (!IsFinal(plan.nodes[i], s[i])) return actions;
    completed += s[i].state == NodeState::kCompleted;
    stopped += s[i].state == NodeState::kStopped;
    failed += s[i].state == NodeState::kFailed;
    cancelled += s[i].state == NodeState::kCancelled;
  }
  const int skipped = static_cast<int>(plan.nodes.size()) - completed - stopped - failed - cancelled;
  NodeAction finish;
  finish.kind = NodeAction::Kind::kFinish;
  finish.outcome = failed > 0 ? Outcome::kFailed
                   : cancelled > 0 ? Outcome::kCancelled
                   : skipped > 0   ? Outcome::kFailed
                                   : Outcome::kSucceeded;
  finish.reason = fmt::format("{} completed, {} failed, {} cancelled, {} skipped", completed,
                              failed, cancelled, skipped);
  if (stopped > 0) finish.reason += fmt::format(", {} stopped early", stopped);
  actions.push_back(std::move(finish));
  return actions;
}

sched::JobSpec JobSpecFor(const Plan& plan, const NodeAction& action) {
  sched::JobSpec job = plan.nodes.at(action.node).job;
  // Built as a std::string: assigning the literal trips a false -Wrestrict of g++ 12.
  if (action.resume) job.env.insert_or_assign("GPUHERD_RESUME", std::string(1, '1'));
  return job;
}

}  // namespace gpuherd::pipeline
