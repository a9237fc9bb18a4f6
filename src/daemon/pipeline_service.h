// Pipeline runs on the job queue: a pipeline file expanded into a plan
// whose nodes become jobs as their needs complete, with retries that resume
// from the node's checkpoint, cancel and retry by people, and the metric
// lines of every job collected into the store with the pipeline's anomaly
// checks and their actions. Lives on the event-loop thread (not
// thread-safe); every change goes into the turn's WriteBatch.
//
// A run survives a daemon restart: its file, overrides and folder are
// stored, and expansion is deterministic, so Load() rebuilds the same plan
// and carries on from the stored node states.
//
// Creating a run holds the event loop only to store it: Prepare() parses
// and expands the file on the caller's (HTTP) thread, and Create() takes the
// result on the loop. A run's folders (its own, and each node's workspace,
// artifact and checkpoint folders) are made on a worker thread once the
// turn's commit has stored the run: a 10,000-node sweep is tens of thousands
// of mkdir and chown calls, and a run whose commit failed must leave none.
// No node of the run is submitted until the worker has made every folder,
// and when it cannot, the run fails with the reason (its waiting nodes are
// skipped, saying why). Load() makes the folders of every unfinished run
// again (the ones that exist are kept), so a daemon stopped before the
// worker was done carries on after a restart.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "alerts/engine.h"
#include "api/pipelines.h"
#include "core/state_dir.h"
#include "core/status.h"
#include "daemon/caller.h"
#include "daemon/daemon_state.h"
#include "daemon/job_backend.h"
#include "daemon/job_service.h"
#include "daemon/metrics_intake.h"
#include "daemon/work_queue.h"
#include "pipeline/plan.h"
#include "pipeline/progress.h"
#include "sched/job.h"

namespace gpuherd::daemon {

class PipelineService {
 public:
  // `state` and the backends must outlive the service; `default_backend`
  // names the one for runs whose file names none. Call Load() once, then
  // route every backend's job changes to OnJobChanged.
  // `post` runs a task on the event loop (thread-safe): how the folder
  // worker reports back.
  using PostToLoop = std::function<void(std::function<void()>)>;
  PipelineService(DaemonState* state, std::vector<JobBackend*> backends, std::string default_backend, StateDir dir,
                  PostToLoop post);
  // Stops the folder worker between two folders; a run it did not finish
  // has its folders made at the next Load().
  ~PipelineService();

  // Reloads unfinished runs and starts collecting the metrics of the jobs
  // that are running (their lines so far are stored again, without raising
  // anomalies a second time).
  Status Load();

  // A pipeline file read and expanded into a run that has its id and is not
  // stored yet: what Prepare() makes and Create() stores.
  struct PreparedRun {
    store::PipelineRunRecord record;  // its creation time is set by Create()
    pipeline::Plan plan;
    std::vector<store::PipelineNodeRecord> nodes;  // indexed like plan.nodes, all waiting
    std::map<std::string, int> by_id;              // node id → index
  };
  // POST /v1/pipelines, its first half. Thread-safe, and reads none of the
  // loop's state: the file is parsed and expanded here, not on the loop (a
  // 10,000-point sweep takes about 0.2 s). Takes the run's id (its folder's
  // name is in the plan); ids are never reused, and one taken by a run that
  // is never stored (a failed commit, a replayed idempotency key) is
  // skipped. Validation errors name the file and line.
  Result<PreparedRun> Prepare(const api::PipelineCreateRequest& request, const Caller& caller);
  // Its second half, on the loop: stores the run in the turn's batch, and
  // its folders are asked for once the commit has stored it (AfterCommit).
  // The run's id and how many nodes it has.
  Result<api::PipelineCreated> Create(PreparedRun prepared, const Caller& caller);
  // Both halves on the loop.
  Result<api::PipelineCreated> Create(const api::PipelineCreateRequest& request, const Caller& caller);
  // GET /v1/pipelines: by default running runs and those that finished in
  // the last day (kListedFinishedMs); every run (the newest 1,000) when
  // `all`; with `state`, only runs in it (see RunListed), finished or not.
  // A user sees their own, an admin every run. Newest first.
  struct ListFilter {
    bool all = false;
    std::string state;  // running, completed, succeeded, failed or cancelled; empty: any
  };
  static constexpr DurationMs kListedFinishedMs = 24 * kHourMs;
  // The states `state` may name, for the route's message.
  static bool IsListedState(const std::string& state);
  // Whether the listing `filter` has the run `record` at `now`: its state
  // or its outcome is `filter.state`; else `all`, or it is running, or it
  // finished at most kListedFinishedMs ago.
  static bool RunListed(const store::PipelineRunRecord& record, const ListFilter& filter, TimeMs now);
  Result<std::vector<api::PipelineSummary>> List(const ListFilter& filter, const Caller& caller);
  Result<api::PipelineDetail> Show(int64_t id, const Caller& caller);
  // The run's metric lines, of one node (by id) or of all when empty.
  Result<std::vector<api::PipelineMetricLine>> Metrics(int64_t id, const std::string& node, const Caller& caller);
  // Cancels every unfinished node's job: the run's new state.
  Result<std::string> Cancel(int64_t id, const Caller& caller);
  // Sets failed and skipped nodes waiting again (their attempts are kept,
  // so each gets one new attempt, resuming from its checkpoint): the run's
  // new state.
  Result<std::string> Retry(int64_t id, const Caller& caller);

