// Compute shares for fractional jobs through NVIDIA's Multi-Process Service
// (`gpuherd daemon --mps`, docs/queue.md "Fractional GPUs: the memory fence"). One
// MPS control daemon per GPU, started with the daemon and quit with it, in
// its own pipe and log folders under the daemon's home. A fractional job
// uses it only where every fraction on its GPU belongs to one user (an MPS
// server serves one user at a time); elsewhere fractions time-share the SMs.
// gpuherd never changes a GPU's compute mode.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace gpuherd::daemon {

class MpsControl {
 public:
  virtual ~MpsControl() = default;
  // The variables that connect a fractional job on GPU `gpu_index` to that
  // GPU's MPS server, with its memory share pinned (the job sees one GPU).
  virtual std::map<std::string, std::string> JobEnv(int gpu_index, uint64_t mem_bytes) const = 0;
  // Quits every control daemon started; idempotent.
  virtual void Shutdown() = 0;
};

// Starts `program` -d (nvidia-cuda-mps-control, looked up in PATH) once per
// GPU, with CUDA_VISIBLE_DEVICES set to that GPU's UUID and the pipe and log
// folders <home>/mps/<index>/{pipe,log}. Fails, naming what is missing, when
// the program is not on PATH or a control daemon does not start.
Result<std::unique_ptr<MpsControl>> StartMpsControl(const std::string& home, const std::vector<std::string>& gpu_uuids,
                                                    const std::string& program = "nvidia-cuda-mps-control");

}  // namespace gpuherd::daemon
