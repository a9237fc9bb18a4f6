#include "burnin/gpu_reset.h"

#include <cctype>

#include <fmt/format.h>

namespace gpuherd::burnin {
namespace {

// nvidia-smi's words go into the run's evidence: printable ASCII only.
std::string AsciiEvidence(const std::string& s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) out += std::isprint(c) ? static_cast<char>(c) : ' ';
  return out;
}

}  // namespace

Check ResetBeforeBurnIn(gpu::Driver& driver, const gpu::GpuInfo& info, TimeMs now, exec::CommandRunner& runner) {
  Check c;
  c.name = "gpu_reset";
  c.level = 1;
  c.outcome = CheckOutcome::kSkipped;
  auto sample = driver.Sample(info.index, now);
  if (!sample.ok()) {
    c.reason = "gpu_not_answering";
    c.message = "not reset: the GPU does not answer (" + sample.status().message() + ")";
    return c;
  }
  if (!sample->processes.empty()) {
    c.reason = "processes_on_gpu";
    c.message = fmt::format("not reset: {} process(es) use the GPU", sample->processes.size());
    return c;
  }
  if (driver.simulated()) {
    c.reason = "simulated";
    c.message = "not reset: a simulated card has no hardware to reset";
    return c;
  }
  exec::CommandRequest reset;
  reset.argv = {"nvidia-smi", "--gpu-reset", "-i", info.pci_bus_id};
  reset.timeout = 2 * kMinuteMs;
  auto done = runner.Run(reset);
  if (done.ok() && done->exit_code == 0) {
    c.outcome = CheckOutcome::kPass;
    c.message = "reset with nvidia-smi --gpu-reset before the burn-in";
  } else {
    c.outcome = CheckOutcome::kWarn;
    c.reason = "reset_failed";
    c.message = "nvidia-smi --gpu-reset failed: " +
                (done.ok() ? fmt::format("exit {}: {}", done->exit_code, AsciiEvidence(done->err)) : done.status().message());
  }
  return c;
}

}  // namespace gpuherd::burnin