  // Where anomalies become alerts (AlertService::RaiseExternal): each one
  // fires as `pipeline_<kind>` on its node and resolves when the job's
  // attempt ends. Without it, anomalies are events only.
  void SetAlertSink(std::function<void(const alerts::AlertTransition&)> sink) { alert_sink_ = std::move(sink); }

  // How far the intake read a job's metrics file; nullopt when it is not
  // watching the job (not running, or its file read to the end).
  std::optional<MetricsIntake::Counts> MetricIntake(int64_t job_id) const { return intake_.counts(job_id); }

  // JobService's state listener: a job started, was requeued or finished.
  void OnJobChanged(const sched::Job& job);
  // Each telemetry round: new metric lines, stall checks, anomaly actions.
  void OnRound();
  // A round's reading of metric lines is at most this many slices of the
  // intake's budget (MetricsIntake::Options), each in a turn of its own.
  static constexpr int kIntakeSlicesPerRound = 10;
  // End of turn, before the queue's: submits the jobs of nodes that became
  // ready and records finished runs.
  void EndOfTurn();
  // After the queue's own: once the turn's commit stored the runs created
  // in it, their folders are asked for. When it failed, the runs are read
  // back from the store, so that a run created (or a node moved) in that
  // turn is not shown or driven on (a full disk) and has no folder made;
  // ids are still never reused.
  void AfterCommit(bool committed);

 private:
  // A run in memory: its record, plan and nodes (PreparedRun), and what
  // driving it needs.
  struct Run : PreparedRun {
    std::map<int, std::string> stopped_by_anomaly;  // node → why a check is stopping its job
    // The objective's values of every node of a step with an early_stop
    // policy, in the order they were read (rebuilt from the store at Load).
    std::map<int, std::vector<pipeline::Observation>> objective_lines;
    // By step with an objective: whether a line held its metric, the names
    // lines held meanwhile, and whether the run was warned; by node, its
    // lines without the metric.
    std::set<std::string> objective_logged, objective_warned;
    std::map<std::string, std::set<std::string>> metric_names_seen;
    std::map<int, int> lines_without_objective;
    bool dirty = true;                             // NextActions may have news
    // Every folder of the run exists: its nodes may be submitted.
    bool folders_ready = false;
    // Which request to the folder worker this run waits for (an answer to
    // an older one, e.g. before a failed commit reloaded the runs, is stale).
    uint64_t folders_request = 0;
  };

