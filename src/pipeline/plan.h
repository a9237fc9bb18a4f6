// A pipeline expanded for one run: every step × sweep point becomes a node
// with a ready job spec, in an order where each node comes after the nodes
// it needs. Expansion is deterministic: the same spec, overrides and run
// folder give the same plan, so a restarted daemon can rebuild it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "pipeline/anomaly.h"
#include "pipeline/spec.h"
#include "sched/job.h"

namespace gpuherd::pipeline {

struct PlanNode {
  // "train[lr=0.1,batch=64]"; the step's name alone when it has no matrix.
  // A random sweep that draws the same values twice marks the repeat
  // "[...,#2]" so ids stay unique.
  std::string id;
  // "train/3", or the step's name alone: short, stable, and the node's
  // workspace folder relative to the run folder.
  std::string key;
  std::string step;
  int point = 0;                                            // index in the step's sweep
  std::vector<std::pair<std::string, std::string>> matrix;  // the point's values, in matrix order
  // The node's job spec, checked as POST /v1/jobs checks one: the command and env with
  // every ${{ ... }} substituted, cwd, resources (defaults + step), name
  // "<pipeline>/<id>", labels gpuherd/pipeline, gpuherd/step and
  // gpuherd/node, and env GPUHERD_RUN_DIR, GPUHERD_WORKSPACE and
  // GPUHERD_CHECKPOINT_DIR (the same folder for every attempt of the node).
  sched::JobSpec job;
  std::vector<std::string> needs;   // node ids: every node of each needed step
  std::vector<size_t> need_nodes;   // the same nodes as indices into Plan::nodes
  int retries = 0;
  bool always = false;              // if: always
  std::vector<std::string> artifacts;  // relative to the run folder: "prepare/data"
  std::string checkpoint_dir;       // absolute: <run_dir>/.checkpoints/<key>
  AnomalyConfig anomalies;
};

struct Plan {
  std::string name;
  std::string run_dir;                        // absolute; holds every node's workspace
  std::map<std::string, std::string> params;  // the values in effect, overrides applied
  BackendChoice backend;                      // the file's backend: and slurm:
  std::vector<PlanNode> nodes;                // a topological order
  // By step name: the steps that declare an objective, and an early_stop.
  std::map<std::string, Objective> objectives;
  std::map<std::string, EarlyStopPolicy> early_stops;

  // The node's index, or -1.
  int Find(const std::string& id) const;
};

// A node's job is restarted by the queue after a GPU fault, a quarantine or
// a lost supervisor (resuming from its checkpoint on another GPU) up to this
// many times unless its step sets max_restarts: such ends are the
// hardware's, and never use the node's `retries`, which are for failures of
// the job itself. Preemptions restart it without counting at all.
inline constexpr int kNodeFaultRestarts = 10;

// What one run may hold, checked before the plan is built (nodes, edges)
// and while it is built (bytes), so that neither the CLI nor the daemon
// allocates a plan it would refuse.
inline constexpr size_t kMaxPlanNodes = 20000;     // jobs, all steps together
inline constexpr uint64_t kMaxPlanEdges = 200000;  // node → needed node pairs
inline constexpr size_t kMaxPlanBytes = 32 << 20;  // ids, commands, environments, needs

// Expands `spec` for a run whose workspace is the absolute folder `run_dir`
// (the caller creates it and each node's workspace and artifact folders
// before submitting). `overrides` replace parameter defaults; naming a
// parameter the pipeline does not define is an error.
//
// Random sweeps: std::mt19937_64 seeded with the matrix's seed (its output
// is fixed by the C++ standard), drawn point by point and, within a point,
// parameter by parameter in file order. A uniform real is the top 53 bits
// of one draw times 2^-53; choice and int use one draw made unbiased by
// rejection (values below 2^64 mod n are drawn again); uniform maps u to
// lo + (hi - lo)·u, loguniform to exp(log lo + (log hi - log lo)·u). Reals
// are written with 4 significant digits ("0.001234", "1e-05").
Result<Plan> Expand(const PipelineSpec& spec, const std::map<std::string, std::string>& overrides,
                    const std::string& run_dir);

// "epochs=5" → {"epochs", "5"}: the form of `gpuherd run -p`.
Result<std::pair<std::string, std::string>> ParseOverride(const std::string& text);

}  // namespace gpuherd::pipeline
