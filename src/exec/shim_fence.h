// The shim's part of the memory fence (README "Fractional GPUs: the memory
// fence"): a fractional job gets libgpuherd-fence.so preloaded, with a ledger
// and a status file in its attempt folder that belong to the job's user.
#pragma once

#include <map>
#include <string>

#include "exec/launch_spec.h"

namespace gpuherd::exec {

// When `env` carries a GPU memory share (GPUHERD_GPU_MEM_LIMIT_MB), adds the
// fence to it: LD_PRELOAD (after the job's own preloads), GPUHERD_FENCE_LEDGER
// and GPUHERD_FENCE_STATUS. The library is the one beside this shim binary;
// without it the job runs unfenced and the status file says why. Never fails
// the launch: the memory watchdog is the backstop.
void AddMemoryFence(const LaunchSpec& spec, std::map<std::string, std::string>* env);

}  // namespace gpuherd::exec
