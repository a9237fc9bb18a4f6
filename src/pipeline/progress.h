// How a pipeline run moves on: given the plan and where each node stands,
// what to do next. Pure: the daemon's driver keeps the statuses (durably),
// submits the jobs and feeds the outcomes back.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/plan.h"

namespace gpuherd::pipeline {

enum class NodeState {
  kWaiting,    // not submitted yet
  kActive,     // its job is queued or running
  kCompleted,  // its job exited 0
  kFailed,     // its last attempt failed; it may still be retried
  kCancelled,  // its job was cancelled by a person: final, never retried
  kSkipped,    // will never run: a node it needs failed
  kStopped,    // stopped early by its step's early_stop policy: final, and
               // done for the nodes that need it, as completed is
};
const char* NodeStateName(NodeState state);  // "waiting", "active", ...

struct NodeStatus {
  NodeState state = NodeState::kWaiting;
  int attempts = 0;  // jobs submitted for this node so far
};

enum class Outcome { kSucceeded, kFailed, kCancelled };
const char* OutcomeName(Outcome outcome);  // "succeeded", "failed", "cancelled"

struct NodeAction {
  enum class Kind {
    kSubmit,  // submit the node's first job
    kRetry,   // submit a new job for a failed node, resuming from its checkpoint
    kSkip,    // mark the node skipped
    kFinish,  // every node is final: the run is over with `outcome`
  };
  Kind kind = Kind::kSubmit;
  int node = -1;         // index into Plan::nodes; -1 for kFinish
  int attempt = 0;       // kSubmit, kRetry: the attempt the new job is (1, 2, ...)
  bool resume = false;   // kRetry: the job starts with GPUHERD_RESUME=1
  Outcome outcome = Outcome::kSucceeded;  // kFinish
  std::string reason;    // kSkip, kRetry, kFinish: for people and the event log
};
const char* NodeActionKindName(NodeAction::Kind kind);  // "submit", "retry", "skip", "finish"

// A node is final when completed, stopped, cancelled, skipped, or failed
// with no retries left (attempts > retries).
bool IsFinal(const PlanNode& node, const NodeStatus& status);

// What to do now, nodes in plan order. A waiting node is submitted when
// every node it needs completed (or was stopped early), or, for an `if: always` node, when every
// node it needs is final. A waiting node that is not `always` is skipped
// once a node it needs is final without completing; skips cascade within
// the call. A failed node with retries left is retried (attempts + 1). When
// every node is final (counting this call's skips) the last action is
// kFinish: succeeded if every node completed, cancelled if a node was
// cancelled and none failed, failed otherwise. `statuses` is indexed like
// plan.nodes; missing entries count as waiting. Calling it again with
// unchanged statuses returns the same actions, so the caller applies them
// (marks nodes active or skipped) before asking again.
std::vector<NodeAction> NextActions(const Plan& plan, const std::vector<NodeStatus>& statuses);

// The job spec to submit for a kSubmit or kRetry action: the node's job,
// with GPUHERD_RESUME=1 in its env when the action resumes.
sched::JobSpec JobSpecFor(const Plan& plan, const NodeAction& action);

}  // namespace gpuherd::pipeline
