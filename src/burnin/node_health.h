// A node's verdict for Slurm's HealthCheckProgram (`gpuherd healthcheck
// --slurm`): each GPU judged by level 1's idle checks now and its latest
// burn-in, then what to do with the node: drain it with a reason that names
// the sick GPUs, resume it when every GPU is well again, or leave it. A
// node drained by anyone else (its reason does not start with "gpuherd:")
// is never resumed. Pure: the caller reads the GPUs and Slurm's node state
// and runs the scontrol command.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "burnin/result.h"

namespace gpuherd::burnin {

inline constexpr char kDrainReasonPrefix[] = "gpuherd:";

struct GpuJudgement {
  int index = 0;
  std::string uuid;
  bool unhealthy = false;
  std::string why;  // "score 42", "pcie_downtrained": what the drain reason says
};

// Unhealthy when a level-1 check fails now, or the latest finished burn-in's
// verdict is unhealthy. Degraded cards keep working (the scheduler's choice).
GpuJudgement JudgeGpu(int index, const std::string& uuid, const std::vector<Check>& level1,
                      const std::optional<Health>& latest_burnin);

struct NodeAction {
  enum class Kind { kNone, kDrain, kResume };
  Kind kind = Kind::kNone;
  std::string reason;   // kDrain: "gpuherd: GPU 3 unhealthy (score 42)"
  std::string message;  // for the log: what was decided and why
};
const char* NodeActionName(NodeAction::Kind kind);  // "none", "drain", "resume"

// `slurm_state` and `slurm_reason` as scontrol shows them ("IDLE+DRAIN").
NodeAction DecideNodeAction(const std::string& node, const std::string& slurm_state, const std::string& slurm_reason,
                            const std::vector<GpuJudgement>& gpus);

}  // namespace gpuherd::burnin
