// Ids are never reused: a job's and a pipeline run's folders in the home
// (jobs/<id>, checkpoints/<id>, pipelines/<id>) outlive the database rows
// that named them. A state.db that was moved aside or lost would otherwise
// start again at id 1, and the new job 1 would append to the old job 1's log
// and resume from its checkpoint.
#pragma once

#include <cstdint>

#include "core/state_dir.h"
#include "core/status.h"
#include "store/store.h"

namespace gpuherd::daemon {

struct IdFolders {
  int64_t max_job_id = 0;       // highest numeric name under jobs/ and checkpoints/
  int64_t max_pipeline_id = 0;  // highest numeric name under pipelines/
  int job_folders = 0;
  int pipeline_folders = 0;
};

// Counts the folders named by a positive decimal id (other names are not
// gpuherd's and are ignored). Missing directories count as empty.
IdFolders ScanIdFolders(const StateDir& dir);

// Called at start, before the queue loads: makes the store's next job and
// pipeline ids come above every folder. Refuses (kFailedPrecondition, saying
// what to do) when the database has never assigned an id while folders exist,
// unless `adopt_empty_state` (gpuherd daemon --adopt-empty-state).
Status KeepIdsAboveFolders(const StateDir& dir, store::Store* store, bool adopt_empty_state);

}  // namespace gpuherd::daemon
