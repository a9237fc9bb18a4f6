// The GPU reset before a requalification burn-in (`burnin --reset-first`, which
// the daemon asks for only under `daemon --allow-gpu-reset`): nvidia-smi
// --gpu-reset on the card's PCI address, and only when the driver answers and
// lists no process on the GPU (gpuherd's own jobs or anyone else's). The
// outcome is a check of the run ("gpu_reset"), so the requalification's
// evidence shows whether the card was reset, and why not.
#pragma once

#include "burnin/result.h"
#include "core/time.h"
#include "exec/command_runner.h"
#include "gpu/driver.h"

namespace gpuherd::burnin {

// Never resets a simulated card, a GPU that does not answer, or one with
// processes on it: then the check is skipped with reason "simulated",
// "gpu_not_answering" or "processes_on_gpu" and `runner` is not called. A
// failed reset is a warning ("reset_failed"), not a failed burn-in.
Check ResetBeforeBurnIn(gpu::Driver& driver, const gpu::GpuInfo& info, TimeMs now, exec::CommandRunner& runner);

}  // namespace gpuherd::burnin
