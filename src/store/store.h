// Durable state: the SQLite file in the state directory. All SQL of gpuherd
// lives in this module; the layers above see only the records of records.h.
#pragma once

#include <cstdint>
#include <memory>
#include <array>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "store/records.h"

namespace SQLite {
class Database;
class Statement;
}  // namespace SQLite

namespace gpuherd::store {

struct StoreOptions {
  // FULL: a Commit is on disk before it returns (durable before acknowledged).
  // NORMAL (false) may lose the last commits on power loss, never on a crash of
  // the process; only for benchmarks that say so.
  bool synchronous_full = true;
  // Never writes, never migrates; the file must exist at the current schema.
  bool read_only = false;
};

// One open state file. Not thread-safe: a Store is used by one thread at a
// time (the daemon's loop); other processes may open the same file, and wait
// up to a few seconds for its lock. Every method returns errors as Status.
class Store {
 public:
  // Creates the file if needed (unless read-only) and brings its schema up to
  // date. Refuses a file written by a newer gpuherd.
  static Result<std::unique_ptr<Store>> Open(const std::string& path,
                                             const StoreOptions& options = {});
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const { return path_; }
  int schema_version() const { return schema_version_; }

  // One transaction for the whole batch: GPUs are upserted first (first_seen
  // is kept from the first insert), then rollups, then events. Assigns ids to
  // batch->events in order. On error nothing of the batch is kept and the
  // event ids are left at 0. A rollup must name a GPU already stored or in
  // the same batch; one for a minute already stored is merged into it.
  Status Commit(WriteBatch* batch);

  Result<std::vector<GpuRecord>> ListGpus();  // by index, then uuid
  Result<std::optional<GpuRecord>> GetGpu(const std::string& uuid);
  // Rollups of one GPU with from <= minute < to, oldest first, at most
  // `limit`: page on by passing the last minute + 1 as `from`.
  Result<std::vector<RollupRecord>> QueryRollups(const std::string& uuid, TimeMs from, TimeMs to,
                                                 int limit = 10000);
  // One GPU's minutes with from <= minute < to in buckets of `step` from
  // `from`, oldest first: per bucket the mean of its minutes' means of each
  // metric (nullopt where none of its minutes has it). Computed by SQLite, so
  // a week of minutes costs no row objects (the dashboard's long ranges).
  struct RollupBucket {
    TimeMs start = 0;
    int minutes = 0;
    std::array<std::optional<double>, kRollupMetricCount> means;
  };
  Result<std::vector<RollupBucket>> QueryRollupBuckets(const std::string& uuid, TimeMs from, TimeMs to,
                                                       DurationMs step);
  // The newest `filter.limit` matching events, returned oldest first.
  Result<std::vector<EventRecord>> ListEvents(const EventFilter& filter);
  // 0 when there are no events yet.
  Result<int64_t> LastEventId();
  // Retention: deletes every rollup with minute < older_than.
  Status PruneRollups(TimeMs older_than);

  // Jobs (store/jobs.cc). Unfinished ones (not completed/failed/cancelled) in
  // id order: what a restarted daemon reloads.
  Result<std::vector<JobRecord>> ListUnfinishedJobs();
  // Finished jobs that ended at or after `since`, newest first, at most `limit`.
  Result<std::vector<JobRecord>> ListFinishedJobs(TimeMs since, int limit);
  // The id, name and state of the jobs with ids from `first` to `last`, in
  // id order: one range read of the primary key (a job array's tasks).
  Result<std::vector<JobStateRecord>> ListJobStates(int64_t first, int64_t last);
  Result<std::optional<JobRecord>> GetJob(int64_t id);
  // The highest job id ever assigned (0 when none): ids are never reused.
  Result<int64_t> LastJobId();
  Result<std::vector<DrainRecord>> ListDrains();

  // Burn-in runs (store/burnin.cc). Commit assigns ids to batch->burnin_runs
  // in order. Newest (by finished time, then id) first.
  Result<std::vector<BurnInRecord>> ListBurnInRuns(const BurnInFilter& filter);
  Result<std::optional<BurnInRecord>> GetBurnInRun(int64_t id);
  // The newest run of every GPU that ran to the end (outcome passed or
  // faults_found): the verdict that keeps a GPU in or out of work. Aborted
  // and could-not-run runs say nothing about the card and are passed over.
  // Ordered by GPU UUID.
  Result<std::vector<BurnInRecord>> LatestBurnInPerGpu();

  // Alerts (store/alerts.cc). Pending and firing ones, by rule then subject:
  // what a restarted daemon takes back.
  Result<std::vector<AlertRecord>> ListActiveAlerts();
  // Resolved alerts with resolved_at >= since, newest first, at most `limit`.
  Result<std::vector<AlertRecord>> ListResolvedAlerts(TimeMs since, int limit);
  // Retention: deletes resolved alerts with resolved_at < older_than.
  Status PruneResolvedAlerts(TimeMs older_than);