  // A waiting node row for every node of the run's plan, and by_id.
  static void AddWaitingNodes(PreparedRun& run);
  // Raises next_id_ to at least `id` (thread-safe).
  void TakeIdsBelow(int64_t id);
  // Re-expands a stored run's file; the nodes are the stored ones.
  Result<Run> Rebuild(const store::PipelineRunRecord& record);
  Result<Run*> Find(int64_t id, const Caller& caller, bool act);
  // Asks the folder worker to make the run's folders; FoldersMade() is
  // posted back with the outcome.
  void MakeFolders(Run& run);
  void FoldersMade(int64_t id, uint64_t request, const Status& made);
  // A stored run not kept in memory (finished), for reading.
  Result<Run> Stored(int64_t id, const Caller& caller);
  void Drive(Run& run);
  // False when the owner's queue limit refused the job: the node keeps
  // waiting (see waiting_for_room_).
  bool Submit(Run& run, const pipeline::NodeAction& action);
  void FinishRun(Run& run, pipeline::Outcome outcome, const std::string& reason);
  void SaveNode(const Run& run, int node);
  void SaveRun(const Run& run);
  void Event(const Run& run, const std::string& kind, store::Severity severity, const std::string& message,
             nlohmann::json data = nlohmann::json::object());
  // Adds why an attempt of the node's job ended (a requeue, or an end that
  // is not a completion) to the node's history, with the last lines of its
  // standard error when it failed.
  void AddToHistory(store::PipelineNodeRecord& row, const sched::Job& job, const std::string& state);
  // Applies a job's final state to its node.
  void NodeJobFinished(Run& run, int node, const sched::Job& job);
  void ActOnAnomaly(const MetricsIntake::Found& found, bool may_act);
  // One slice of the metrics intake: new lines, stall checks, anomaly
  // actions, early stopping; posts the next slice while the intake is
  // behind and the round has slices left.
  void ReadMetrics();
  // Adds a stored metric line's objective value to its node's history when
  // the node's step has an early_stop policy; returns the node, or -1.
  // Until the objective's metric is seen in the step's lines, notes the
  // names they hold and, when `may_warn`, warns once that it is not logged
  // (see WarnIfObjectiveMissing).
  int TakeObjectiveLine(Run& run, const store::MetricRecord& row, bool may_warn = true);
  // A `pipeline.objective_missing` warning, once per step, when the node
  // logged lines (kLinesBeforeObjectiveWarning, or its job ended) and no line
  // of its step held the objective's metric.
  void WarnIfObjectiveMissing(Run& run, int node, bool ended, bool may_warn);
  // Stops the node's job when its step's policy says so (see early_stop.h).
  void CheckEarlyStop(Run& run, int node);
  void WatchMetrics(const sched::Job& job, bool catch_up);
  Caller Owner(const store::PipelineRunRecord& record) const;
  api::PipelineSummary Summary(const Run& run) const;
  api::PipelineDetail Detail(const Run& run);
  // The backend of a run (its file's, else the default) and of a job (by id).
  Result<JobBackend*> BackendOf(const Run& run) const;
  JobBackend* BackendOfJob(sched::JobId id) const;

  DaemonState* state_;
  std::vector<JobBackend*> backends_;
  std::string default_backend_;
  StateDir dir_;
  // The next run's id: taken by Prepare() on any thread.
  std::atomic<int64_t> next_id_{1};
  std::map<int64_t, Run> runs_;  // runs still going (and cancelled ones whose jobs still stop)
  // A pipeline job's run and node index.
  std::map<sched::JobId, std::pair<int64_t, int>> job_nodes_;
  MetricsIntake intake_;
  int intake_slices_left_ = 0;
  bool intake_slice_posted_ = false;
  bool dirty_ = false;  // some run needs driving
  bool waiting_for_room_ = false;
  // The running attempts of pipeline jobs: since when, on how many GPUs.
  struct Attempt {
    TimeMs started = 0;
    double gpus = 0;
    double GpuSecondsUntil(TimeMs end) const {
      return gpus * static_cast<double>(std::max<TimeMs>(end - started, 0)) / kSecondMs;
    }
  };
  std::map<sched::JobId, Attempt> running_attempts_;
  std::function<void(const alerts::AlertTransition&)> alert_sink_;
  // Firing anomaly alerts by job: resolved when the job's attempt ends.
  std::multimap<sched::JobId, alerts::Alert> anomaly_alerts_;  // a node waits for its owner's queue to have room
  PostToLoop post_;
  // Runs created in this turn: their folders are asked for after its commit.
  std::vector<int64_t> created_this_turn_;
  uint64_t next_folders_request_ = 1;
  // Set by the destructor: the worker stops between two folders.
  std::shared_ptr<std::atomic<bool>> closing_ = std::make_shared<std::atomic<bool>>(false);
  // Last: joined first, while the fields its tasks use still exist.
  std::unique_ptr<WorkQueue> folders_ = std::make_unique<WorkQueue>();
};

}  // namespace gpuherd::daemon
