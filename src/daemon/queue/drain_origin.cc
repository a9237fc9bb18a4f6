#include "daemon/queue/drain_origin.h"

namespace gpuherd::daemon::queue {

const char* DrainOriginName(DrainOrigin origin) {
  switch (origin) {
    case DrainOrigin::kOperator: return "operator";
    case DrainOrigin::kFault: return "fault";
    case DrainOrigin::kAlert: return "alert";
    case DrainOrigin::kBurnIn: return "burnin";
    case DrainOrigin::kRisk: return "risk";
  }
  return "operator";
}

std::optional<DrainOrigin> ParseDrainOrigin(std::string_view name) {
  for (DrainOrigin o : {DrainOrigin::kOperator, DrainOrigin::kFault, DrainOrigin::kAlert, DrainOrigin::kBurnIn,
                        DrainOrigin::kRisk}) {
    if (name == DrainOriginName(o)) return o;
  }
  return std::nullopt;
}

bool MayLift(DrainLifter lifter, DrainOrigin origin) {
  if (lifter == DrainLifter::kOperator) return true;
  return origin != DrainOrigin::kOperator;
}

}  // namespace gpuherd::daemon::queue
