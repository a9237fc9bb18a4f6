// Slurm's command lines and their outputs, as pure functions: a gpuherd job
// as an `sbatch` call with its batch script, and the answers of sbatch,
// squeue and scontrol read back. The Slurm backend (daemon/slurm_backend.h)
// runs them through a CommandRunner; tests feed recorded outputs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::exec::slurm {

// Site settings and a pipeline's own (`slurm:` in its file).
struct SlurmOptions {
  std::string partition;                 // empty: the cluster's default
  std::string account;
  std::vector<std::string> sbatch_args;  // added as they are, after gpuherd's own
  // Where the jobs' output, exit status and metrics files go: must be the same
  // path on every node (shared storage).
  std::string shared_dir;
  int shards_per_gpu = 10;  // gres.conf's shard count per GPU (`gpuherd slurm gres-conf --shards 10`)
};

// One job for sbatch: what a gpuherd job spec asks for, in Slurm's terms.
struct BatchRequest {
  std::vector<std::string> argv;
  std::string cwd;
  std::map<std::string, std::string> env;  // the spec's env and the pipeline's variables
  int gpu_twentieths = 0;                  // 20·k: gpu:k; 1..19: shards
  int cpus = 0;
  uint64_t mem_bytes = 0;
  DurationMs time_limit = 0;
  DurationMs checkpoint_grace = 30 * kSecondMs;
  std::string name;     // "<pipeline>/<node id>"
  std::string comment;  // "gpuherd run=3 node=train[lr=0.1] attempt=1"
  // GPUHERD_CHECKPOINT_DIR: the node's folder, the same for every attempt.
  std::string checkpoint_dir;
  int prior_attempts = 0;  // runs of the node before this job (retries)
};

// sbatch's arguments (the script comes on stdin): --parsable, the job name
// and comment, --gres=gpu:N or --gres=shard:K, --cpus-per-task, --mem,
// --time, --signal=B:USR1@grace, --requeue, output files in shared_dir.
std::vector<std::string> SbatchArgs(const BatchRequest& request, const SlurmOptions& options);

// The batch script: exports the job protocol's variables (GPUHERD_JOB_ID is
// the Slurm job id; GPUHERD_RESTART_COUNT counts earlier attempts of the node
// and Slurm's requeues, GPUHERD_RESUME=1 when it is above 0), runs the
// command in the background, forwards SIGUSR1 and SIGTERM to it, and writes
// its exit status to ExitFile() before exiting with it.
std::string BatchScript(const BatchRequest& request, const SlurmOptions& options);

// Files of a Slurm job in the shared folder.
std::string OutputFile(const SlurmOptions& options, int64_t slurm_id);
std::string ErrorFile(const SlurmOptions& options, int64_t slurm_id);
std::string ExitFile(const SlurmOptions& options, int64_t slurm_id);
std::string MetricsFile(const SlurmOptions& options, int64_t slurm_id);

// `sbatch --parsable` prints "123" or "123;cluster".
Result<int64_t> ParseSbatchOutput(std::string_view out);

// One line of `squeue -h -o %i|%T|%r|%N`.
struct QueueEntry {
  int64_t id = 0;
  std::string state;   // RUNNING, PENDING, COMPLETED, ... (squeue's %T)
  std::string reason;  // squeue's %r: "None", "Resources", "BeginTime", ...
  std::string nodes;   // squeue's %N
};
std::vector<std::string> SqueueArgs(const std::vector<int64_t>& ids);
// Lines that are not ours (array tasks "12_3", stray text) are left out.
std::vector<QueueEntry> ParseSqueue(std::string_view out);

// `squeue --noheader --all --states=all --format=%i|%k` (id and comment):
// the id of the job whose comment has `token` as one of its words (gpuherd
// writes "job=<gpuherd id>" there); 0 when none has. Array tasks and
// malformed lines are skipped.
std::vector<std::string> CommentSqueueArgs();
int64_t FindJobByComment(std::string_view out, std::string_view token);

// What a Slurm state means for gpuherd.
enum class StateClass {
  kWaiting,    // PENDING, REQUEUED, REQUEUE_HOLD, REQUEUE_FED, SUSPENDED, ...
  kRunning,    // RUNNING, CONFIGURING, COMPLETING, STOPPED, RESIZING, SIGNALING
  kCompleted,  // COMPLETED
  kCancelled,  // CANCELLED
  kFailed,     // FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE
};
StateClass ClassifyState(std::string_view state);

// `scontrol show node NAME` → its fields ("State" → "IDLE+DRAIN", "Reason" → "..."),
// the Reason with its trailing " [user@time]" taken off.
std::map<std::string, std::string> ParseScontrolNode(std::string_view out);

// A value as one shell word: 'it'\''s'.
std::string ShellQuote(std::string_view s);

}  // namespace gpuherd::exec::slurm
