// A job as the queue knows it: what was asked for (JobSpec) and where it
// stands (Job). Shared by the scheduler (pure), the executor's caller and the
// store's caller; no I/O here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"

namespace gpuherd::sched {

using JobId = int64_t;

// pending → running → completed | failed | cancelled, with the transient
// states held (kept out of scheduling by its owner) and stopping (signalled,
// waiting for the process to exit; then requeued, cancelled or failed).
enum class JobState { kPending, kHeld, kRunning, kStopping, kCompleted, kFailed, kCancelled };
const char* JobStateName(JobState state);                        // "pending", "held", ...
std::optional<JobState> ParseJobState(const std::string& name);
inline bool IsFinal(JobState s) {
  return s == JobState::kCompleted || s == JobState::kFailed || s == JobState::kCancelled;
}

// GPUs are counted in twentieths: 0 = no GPU, 1..19 = a fraction of one GPU,
// 10·k = k whole GPUs. Anything else (0.35, 1.5) is refused at submit time.
constexpr int kTwentiethsPerGpu = 20;

struct JobSpec {
  std::vector<std::string> argv;          // the command; argv[0] looked up in PATH
  std::string cwd;                        // working directory; empty = the submitter's
  std::map<std::string, std::string> env; // added to the job protocol's variables
  int gpu_twentieths = 0;
  uint64_t gpu_mem_bytes = 0;             // required for fractions: the job's share of memory
  std::string model;                      // GPU name must contain this (case-insensitive); empty = any
  std::optional<int> min_cc;              // minimum compute capability ×10 (8.0 → 80)
  int cpus = 0;                           // 0 = no claim
  uint64_t mem_bytes = 0;                 // host memory; 0 = no claim
  int priority = 0;                       // urgency, -100..100
  std::string user;                       // who submitted (from peer credentials or token)
  uint32_t uid = 0, gid = 0;
  DurationMs time_limit = 0;              // 0 = none (backfill treats it as unbounded)
  DurationMs checkpoint_grace = 30 * kSecondMs;  // SIGTERM → SIGKILL
  bool preemptible = false;
  // A multi-GPU job may span GPU models (an H100 beside a 3090); by default
  // all its GPUs are of one model (the same name).
  bool mixed_models = false;
  int max_restarts = 0;                   // restarts after GPU faults or preemption
  // Dependencies, as Slurm has them (dependencies.h): start only after
  // these completed (--after, Slurm's afterok), ended however (--afterany),
  // failed or were cancelled (--afternotok).
  std::vector<JobId> depends_on;
  std::vector<JobId> after_any;
  std::vector<JobId> after_not_ok;
  std::string name;
  std::map<std::string, std::string> labels;
  // Maintenance work (a burn-in) on exactly these GPUs (UUIDs), alone: set by
  // the daemon, never from a user's spec. Such a job goes ahead of the queue,
  // may run on drained or unhealthy GPUs (testing them is its purpose) and
  // keeps new work off its GPUs while it waits for them to empty.
  std::vector<std::string> pinned_gpus;

  int whole_gpus() const { return gpu_twentieths >= kTwentiethsPerGpu ? gpu_twentieths / kTwentiethsPerGpu : 0; }
  bool fractional() const { return gpu_twentieths > 0 && gpu_twentieths < kTwentiethsPerGpu; }
  // Whether all its GPUs must be of one model (several whole GPUs, not mixed).
  bool one_model() const { return !mixed_models && whole_gpus() >= 2; }
};

struct Job {
  JobId id = 0;
  JobSpec spec;
  JobState state = JobState::kPending;
  TimeMs submitted = 0;
  TimeMs started = 0;                     // of the current or last attempt
  TimeMs ended = 0;
  int attempt = 0;                        // 1 on the first start; +1 on every restart
  int restarts = 0;                       // restarts counted against max_restarts
  std::vector<int> gpus;                  // GPU indices while running
  std::vector<std::string> gpu_uuids;     // the same GPUs by UUID (what is stored)
  std::optional<int> exit_code;
  std::optional<int> exit_signal;
  std::string reason;                     // why it is in its state (pending reason, failure cause)
};

}  // namespace gpuherd::sched
