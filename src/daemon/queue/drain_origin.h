// Who took a GPU out of service. Stored with every drain (gpu_drains.origin)
// and the only thing that decides what may lift it; the reason text is for
// people and never parsed.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpuherd::daemon::queue {

enum class DrainOrigin {
  kOperator,  // `gpuherd drain` by an admin: only an operator lifts it
  kFault,     // a GPU fault (fatal XID, lost, critical ECC or thermal event)
  kAlert,     // an alert rule's drain or checkpoint_and_move action
  kBurnIn,    // a burn-in's failing verdict
  kRisk,      // the failure-risk model's alarm
};

// "operator", "fault", "alert", "burnin", "risk".
const char* DrainOriginName(DrainOrigin origin);
std::optional<DrainOrigin> ParseDrainOrigin(std::string_view name);

// What may lift a drain of `origin`: an operator lifts any drain; a passing
// burn-in lifts the drains gpuherd made itself (fault, alert, burn-in, risk),
// never an operator's.
enum class DrainLifter { kOperator, kPassedBurnIn };
bool MayLift(DrainLifter lifter, DrainOrigin origin);

}  // namespace gpuherd::daemon::queue
