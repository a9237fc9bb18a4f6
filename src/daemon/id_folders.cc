#include "daemon/id_folders.h"

#include <charconv>
#include <filesystem>
#include <string>
#include <system_error>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;

// Adds the numeric entries of `path` to *count and *max; a folder that cannot
// be read counts as empty (EnsureStateDir made the ones that matter).
void Scan(const std::string& path, int* count, int64_t* max) {
  std::error_code ec;
  fs::directory_iterator it(path, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.size() > 18 || name[0] == '0') continue;
    int64_t id = 0;
    auto [end, err] = std::from_chars(name.data(), name.data() + name.size(), id);
    if (err != std::errc() || end != name.data() + name.size() || id <= 0) continue;
    ++*count;
    if (id > *max) *max = id;
  }
}

}  // namespace

IdFolders ScanIdFolders(const StateDir& dir) {
  IdFolders found;
  Scan(dir.jobs_dir(), &found.job_folders, &found.max_job_id);
  Scan(dir.checkpoint_dir(), &found.job_folders, &found.max_job_id);
  Scan(dir.root + "/pipelines", &found.pipeline_folders, &found.max_pipeline_id);
  return found;
}

Status KeepIdsAboveFolders(const StateDir& dir, store::Store* store, bool adopt_empty_state) {
  const IdFolders folders = ScanIdFolders(dir);
  auto last_job = store->LastJobId();
  if (!last_job.ok()) return last_job.status();
  auto last_run = store->LastPipelineRunId();
  if (!last_run.ok()) return last_run.status();
  if (folders.max_job_id <= *last_job && folders.max_pipeline_id <= *last_run) return Status::Ok();

  const bool never_assigned = *last_job == 0 && *last_run == 0;
  const std::string what = fmt::format(
      "{} holds {} job folders (up to id {}) and {} pipeline folders (up to id {})", dir.root,
      folders.job_folders, folders.max_job_id, folders.pipeline_folders, folders.max_pipeline_id);
  if (never_assigned && !adopt_empty_state) {
    return FailedPrecondition(
        what + " from an earlier database, but " + dir.db_path() +
        " has never assigned an id (it was moved aside, lost or replaced). Starting on it would reuse "
        "those ids: a new job would write into an old job's log and checkpoint. Put the earlier " +
        "state.db back, or start with `gpuherd daemon --adopt-empty-state` to keep the old folders "
        "untouched and give new jobs and pipelines ids above them");
  }
  // Also a database restored from an older copy: it is behind its folders.
  spdlog::warn("{}, above the last ids in {} (job {}, pipeline {}): new ids start above them", what,
               dir.db_path(), *last_job, *last_run);
  return store->ReserveIdsThrough(folders.max_job_id, folders.max_pipeline_id);
}

}  // namespace gpuherd::daemon
