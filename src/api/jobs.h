// Jobs as /v1/jobs and /v1/jobs/{id} serve them and as the CLI reads them.
// The queue still writes this JSON itself; this is the reading side, which
// takes what it knows and ignores fields it does not.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::api {

struct JobView {
  int64_t id = 0;
  std::string name;
  std::string user;
  std::string state;
  std::string reason;                 // why it waits or how it ended
  int priority = 0;
  int gpu_twentieths = 0;             // requested: 20 per whole GPU
  std::vector<int> assigned_gpus;
  std::vector<std::string> command;   // empty where the caller may not see it
  TimeMs submitted = 0, started = 0, ended = 0;
  int attempt = 0, restarts = 0, max_restarts = 0;
  int fault_restarts = 0;  // the restarts that count against max_restarts
  std::optional<int> exit_code, exit_signal;
  std::string priority_explained;
  std::string logs;                   // the attempt's folder, once it ran
  TimeMs now = 0;                     // the daemon's clock when it answered
};

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
    "reason"};

struct JobTable {
  std::vector<JobView> jobs;
  TimeMs now = 0;  // the daemon's clock when it answered
};

// Reads a compact listing straight into views, without building a document
// (20,000 jobs' DOM cost the client most of `ps`'s time). Refuses anything
// deeper than the format (4 levels), a value of the wrong type in a known
// column, rows before the columns, and a body that is not such a listing.
Result<JobTable> ParseJobTable(std::string_view body);

// "2", "0.5" or "-".
std::string GpusRequested(const JobView& job);
// "0,1" or "-".
std::string GpusAssigned(const JobView& job);
// Waiting time for pending jobs, run time for running ones, total for finished.
std::string JobTime(const JobView& job, TimeMs now);

}  // namespace gpuherd::api
