#include "burnin/node_health.h"

#include <fmt/format.h>

namespace gpuherd::burnin {

GpuJudgement JudgeGpu(int index, const std::string& uuid, const std::vector<Check>& level1,
                      const std::optional<Health>& latest_burnin) {
  GpuJudgement j;
  j.index = index;
  j.uuid = uuid;
  std::string why;
  for (const Check& c : level1) {
    if (c.outcome != CheckOutcome::kFail) continue;
    why += (why.empty() ? "" : ", ") + (c.reason.empty() ? c.name : c.reason);
  }
  if (latest_burnin && latest_burnin->verdict == Verdict::kUnhealthy) {
    why = fmt::format("score {}", latest_burnin->score) + (why.empty() ? "" : ", " + why);
  }
  j.unhealthy = !why.empty();
  j.why = why;
  return j;
}

const char* NodeActionName(NodeAction::Kind kind) {
  switch (kind) {
    case NodeAction::Kind::kNone: return "none";
    case NodeAction::Kind::kDrain: return "drain";
    case NodeAction::Kind::kResume: return "resume";
  }
  return "none";
}

NodeAction DecideNodeAction(const std::string& node, const std::string& slurm_state, const std::string& slurm_reason,
                            const std::vector<GpuJudgement>& gpus) {
  std::string sick;
  for (const GpuJudgement& g : gpus) {
    if (g.unhealthy) sick += fmt::format("{}GPU {} unhealthy ({})", sick.empty() ? "" : "; ", g.index, g.why);
  }
  const bool drained = slurm_state.find("DRAIN") != std::string::npos || slurm_state.find("DOWN") != std::string::npos;
  const bool ours = slurm_reason.rfind(kDrainReasonPrefix, 0) == 0;
  NodeAction a;
  if (!sick.empty()) {
    const std::string reason = std::string(kDrainReasonPrefix) + " " + sick;
    if (drained && !ours) {
      a.message = fmt::format("{}: {}; already drained by someone else ({}), left as it is", node, sick,
                              slurm_reason.empty() ? "no reason given" : slurm_reason);
    } else if (drained && slurm_reason == reason) {
      a.message = fmt::format("{}: still drained: {}", node, sick);
    } else {
      a.kind = NodeAction::Kind::kDrain;
      a.reason = reason;
      a.message = fmt::format("{}: draining: {}", node, sick);
    }
    return a;
  }
  if (drained && ours) {
    a.kind = NodeAction::Kind::kResume;
    a.message = fmt::format("{}: all {} GPUs are well again; resuming (was: {})", node, gpus.size(), slurm_reason);
  } else if (drained) {
    a.message = fmt::format("{}: all {} GPUs are well; drained by someone else ({}), left drained", node, gpus.size(),
                            slurm_reason.empty() ? "no reason given" : slurm_reason);
  } else {
    a.message = fmt::format("{}: all {} GPUs are well", node, gpus.size());
  }
  return a;
}

}  // namespace gpuherd::burnin
