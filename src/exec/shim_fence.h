// The shim's part of the memory fence (docs/queue.md "Fractional GPUs: the memory
// fence"): a fractional job gets libgpuherd-fence.so preloaded, with a ledger
// and a status file in its attempt's output folder. The job's own process
// creates both after it became the job's user (job_trees.h, rule 3), so they
// are the user's and the fence in every process of the job can open them.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "exec/launch_spec.h"

namespace gpuherd::exec {

// A file the job's process creates in its output folder before exec.
struct JobFile {
  std::string name;  // a plain name, no '/'
  mode_t mode = 0644;
  std::string text;
};

// When `env` carries a GPU memory share (GPUHERD_GPU_MEM_LIMIT_MB), adds the
// fence to it: LD_PRELOAD (after the job's own preloads), GPUHERD_FENCE_LEDGER
// and GPUHERD_FENCE_STATUS, and returns the ledger and status files to make.
// The library is the one beside this shim binary; without it the job runs
// unfenced and the status file says why (the memory watchdog is the
// backstop). Nothing when the job has no share.
std::vector<JobFile> AddMemoryFence(const LaunchSpec& spec, std::map<std::string, std::string>* env);

}  // namespace gpuherd::exec