  // Pipelines (store/pipelines.cc). Runs newest first, at most `limit`;
  // only those still running unless `all`.
  Result<std::vector<PipelineRunRecord>> ListPipelineRuns(bool all, int limit);
  Result<std::optional<PipelineRunRecord>> GetPipelineRun(int64_t id);
  // The highest run id ever assigned (0 when none): ids are never reused.
  Result<int64_t> LastPipelineRunId();
  // Raises the highest job and pipeline run ids ever assigned to at least
  // these values (never lowers them), so that the next ids come above
  // folders an earlier database left in the home (store/jobs.cc).
  Status ReserveIdsThrough(int64_t last_job_id, int64_t last_pipeline_run_id);
  // The nodes of one run, in no particular order (the plan gives the order).
  Result<std::vector<PipelineNodeRecord>> ListPipelineNodes(int64_t run_id);
  // A run's metric lines (of one node, or all when `node_id` is empty),
  // by node, then step (lines without a step last, in the order written).
  Result<std::vector<MetricRecord>> ListRunMetrics(int64_t run_id, const std::string& node_id);
  // A plain job's metric lines, by step.
  Result<std::vector<MetricRecord>> ListJobMetrics(int64_t job_id);
  // How far the daemon read the job's metrics file; nullopt before any line.
  Result<std::optional<MetricIntakeRecord>> GetMetricIntake(int64_t job_id);

  // Job attempts (store/attempts.cc). One job's, by attempt.
  Result<std::vector<AttemptRecord>> ListAttempts(int64_t job_id);
  // The jobs `filter` selects (by id) and all their attempts (by job, then
  // attempt): what `gpuherd acct` adds up.
  Result<std::pair<std::vector<JobRecord>, std::vector<AttemptRecord>>> ListAccounting(const AcctFilter& filter);
  // Attempts still open (ended 0): what a restarted daemon goes on measuring.
  Result<std::vector<AttemptRecord>> ListOpenAttempts();

  // GPU health and passports (store/passports.cc). Appended in one
  // transaction; ids assigned in order.
  Status AppendHealthTransitions(std::vector<HealthTransitionRecord>* rows);
  // One GPU's transitions, oldest first.
  Result<std::vector<HealthTransitionRecord>> ListHealthTransitions(const std::string& gpu_uuid);
  // Minutes in which the GPU answered at least once: its hours under watch.
  Result<int64_t> CountSampledMinutes(const std::string& gpu_uuid);
  // Upserted by (card_key, source).
  Status SavePassportImport(const PassportImportRecord& record);
  Result<std::vector<PassportImportRecord>> ListPassportImports(const std::string& card_key);

  // Idempotency keys (store/idempotency.cc): the stored first outcome of
  // (uid, key), if any, whatever its age (the caller decides what expired).
  Result<std::optional<IdempotencyRecord>> GetIdempotency(uint32_t uid, const std::string& key);

  // Tests: makes the file as full as a full disk would (SQLite's
  // max_page_count at its current size, so every commit that needs a new
  // page fails with SQLITE_FULL), or lifts that again with `full` false.
  Status SimulateFullDiskForTest(bool full);

 private:
  Store(std::string path, bool read_only, int schema_version, std::unique_ptr<SQLite::Database> db);
  Status CheckWritable(const char* what) const;
  SQLite::Statement& Prepared(std::unique_ptr<SQLite::Statement>* slot, const char* sql);
  void UpsertGpu(const GpuRecord& gpu);
  void InsertRollup(const RollupRecord& rollup);
  int64_t InsertEvent(const EventRecord& event);
  void UpsertJob(const JobRecord& job);
  void WriteDrain(const DrainRecord& drain);
  int64_t InsertBurnIn(const BurnInRecord& run);
  void WriteAlert(const AlertRecord& alert);
  // Inserts one row and sets its id (store/passports.cc).
  void InsertHealthTransition(HealthTransitionRecord* row);
  void UpsertAttempt(const AttemptRecord& attempt);
  // The batch's pipeline runs, nodes and metric lines; `doing` names the row
  // being written when SQLite throws.
  void WritePipelines(const WriteBatch& batch, std::string* doing);
  void WriteIdempotency(const WriteBatch& batch);

  std::string path_;
  bool read_only_;
  int schema_version_;
  // Declared before the statements, which must be finalized first.
  std::unique_ptr<SQLite::Database> db_;
  // The hot inserts, prepared once per Store.
  std::unique_ptr<SQLite::Statement> upsert_gpu_;
  std::unique_ptr<SQLite::Statement> insert_rollup_;
  std::unique_ptr<SQLite::Statement> insert_event_;
  std::unique_ptr<SQLite::Statement> upsert_job_;
  std::unique_ptr<SQLite::Statement> upsert_attempt_;
  // Every mutating request with an Idempotency-Key (every `submit`) reads one
  // and writes one.
  std::unique_ptr<SQLite::Statement> get_idempotency_;
  std::unique_ptr<SQLite::Statement> insert_idempotency_;
};

}  // namespace gpuherd::store
