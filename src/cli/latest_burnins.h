// What the node doctor and `gpuherd k8s labels` take from the burn-in
// history: each GPU's latest finished burn-in, read from the daemon when it
// runs, else from the state database opened read-only. Never writes.
#pragma once

#include <map>
#include <string>

#include "cli/command.h"
#include "doctor/doctor.h"

namespace gpuherd::cli {

struct LatestBurnIns {
  std::map<std::string, std::string> verdicts;               // UUID -> "healthy", ...
  std::map<std::string, doctor::PcieLink> pcie_under_load;   // UUID -> link reached under load
  std::string unavailable;  // why there is no history ("" when it was read)
};

// Never fails: without a history the maps are empty and `unavailable` says why.
LatestBurnIns ReadLatestBurnIns(const CommandContext& ctx);

}  // namespace gpuherd::cli
