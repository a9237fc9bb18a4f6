// Without --sim or --scenario, the commands that read GPUs directly never fall
// back to a simulated fleet: no driver is an error, exit code 3, and a message
// that starts "no NVIDIA driver: ".
#pragma once

#include "cli/command.h"
#include "core/status.h"
#include "gpu/open.h"

namespace gpuherd::cli {

inline constexpr int kExitNoDriver = 3;

// The driver choice of `flags` with the simulated fallback turned off.
gpu::DriverChoice StrictChoice(const DriverFlags& flags);
// "no NVIDIA driver: <why>; pass --sim N ..." (kUnavailable).
Status NoDriver(const Status& why);
bool IsNoDriver(const Status& s);
// ctx->Fail(s), with exit code 3 when `s` is a NoDriver status.
void FailMaybeNoDriver(CommandContext* ctx, const Status& s);

}  // namespace gpuherd::cli
