// Jobs as /v1/jobs and /v1/jobs/{id} serve them and as the CLI reads them:
// the queue answers with these types, the routes write them (to_json) and
// the CLI reads them (from_json takes what it knows, ignores the rest).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::api {

// A fractional job's memory fence as its attempt folder tells it (docs/queue.md
// "Fractional GPUs: the memory fence"): used against the share.
struct MemoryFenceView {
  std::string state;                 // fence::FenceReport::state
  uint64_t share_bytes = 0;          // the job's share as the queue counts it
  std::string detail;
  std::optional<uint64_t> used_bytes;
  std::optional<uint64_t> fence_share_bytes;  // only where the fence saw another share
};

struct JobView {
  int64_t id = 0;
  std::string name;
  std::string user;
  std::string state;
  std::string reason;                 // why it waits or how it ended
  int priority = 0;
  int gpu_twentieths = 0;             // requested: 20 per whole GPU
  uint64_t gpu_mem_bytes = 0;         // a fraction's memory share
  std::vector<int> assigned_gpus;
  std::vector<std::string> gpu_uuids; // the same GPUs by UUID
  std::vector<std::string> command;   // empty where the caller may not see it
  TimeMs submitted = 0, started = 0, ended = 0;
  int attempt = 0, restarts = 0, max_restarts = 0;
  int fault_restarts = 0;  // the restarts that count against max_restarts
  bool preemptible = false;
  DurationMs time_limit_ms = 0;
  std::vector<int64_t> after, after_any, after_not_ok;  // dependencies
  // A task of an array (`submit --array N`): the array's id is its first
  // task's, and task i is addressed as "<array_id>_<i>". 0: not a task.
  int64_t array_id = 0;
  int array_index = 0, array_size = 0;
  std::optional<int> exit_code, exit_signal;
  std::string priority_explained;     // a pending job's, in `show`
  std::string logs;                   // the attempt's folder, once it ran
  std::optional<MemoryFenceView> memory_fence;  // a fraction's, once it ran (`show`)
  std::string containment;            // how jobs are contained here (`show` of an unfinished job)
  TimeMs now = 0;                     // the daemon's clock when it answered
};

// The fields that are empty or unset are left out where the queue always
// left them out (exit_code, logs, after..., priority_explained, memory_fence,
// containment); the others are always written.
void to_json(nlohmann::json& j, const MemoryFenceView& v);
void to_json(nlohmann::json& j, const JobView& v);

// A job array as a unit (`show` of its id, the "array" field): its tasks'
// states, counted and one by one (in JSON, the first kMaxArrayTasksListed).
struct ArraySummary {
  struct Task {
    int64_t id = 0;
    int index = 0;
    std::string state;
  };
  int64_t id = 0;    // its first task's id
  std::string name;  // as submitted: the tasks are NAME[i]
  int size = 0;
  std::map<std::string, int> states;  // state -> how many tasks are in it
  std::vector<Task> tasks;
};
inline constexpr int kMaxArrayTasksListed = 1000;
void to_json(nlohmann::json& j, const ArraySummary& v);
void from_json(const nlohmann::json& j, ArraySummary& v);
// "12_3": task 3 of array 12, as Slurm writes it.
std::string ArrayTaskId(int64_t array_id, int index);

// A piece of a job's output (GET /v1/jobs/{id}/logs).
struct LogChunk {
  std::string data;         // raw bytes of the file (JSON-escaped when written)
  int64_t next_offset = 0;  // where the next piece starts
  bool final = false;       // the job is over: nothing more will come
  bool truncated = false;   // more is there already past this piece
  int attempt = 0;          // the attempt whose output this is (0: none has started)
  int attempts = 0;         // how many attempts the job has had
};
void to_json(nlohmann::json& j, const LogChunk& v);

// What POST /v1/jobs/cancel did: jobs cancelled outright, jobs told to stop,
// and jobs left alone with why.
struct CancelOutcome {
  struct Skipped {
    int64_t id = 0;
    std::string reason;
  };
  std::vector<int64_t> cancelled, stopping;
  std::vector<Skipped> skipped;
};
void to_json(nlohmann::json& j, const CancelOutcome& v);

// The fields that show what a job runs, and what it runs with: left out of
// job views for callers who may not see them (see routes/access.h).
inline constexpr const char* kJobPrivateFields[] = {"command", "env", "logs", "workdir"};

void from_json(const nlohmann::json& j, JobView& v);

// The compact listing, GET /v1/jobs?view=table: what `ps` shows and nothing
// else, as {"columns": [names], "rows": [[values in the columns' order]],
// "now": N}. The daemon writes the columns in this order; a reader maps them
// by name and ignores names it does not know. No field of kJobPrivateFields
// is among them, so every caller may read every row.
inline constexpr const char* kJobTableColumns[] = {
    "id", "name", "user", "state", "gpu_twentieths", "assigned_gpus", "priority", "submitted", "started", "ended",
    "reason", "array_id", "array_index"};

// One row of it: the columns `ps` shows, a third of a JobView's size.
struct JobRow {
  int64_t id = 0;
  std::string name;
  std::string user;
  std::string state;
  std::string reason;
  int priority = 0;
  int gpu_twentieths = 0;
  std::vector<int> assigned_gpus;
  TimeMs submitted = 0, started = 0, ended = 0;
  int64_t array_id = 0;  // a task of an array: its array's id and its index (JobView)
  int array_index = 0;
};
// A job's id as people write it: "12_3" for task 3 of array 12, else "14".
std::string JobIdText(const JobRow& job);

struct JobTable {
  // A deque: 20,000 rows are never moved while it grows (a vector's doublings
  // touched twice the memory, which on a VM is mostly page faults).
  std::deque<JobRow> jobs;
  TimeMs now = 0;  // the daemon's clock when it answered
};

// Reads a compact listing straight into rows, without building a document
// (20,000 jobs' DOM cost the client most of `ps`'s time). Refuses anything
// deeper than the format (4 levels), a value of the wrong type in a known
// column, rows before the columns, and a body that is not such a listing.
Result<JobTable> ParseJobTable(std::string_view body);
// The same from the full listing ({"jobs": [views], ...}), which a daemon
// older than ?view=table sends for it: `ps` falls back to it. `now` is the
// reply's, else the first job's, else `clock_now`.
Result<JobTable> JobTableFromFullListing(const nlohmann::json& reply, TimeMs clock_now);

// "2", "0.5" or "-".
std::string GpusRequested(const JobView& job);
std::string GpusRequested(const JobRow& job);
// "0,1" or "-".
std::string GpusAssigned(const JobView& job);
std::string GpusAssigned(const JobRow& job);
// Waiting time for pending jobs, run time for running ones, total for finished.
std::string JobTime(const JobView& job, TimeMs now);
std::string JobTime(const JobRow& job, TimeMs now);

}  // namespace gpuherd::api
