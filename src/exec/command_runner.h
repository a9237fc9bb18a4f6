// Runs a short external command (sbatch, squeue, scontrol, scancel) and
// collects what it printed. Behind an interface so that the Slurm code is
// unit-tested with recorded outputs and runs against a real Slurm otherwise.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::exec {

struct CommandRequest {
  std::vector<std::string> argv;  // argv[0] looked up in PATH
  std::string stdin_text;         // written to the command's stdin, then closed
  // Run as this user (root only): Slurm's sbatch submits as its caller.
  std::optional<uint32_t> uid, gid;
  // Added to (or replacing in) the caller's environment.
  std::map<std::string, std::string> env;
  DurationMs timeout = 30 * kSecondMs;  // then SIGKILL; the result is an error
};

struct CommandResult {
  int exit_code = 0;  // 128 + signal when a signal ended it
  std::string out, err;
};

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Fails only when the command could not run or ran past its timeout; a
  // non-zero exit is a result, for the caller to judge.
  virtual Result<CommandResult> Run(const CommandRequest& request) = 0;
};

// Real processes (fork, exec, pipes). Thread-safe.
std::unique_ptr<CommandRunner> NewProcessRunner();

}  // namespace gpuherd::exec
