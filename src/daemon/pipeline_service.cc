#include "daemon/pipeline_service.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/safe_file.h"
#include "core/owned_dirs.h"
#include "exec/as_user.h"
#include "pipeline/early_stop.h"
#include "pipeline/metric_line.h"
#include "pipeline/spec.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using pipeline::NodeState;
namespace fs = std::filesystem;

// How many runs GET /v1/pipelines?all=1 lists: the most recent.
constexpr int kMaxListedRuns = 1000;

// What a node's attempt history keeps: its latest entries, and of a failed
// attempt the last lines (each cut at 500 bytes) of its standard error.
constexpr size_t kMaxHistory = 20;
constexpr size_t kStderrTailLines = 20;
constexpr uint64_t kStderrTailBytes = 16 * 1024;

std::vector<std::string> LastLines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  size_t end = text.size();
  if (end > 0 && text[end - 1] == '\n') --end;
  while (lines.size() < count && end > 0) {
    const size_t start = text.rfind('\n', end - 1);
    const size_t begin = start == std::string::npos ? 0 : start + 1;
    lines.push_back(text.substr(begin, std::min<size_t>(end - begin, 500)));
    if (start == std::string::npos) break;
    end = start;
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

// An active node's stored reason while its job stops by early stopping.
constexpr std::string_view kStoppingEarly = "stopping early: ";

std::optional<NodeState> ParseNodeState(const std::string& name) {
  for (NodeState s : {NodeState::kWaiting, NodeState::kActive, NodeState::kCompleted, NodeState::kFailed,
                      NodeState::kCancelled, NodeState::kSkipped, NodeState::kStopped}) {
    if (name == pipeline::NodeStateName(s)) return s;
  }
  return std::nullopt;
}

std::vector<pipeline::NodeStatus> Statuses(const std::vector<store::PipelineNodeRecord>& rows) {
  std::vector<pipeline::NodeStatus> statuses;
  statuses.reserve(rows.size());
  for (const auto& r : rows) {
    statuses.push_back({ParseNodeState(r.state).value_or(NodeState::kFailed), r.attempts});
  }
  return statuses;
}

const char* RunStateFor(pipeline::Outcome outcome) {
  switch (outcome) {
    case pipeline::Outcome::kSucceeded: return "completed";
    case pipeline::Outcome::kFailed: return "failed";
    case pipeline::Outcome::kCancelled: return "cancelled";
  }
  return "failed";
}

// Lower is better for losses, errors and perplexities; higher for the rest
// (accuracies, rewards, throughput).
bool LowerIsBetter(const std::string& metric) {
  for (const char* word : {"loss", "err", "perplexity", "ppl"}) {
    if (metric.find(word) != std::string::npos) return true;
  }
  return false;
}

// The folders of a run: its own (<home>/pipelines/<id>), its checkpoint
// folder, and each node's workspace, artifact and checkpoint folders,
// parents first.
std::vector<std::string> RunFolders(const pipeline::Plan& plan) {
  const std::string& run = plan.run_dir;
  std::vector<std::string> folders = {run, run + "/.checkpoints"};
  folders.reserve(2 + plan.nodes.size() * 4);
  for (const pipeline::PlanNode& n : plan.nodes) {
    if (n.key != n.step) folders.push_back(run + "/" + n.step);
    folders.push_back(run + "/" + n.key);
    for (const std::string& a : n.artifacts) folders.push_back(run + "/" + a);
    if (n.key != n.step) folders.push_back(run + "/.checkpoints/" + n.step);
    // Made here as the run's user: the launcher makes only folders that sit
    // directly in a folder root alone writes (exec/job_trees.h).
    folders.push_back(run + "/.checkpoints/" + n.key);
  }
  return folders;
}

// Runs on the folder worker. The run's folder is made in pipelines/ (only
// root writes there) and handed to the run's owner; everything inside it is
// the owner's and is made by a process that is the owner (exec/job_trees.h,
// rule 3), the jobs of the run run as that user and write there.
Status MakeRunFolders(const std::string& pipelines, const std::vector<std::string>& folders, const DirOwner& owner,
                      const std::atomic<bool>& closing) {
  std::error_code ec;
  fs::create_directories(pipelines, ec);
  fs::permissions(pipelines, fs::perms(0711), ec);
  if (folders.empty()) return Status::Ok();
  const std::string& run = folders.front();
  GPUHERD_RETURN_IF_ERROR(MakeDirsBeneath(pipelines, run, owner));
  if (closing) return Unavailable("the daemon stopped before the run's folders were made");
  std::vector<std::string> inside;
  for (size_t i = 1; i < folders.size(); ++i) {
    if (folders[i].size() <= run.size() + 1 || folders[i].compare(0, run.size() + 1, run + "/") != 0) {
      return Internal("the folder " + folders[i] + " is not inside the run's folder " + run);
    }
    inside.push_back(folders[i].substr(run.size() + 1));
  }
  return exec::MakeDirsAsUser(run, inside, exec::UserFor(owner.uid, owner.gid));
}

}  // namespace

PipelineService::PipelineService(DaemonState* state, std::vector<JobBackend*> backends, std::string default_backend,
                                 StateDir dir, PostToLoop post)
    : state_(state),
      backends_(std::move(backends)),
      default_backend_(std::move(default_backend)),
      dir_(std::move(dir)),
      post_(std::move(post)) {}

PipelineService::~PipelineService() {
  *closing_ = true;
  folders_.reset();  // joins the worker before the rest goes
}

void PipelineService::MakeFolders(Run& run) {
  run.folders_ready = false;
  run.folders_request = next_folders_request_++;
  const std::string pipelines = dir_.root + "/pipelines";
  // Listing the folders is cheap; making them (a syscall or three each, and
  // a chown when the daemon is root) is the worker's.
  const DirOwner owner{static_cast<uint32_t>(run.record.uid), static_cast<uint32_t>(run.record.gid)};
  folders_->Post([pipelines, folders = RunFolders(run.plan), owner, id = run.record.id, request = run.folders_request,
                  closing = closing_, post = post_, this] {
    Status made = MakeRunFolders(pipelines, folders, owner, *closing);
    if (*closing) return;  // the service is going: the next Load() makes them
    post([this, id, request, made] { FoldersMade(id, request, made); });
  });
}

void PipelineService::FoldersMade(int64_t id, uint64_t request, const Status& made) {
  auto it = runs_.find(id);
  // Cancelled (and gone) meanwhile, or asked again since (a failed commit
  // read the runs back): this answer is stale.
  if (it == runs_.end() || it->second.folders_request != request) return;
  Run& run = it->second;
  if (made.ok()) {
    run.folders_ready = true;
    run.dirty = true;
    dirty_ = true;
    return;
  }
  spdlog::warn("pipeline {}: cannot make its folders: {}", id, made.ToString());
  if (run.record.state != "running") return;  // cancelled meanwhile: nothing to fail
  const std::string why = "the run's folders could not be made: " + made.message();
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    store::PipelineNodeRecord& row = run.nodes[i];
    if (row.state != pipeline::NodeStateName(NodeState::kWaiting)) continue;
    row.state = pipeline::NodeStateName(NodeState::kSkipped);
    row.reason = why;
    row.ended = state_->clock->Now();
    SaveNode(run, static_cast<int>(i));
  }
  FinishRun(run, pipeline::Outcome::kFailed, why);
  run.dirty = true;
  dirty_ = true;  // EndOfTurn lets the run go once no node is active
}

Result<JobBackend*> PipelineService::BackendOf(const Run& run) const {
  const std::string& name = run.plan.backend.name.empty() ? default_backend_ : run.plan.backend.name;
  for (JobBackend* b : backends_) {
    if (b->name() == name) return b;
  }
  return FailedPrecondition(fmt::format("this daemon has no '{}' backend{}", name,
                                        name == "slurm" ? " (start it with --slurm-shared-dir DIR)" : ""));
}

JobBackend* PipelineService::BackendOfJob(sched::JobId id) const {
  for (JobBackend* b : backends_) {
    if (b->Owns(id)) return b;
  }
  return nullptr;
}

Caller PipelineService::Owner(const store::PipelineRunRecord& record) const {
  Caller c;
  c.uid = record.uid;
  c.gid = record.gid;
  c.user = record.user;
  c.authenticated = true;
  return c;
}

void PipelineService::Event(const Run& run, const std::string& kind, store::Severity severity,
                            const std::string& message, json data) {
  store::EventRecord ev;
  ev.time = state_->clock->Now();
  ev.kind = kind;
  ev.severity = severity;
  ev.message = fmt::format("pipeline {} ({}): {}", run.record.id, run.record.name, message);
  data["run"] = run.record.id;
  ev.data_json = data.dump(-1, ' ', false, json::error_handler_t::replace);
  state_->batch.events.push_back(std::move(ev));
}

void PipelineService::SaveNode(const Run& run, int node) { state_->batch.pipeline_nodes.push_back(run.nodes[node]); }

void PipelineService::SaveRun(const Run& run) { state_->batch.pipeline_runs.push_back(run.record); }

void PipelineService::AddWaitingNodes(PreparedRun& run) {
  for (size_t i = 0; i < run.plan.nodes.size(); ++i) {
    const pipeline::PlanNode& n = run.plan.nodes[i];
    store::PipelineNodeRecord row;
    row.run_id = run.record.id;
    row.node_id = n.id;
    row.key = n.key;
    row.step = n.step;
    row.state = pipeline::NodeStateName(NodeState::kWaiting);
    run.nodes.push_back(std::move(row));
    run.by_id[n.id] = static_cast<int>(i);
  }
}

Result<PipelineService::Run> PipelineService::Rebuild(const store::PipelineRunRecord& record) {
  auto spec = pipeline::ParsePipeline(record.yaml, record.source_path);
  if (!spec.ok()) return spec.status().Annotate(fmt::format("stored pipeline run {} no longer parses", record.id));
  spec->base_dir = record.base_dir;
  std::map<std::string, std::string> overrides;
  json stored = json::parse(record.overrides_json, nullptr, false);
  if (stored.is_object()) {
    for (const auto& [k, v] : stored.items()) overrides[k] = v.is_string() ? v.get<std::string>() : v.dump();
  }
  auto plan = pipeline::Expand(*spec, overrides, record.run_dir);
  if (!plan.ok()) return plan.status().Annotate(fmt::format("stored pipeline run {} no longer expands", record.id));
  Run run;
  run.record = record;
  run.plan = std::move(plan).value();
  AddWaitingNodes(run);
  auto rows = state_->store->ListPipelineNodes(record.id);
  if (!rows.ok()) return rows.status();
  for (auto& row : *rows) {
    auto it = run.by_id.find(row.node_id);
    if (it != run.by_id.end()) run.nodes[it->second] = std::move(row);
  }
  return run;
}

void PipelineService::TakeIdsBelow(int64_t id) {
  int64_t next = next_id_.load();
  while (next < id && !next_id_.compare_exchange_weak(next, id)) {
  }
}

void PipelineService::AfterCommit(bool committed) {
  std::vector<int64_t> created = std::move(created_this_turn_);
  created_this_turn_.clear();
  if (committed) {
    for (int64_t id : created) {
      if (auto it = runs_.find(id); it != runs_.end()) MakeFolders(it->second);
    }
    return;
  }
  // The runs created in the failed turn are not in the store: reading the
  // runs back drops them, before any of their folders was made. Their ids
  // stay taken (Load() never lowers next_id_).
  runs_.clear();
  job_nodes_.clear();
  if (Status s = Load(); !s.ok()) spdlog::error("cannot read the pipeline runs back after a failed commit: {}", s.ToString());
  dirty_ = true;
}

Status PipelineService::Load() {
  auto last = state_->store->LastPipelineRunId();
  if (!last.ok()) return last.status();
  TakeIdsBelow(*last + 1);
  auto records = state_->store->ListPipelineRuns(false, INT_MAX);
  if (!records.ok()) return records.status();
  for (const auto& record : *records) {
    auto rebuilt = Rebuild(record);
    if (!rebuilt.ok()) {
      // The run cannot go on, but the daemon can: it is marked failed.
      spdlog::error("{}", rebuilt.status().ToString());
      Run broken;
      broken.record = record;
      broken.record.state = "failed";
      broken.record.outcome = pipeline::OutcomeName(pipeline::Outcome::kFailed);
      broken.record.finished = state_->clock->Now();
      SaveRun(broken);
      Event(broken, "pipeline.finished", store::Severity::kWarning, rebuilt.status().message());
      continue;
    }
    Run& run = runs_.emplace(record.id, std::move(rebuilt).value()).first->second;
    // Made again: the daemon may have stopped before they all were. Until
    // then the run submits nothing; its running jobs carry on.
    MakeFolders(run);
    if (!run.plan.objectives.empty()) {
      auto lines = state_->store->ListRunMetrics(record.id, "");
      if (!lines.ok()) return lines.status();
      for (const store::MetricRecord& line : *lines) TakeObjectiveLine(run, line, /*may_warn=*/false);
    }
    for (size_t i = 0; i < run.nodes.size(); ++i) {
      store::PipelineNodeRecord& row = run.nodes[i];
      if (row.state != pipeline::NodeStateName(NodeState::kActive)) continue;
      job_nodes_[row.job_id] = {record.id, static_cast<int>(i)};
      // Ended while this daemon was not looking (for the local queue its
      // record and the node's are written in one transaction, so this is
      // rare): applied now.
      JobBackend* backend = BackendOfJob(row.job_id);
      std::optional<sched::Job> ended;
      if (!backend) {
        ended = sched::Job{};
        ended->id = row.job_id;
        ended->state = sched::JobState::kFailed;
        ended->reason = fmt::format("job {} belongs to no backend of this daemon", row.job_id);
      } else {
        auto recovered = backend->Recover(row.job_id);
        if (!recovered.ok()) return recovered.status();
        ended = std::move(recovered).value();
      }
      if (!ended) continue;
      job_nodes_.erase(row.job_id);
      NodeJobFinished(run, static_cast<int>(i), *ended);
    }
  }
  auto unfinished = state_->store->ListUnfinishedJobs();
  if (!unfinished.ok()) return unfinished.status();
  for (const auto& r : *unfinished) {
    if (r.state != "running" && r.state != "stopping") continue;
    sched::Job job;
    job.id = r.id;
    job.attempt = r.attempt;
    job.state = sched::JobState::kRunning;
    WatchMetrics(job, /*catch_up=*/true);
  }
  dirty_ = true;
  return Status::Ok();
}

Result<PipelineService::PreparedRun> PipelineService::Prepare(const api::PipelineCreateRequest& request,
                                                              const Caller& caller) {
  if (!caller.authenticated) return Unauthenticated("running a pipeline needs the unix socket or the API token");
  const std::string& base_dir = request.base_dir;
  if (!base_dir.empty() && !fs::path(base_dir).is_absolute()) {
    return InvalidArgument("base_dir must be an absolute folder (the pipeline file's), got '" + base_dir + "'");
  }
  auto spec = pipeline::ParsePipeline(request.yaml, request.source);
  if (!spec.ok()) return spec.status();
  spec->base_dir = base_dir;
  const int64_t id = next_id_.fetch_add(1);
  auto plan = pipeline::Expand(*spec, request.params, fmt::format("{}/pipelines/{}", dir_.root, id));
  if (!plan.ok()) {
    // Refused: the id is given back unless another run took one since.
    int64_t after = id + 1;
    next_id_.compare_exchange_strong(after, id);
    return plan.status();
  }
  PreparedRun run;
  store::PipelineRunRecord& record = run.record;
  record.id = id;
  record.name = plan->name;
  record.source_path = request.source;
  record.base_dir = base_dir;
  record.yaml = request.yaml;
  record.overrides_json = json(request.params).dump();
  record.run_dir = plan->run_dir;
  record.state = "running";
  record.user = caller.user;
  record.uid = caller.uid;
  record.gid = caller.gid;
  run.plan = std::move(plan).value();
  AddWaitingNodes(run);
  return run;
}

Result<api::PipelineCreated> PipelineService::Create(PreparedRun prepared, const Caller& caller) {
  if (!caller.authenticated) return Unauthenticated("running a pipeline needs the unix socket or the API token");
  const int64_t id = prepared.record.id;
  if (runs_.count(id)) return Internal(fmt::format("pipeline run {} exists already", id));
  Run run;
  static_cast<PreparedRun&>(run) = std::move(prepared);
  run.record.created = state_->clock->Now();
  SaveRun(run);
  state_->batch.pipeline_nodes.insert(state_->batch.pipeline_nodes.end(), run.nodes.begin(), run.nodes.end());
  Event(run, "pipeline.created", store::Severity::kInfo,
        fmt::format("{} nodes from {}, run by {}, in {}", run.nodes.size(), run.record.source_path, caller.user,
                    run.record.run_dir));
  const size_t count = run.nodes.size();
  // Driven once its folders are made (FoldersMade), which AfterCommit asks
  // for when this turn's commit has stored it.
  runs_.emplace(id, std::move(run));
  created_this_turn_.push_back(id);
  return api::PipelineCreated{id, count};
}

Result<api::PipelineCreated> PipelineService::Create(const api::PipelineCreateRequest& request,
                                                     const Caller& caller) {
  auto prepared = Prepare(request, caller);
  if (!prepared.ok()) return prepared.status();
  return Create(std::move(prepared).value(), caller);
}

void PipelineService::Drive(Run& run) {
  if (!run.folders_ready) return;  // FoldersMade() sets it dirty again
  run.dirty = false;
  if (run.record.state != "running") return;  // cancelled: its jobs are stopping
  for (bool again = true; again;) {
    again = false;
    const std::vector<pipeline::NodeAction> actions = pipeline::NextActions(run.plan, Statuses(run.nodes));
    for (const pipeline::NodeAction& a : actions) {
      switch (a.kind) {
        case pipeline::NodeAction::Kind::kSubmit:
        case pipeline::NodeAction::Kind::kRetry:
          if (!Submit(run, a)) return;  // at the owner's queue limit: later nodes would be refused too
          // A refused submission fails the node, which NextActions may
          // retry or skip past: ask again.
          again = again || run.nodes[a.node].state != pipeline::NodeStateName(NodeState::kActive);
          break;
        case pipeline::NodeAction::Kind::kSkip: {
          store::PipelineNodeRecord& row = run.nodes[a.node];
          row.state = pipeline::NodeStateName(NodeState::kSkipped);
          row.reason = a.reason;
          row.ended = state_->clock->Now();
          SaveNode(run, a.node);
          break;
        }
        case pipeline::NodeAction::Kind::kFinish:
          FinishRun(run, a.outcome, a.reason);
          return;
      }
    }
  }
}

bool PipelineService::Submit(Run& run, const pipeline::NodeAction& action) {
  const pipeline::PlanNode& node = run.plan.nodes[action.node];
  store::PipelineNodeRecord& row = run.nodes[action.node];
  // The plan's spec was checked as POST /v1/jobs checks a spec when the plan
  // was expanded; the backend may still refuse it, like a refused job.
  Result<sched::JobSpec> spec = pipeline::JobSpecFor(run.plan, action);
  // A node retried by a person starts again from its checkpoint too.
  if (spec.ok() && row.attempts > 0) spec->env["GPUHERD_RESUME"] = "1";
  // Which parameters the point runs: told to its job, which is the user and
  // may write them into its folder (a params.json), since root writes
  // nothing inside a folder the user owns (exec/job_trees.h); the folder's
  // name stays its index, the key that resume and the store rely on.
  if (spec.ok()) {
    spec->env["GPUHERD_NODE"] = node.id;
    spec->env["GPUHERD_PARAMS"] = api::PointParamsJson(node.matrix);
  }
  SubmitExtras extras;
  extras.checkpoint_dir = node.checkpoint_dir;
  extras.prior_attempts = action.attempt - 1;
  auto backend = BackendOf(run);
  Result<sched::JobId> id = !spec.ok()      ? Result<sched::JobId>(spec.status())
                             : backend.ok() ? (*backend)->Submit(*spec, Owner(run.record), extras, run.plan.backend)
                                            : Result<sched::JobId>(backend.status());
  if (!id.ok() && id.status().code() == Code::kResourceExhausted) {
    // The owner's queue is full: the node waits, unchanged, and is tried
    // again once one of the owner's jobs has ended.
    const std::string reason = "waits for room in the queue: " + id.status().message();
    if (row.reason != reason) {
      row.reason = reason;
      SaveNode(run, action.node);
    }
    waiting_for_room_ = true;
    return false;
  }
  row.attempts = action.attempt;
  row.started = 0;
  row.ended = 0;
  if (!id.ok()) {
    row.state = pipeline::NodeStateName(NodeState::kFailed);
    row.reason = "its job was refused: " + id.status().message();
    row.ended = state_->clock->Now();
    Event(run, "pipeline.node_failed", store::Severity::kWarning, fmt::format("{}: {}", node.id, row.reason),
          {{"node", node.id}});
  } else {
    row.state = pipeline::NodeStateName(NodeState::kActive);
    row.job_id = *id;
    row.reason = action.reason;
    job_nodes_[*id] = {run.record.id, action.node};
  }
  SaveNode(run, action.node);
  return true;
}

void PipelineService::FinishRun(Run& run, pipeline::Outcome outcome, const std::string& reason) {
  run.record.state = RunStateFor(outcome);
  run.record.outcome = pipeline::OutcomeName(outcome);
  run.record.finished = state_->clock->Now();
  SaveRun(run);
  Event(run, "pipeline.finished",
        outcome == pipeline::Outcome::kSucceeded ? store::Severity::kInfo : store::Severity::kWarning,
        fmt::format("{}: {}", run.record.outcome, reason), {{"outcome", run.record.outcome}});
}

void PipelineService::NodeJobFinished(Run& run, int node, const sched::Job& job) {
  store::PipelineNodeRecord& row = run.nodes[node];
  std::string early_stop_reason;
  if (row.reason.starts_with(kStoppingEarly)) early_stop_reason = row.reason.substr(kStoppingEarly.size());
  row.ended = job.ended > 0 ? job.ended : state_->clock->Now();
  row.reason = job.reason;
  NodeState state = NodeState::kFailed;
  if (job.state == sched::JobState::kCompleted) state = NodeState::kCompleted;
  if (job.state == sched::JobState::kCancelled) state = NodeState::kCancelled;
  // A job stopped by an anomaly check failed; like any failure it may be
  // retried. One cancelled by a person ends its node.
  if (auto stopped = run.stopped_by_anomaly.find(node); stopped != run.stopped_by_anomaly.end()) {
    if (state == NodeState::kCancelled) {
      state = NodeState::kFailed;
      row.reason = "stopped by an anomaly check: " + stopped->second;
    }
    run.stopped_by_anomaly.erase(stopped);
  }
  // Stopped by its step's early_stop policy (the intent is in the node's
  // stored reason, so it survives a daemon restart): a result, not a
  // failure. A point that completed within its grace period keeps that.
  if (!early_stop_reason.empty() && state != NodeState::kCompleted) {
    state = NodeState::kStopped;
    // Stored by an older daemon: the bare rung and rank.
    row.reason = early_stop_reason.starts_with("stopped early") ? early_stop_reason
                                                                : "stopped early: " + early_stop_reason;
  }
  WarnIfObjectiveMissing(run, node, /*ended=*/true, /*may_warn=*/true);
  row.state = pipeline::NodeStateName(state);
  if (state != NodeState::kCompleted) AddToHistory(row, job, row.state);
  SaveNode(run, node);
  run.dirty = true;
  dirty_ = true;
}

void PipelineService::WatchMetrics(const sched::Job& job, bool catch_up) {
  MetricsIntake::Source source;
  source.job_id = job.id;
  source.attempt = job.attempt;
  JobBackend* backend = BackendOfJob(job.id);
  source.path = backend ? backend->MetricsPath(job.id) : std::string();
  if (auto it = job_nodes_.find(job.id); it != job_nodes_.end()) {
    auto run = runs_.find(it->second.first);
    if (run != runs_.end()) {
      const int node = it->second.second;
      source.run_id = run->first;
      source.node_id = run->second.plan.nodes[node].id;
      source.attempt = std::max(1, run->second.nodes[node].attempts) - 1 + job.attempt;
      source.anomalies = run->second.plan.nodes[node].anomalies;
      // Thinning keeps what early stopping and the report read.
      const pipeline::Plan& plan = run->second.plan;
      const std::string& step = plan.nodes[node].step;
      if (auto o = plan.objectives.find(step); o != plan.objectives.end()) source.objective = o->second;
      if (auto e = plan.early_stops.find(step); e != plan.early_stops.end()) source.early_stop = e->second;
    }
  }
  intake_.Watch(source, catch_up);
}

void PipelineService::OnJobChanged(const sched::Job& job) {
  const TimeMs now = state_->clock->Now();
  if (job.state == sched::JobState::kRunning) {
    WatchMetrics(job, /*catch_up=*/false);
  } else if (intake_.watching(job.id)) {
    // The attempt is over: what it wrote last is read now. The job is gone
    // or waiting, so anomalies found now are recorded but not acted on.
    // What a flooding job left unread is read by the next rounds.
    std::vector<MetricsIntake::Found> found;
    intake_.Poll(now, job.id, &state_->batch.metrics, &found);
    for (const auto& f : found) ActOnAnomaly(f, /*may_act=*/false);
    intake_.EndAttempt(job.id, sched::IsFinal(job.state), &state_->batch.metrics);
    intake_.TakeChangedCounts(now, &state_->batch.metric_intake);
  }

  if (job.state != sched::JobState::kRunning && job.state != sched::JobState::kStopping) {
    auto [from, to] = anomaly_alerts_.equal_range(job.id);
    for (auto it = from; it != to; ++it) {
      alerts::Alert a = it->second;
      a.state = alerts::AlertState::kResolved;
      a.resolved_at = now;
      if (alert_sink_) alert_sink_({alerts::AlertState::kFiring, alerts::AlertState::kResolved, now, a});
    }
    anomaly_alerts_.erase(from, to);
  }
  if (waiting_for_room_ && sched::IsFinal(job.state)) {
    // Any job's end may make room in its owner's queue: every run tries again.
    waiting_for_room_ = false;
    for (auto& [id, r] : runs_) r.dirty = true;
    dirty_ = true;
  }
  auto mapped = job_nodes_.find(job.id);
  if (mapped == job_nodes_.end()) return;
  auto run = runs_.find(mapped->second.first);
  if (run == runs_.end()) {
    job_nodes_.erase(mapped);
    return;
  }
  const int node = mapped->second.second;
  store::PipelineNodeRecord& row = run->second.nodes[node];
  if (job.state != sched::JobState::kRunning && job.state != sched::JobState::kStopping) {
    // An attempt is over (requeued or finished): its GPU time counts.
    if (auto attempt = running_attempts_.find(job.id); attempt != running_attempts_.end()) {
      row.gpu_seconds += attempt->second.GpuSecondsUntil(job.ended > attempt->second.started ? job.ended : now);
      running_attempts_.erase(attempt);
    }
  }
  if (job.state == sched::JobState::kRunning) {
    running_attempts_[job.id] = {job.started, static_cast<double>(job.spec.gpu_twentieths) / sched::kTwentiethsPerGpu};
    row.started = job.started;
    row.reason.clear();
    SaveNode(run->second, node);
  } else if (sched::IsFinal(job.state)) {
    job_nodes_.erase(mapped);
    NodeJobFinished(run->second, node, job);
  } else {
    row.reason = job.reason;  // requeued: it will resume from its checkpoint
    AddToHistory(row, job, "requeued");
    SaveNode(run->second, node);
  }
}

void PipelineService::AddToHistory(store::PipelineNodeRecord& row, const sched::Job& job, const std::string& state) {
  json history = json::parse(row.history_json, nullptr, false);
  if (!history.is_array()) history = json::array();
  json entry = {{"job", job.id},
                {"attempt", job.attempt},
                {"ended", job.ended > 0 ? job.ended : state_->clock->Now()},
                {"state", state},
                {"reason", job.reason}};
  if (state == "failed" && job.id > 0 && job.attempt > 0) {
    // The job wrote its stderr as its user: read without following links,
    // and only its last bytes.
    const std::string relative = fmt::format("{}/{}/stderr", job.id, job.attempt);
    const std::string jobs = dir_.root + "/jobs";
    if (auto head = ReadBeneath(jobs, relative, 0, 0); head.ok()) {
      const uint64_t from = head->size > kStderrTailBytes ? head->size - kStderrTailBytes : 0;
      if (auto tail = ReadBeneath(jobs, relative, from, kStderrTailBytes); tail.ok()) {
        entry["stderr_tail"] = LastLines(tail->data, kStderrTailLines);
      }
    }
  }
  history.push_back(std::move(entry));
  // A node that keeps failing keeps its latest ends.
  while (history.size() > kMaxHistory) history.erase(history.begin());
  row.history_json = history.dump(-1, ' ', false, json::error_handler_t::replace);
}

void PipelineService::ActOnAnomaly(const MetricsIntake::Found& found, bool may_act) {
  auto run = runs_.find(found.run_id);
  if (run == runs_.end()) return;
  const pipeline::Anomaly& a = found.anomaly;
  const char* action = pipeline::AnomalyActionName(may_act ? a.action : pipeline::AnomalyAction::kNone);
  Event(run->second, "pipeline.anomaly", store::Severity::kWarning,
        fmt::format("{} (job {}): {}; action: {}", found.node_id, found.job_id, a.message, action),
        {{"node", found.node_id},
         {"job", found.job_id},
         {"kind", pipeline::AnomalyKindName(a.kind)},
         {"metric", a.metric},
         {"value", a.value},
         {"threshold", a.threshold},
         {"action", action}});
  if (!may_act) return;
  if (alert_sink_) {
    alerts::Alert alert;
    alert.rule = std::string("pipeline_") + pipeline::AnomalyKindName(a.kind);
    alert.subject = fmt::format("pipeline {} node {} (job {})", found.run_id, found.node_id, found.job_id);
    alert.state = alerts::AlertState::kFiring;
    alert.pending_since = alert.fired_at = state_->clock->Now();
    alert.value = a.value;
    alert.severity = store::Severity::kWarning;
    alert.action = alerts::Action::kNotify;  // the anomaly's own action is taken below
    alert.summary = fmt::format("{}; action: {}", a.message, action);
    alert_sink_({alerts::AlertState::kInactive, alerts::AlertState::kFiring, alert.fired_at, alert});
    anomaly_alerts_.emplace(found.job_id, alert);
  }
  auto mapped = job_nodes_.find(found.job_id);
  if (mapped == job_nodes_.end()) return;  // no longer the node's job
  const Caller owner = Owner(run->second.record);
  JobBackend* backend = BackendOfJob(found.job_id);
  if (!backend) return;
  Status done = Status::Ok();
  switch (a.action) {
    case pipeline::AnomalyAction::kNone:
      break;
    case pipeline::AnomalyAction::kCheckpoint:
      done = backend->Signal(found.job_id, SIGUSR1);
      break;
    case pipeline::AnomalyAction::kStop:
      run->second.stopped_by_anomaly[mapped->second.second] = a.message;
      done = backend->Act(found.job_id, "cancel", owner).status();
      break;
    case pipeline::AnomalyAction::kRestart:
      done = backend->Act(found.job_id, "requeue", owner).status();
      break;
  }
  if (!done.ok()) spdlog::warn("pipeline {}: cannot {} job {}: {}", found.run_id, action, found.job_id, done.message());
}

void PipelineService::OnRound() {
  intake_slices_left_ = kIntakeSlicesPerRound;
  ReadMetrics();
}

void PipelineService::ReadMetrics() {
  --intake_slices_left_;
  const TimeMs now = state_->clock->Now();
  std::vector<MetricsIntake::Found> found;
  const size_t before = state_->batch.metrics.size();
  intake_.Poll(now, 0, &state_->batch.metrics, &found);
  for (auto& f : intake_.Tick(now)) found.push_back(std::move(f));
  for (const auto& f : found) ActOnAnomaly(f, /*may_act=*/!f.after_end);
  intake_.TakeChangedCounts(now, &state_->batch.metric_intake);
  std::set<std::pair<int64_t, std::string>> news;  // (run, step) with new objective values
  for (size_t i = before; i < state_->batch.metrics.size(); ++i) {
    const store::MetricRecord& row = state_->batch.metrics[i];
    auto run = runs_.find(row.run_id);
    if (run == runs_.end()) continue;
    if (int node = TakeObjectiveLine(run->second, row); node >= 0) {
      news.insert({row.run_id, run->second.plan.nodes[node].step});
    }
  }
  // A new value at a rung may rank any running point of the step out of
  // its rung's top, not only the one that logged it.
  for (const auto& [id, step] : news) {
    Run& run = runs_.at(id);
    for (size_t i = 0; i < run.plan.nodes.size(); ++i) {
      if (run.plan.nodes[i].step == step) CheckEarlyStop(run, static_cast<int>(i));
    }
  }
  // A flood is read in further slices of a round's budget, each its own
  // turn, so that requests queued meanwhile are answered between them; a
  // job that floods without end costs at most kIntakeSlicesPerRound slices
  // per round.
  if (intake_.behind() && intake_slices_left_ > 0 && !intake_slice_posted_ && post_) {
    intake_slice_posted_ = true;
    post_([this] {
      intake_slice_posted_ = false;
      ReadMetrics();
    });
  }
}

int PipelineService::TakeObjectiveLine(Run& run, const store::MetricRecord& row, bool may_warn) {
  auto node = run.by_id.find(row.node_id);
  if (node == run.by_id.end()) return -1;
  const std::string& step = run.plan.nodes[node->second].step;
  auto objective = run.plan.objectives.find(step);
  if (objective == run.plan.objectives.end()) return -1;
  const bool early = run.plan.early_stops.count(step) > 0;
  const bool watching = !run.objective_logged.count(step) && !run.objective_warned.count(step);
  if (!early && !watching) return -1;
  const json line = json::parse(row.line_json, nullptr, false);
  const std::optional<double> value = pipeline::MetricValue(line, objective->second.metric);
  if (watching && value) {
    run.objective_logged.insert(step);
  } else if (watching && line.is_object()) {
    for (const auto& [name, v] : line.items()) {
      if (name != "step" && name != "time") run.metric_names_seen[step].insert(name);
    }
    ++run.lines_without_objective[node->second];
    // Lines read after the job ended (the intake's last read) count as its end.
    const bool ended = run.nodes[node->second].state != pipeline::NodeStateName(NodeState::kActive);
    WarnIfObjectiveMissing(run, node->second, ended, may_warn);
  }
  if (!early || !row.step || !value) return -1;
  run.objective_lines[node->second].push_back({*row.step, *value, row.time});
  return node->second;
}

// A job may log its objective less often than its other metrics (a
// validation loss every few hundred steps): a few lines without it are not
// yet a misspelling.
constexpr int kLinesBeforeObjectiveWarning = 20;

void PipelineService::WarnIfObjectiveMissing(Run& run, int node, bool ended, bool may_warn) {
  const std::string& step = run.plan.nodes[node].step;
  auto objective = run.plan.objectives.find(step);
  if (objective == run.plan.objectives.end() || run.objective_logged.count(step) ||
      run.objective_warned.count(step)) {
    return;
  }
  auto lines = run.lines_without_objective.find(node);
  if (lines == run.lines_without_objective.end() || (!ended && lines->second < kLinesBeforeObjectiveWarning)) return;
  run.objective_warned.insert(step);
  // Read again at a restart: warned before, not again.
  if (!may_warn) return;
  const std::string text =
      pipeline::ObjectiveNotLogged(objective->second.metric, false, run.metric_names_seen[step]);
  Event(run, "pipeline.objective_missing", store::Severity::kWarning,
        fmt::format("step {}: {} (by {})", step, text, run.nodes[node].node_id),
        {{"step", step}, {"metric", objective->second.metric}, {"node", run.nodes[node].node_id}});
}

void PipelineService::CheckEarlyStop(Run& run, int node) {
  store::PipelineNodeRecord& row = run.nodes[node];
  if (row.state != pipeline::NodeStateName(NodeState::kActive) || row.reason.starts_with(kStoppingEarly)) return;
  if (!job_nodes_.count(row.job_id)) return;
  const std::string& step = run.plan.nodes[node].step;
  const pipeline::EarlyStopPolicy& policy = run.plan.early_stops.at(step);
  const pipeline::Objective& objective = run.plan.objectives.at(step);
  // Every point of the step, this one at `me`.
  std::vector<pipeline::PointHistory> points;
  size_t me = 0;
  for (size_t i = 0; i < run.plan.nodes.size(); ++i) {
    if (run.plan.nodes[i].step != step) continue;
    if (static_cast<int>(i) == node) me = points.size();
    pipeline::PointHistory h;
    h.point = static_cast<int>(i);
    if (auto lines = run.objective_lines.find(static_cast<int>(i)); lines != run.objective_lines.end()) {
      h.values = lines->second;
    }
    h.completed = run.nodes[i].state == pipeline::NodeStateName(NodeState::kCompleted);
    points.push_back(std::move(h));
  }
  const pipeline::StopDecision decision = pipeline::DecideEarlyStop(policy, objective.mode, points, me);
  if (!decision.stop) return;
  const std::string stopped = pipeline::StoppedEarlyText(policy.kind, decision, objective.metric);
  row.reason = std::string(kStoppingEarly) + stopped;
  SaveNode(run, node);
  Event(run, "pipeline.early_stop", store::Severity::kInfo,
        fmt::format("{} (job {}) {}: {}", row.node_id, row.job_id, stopped, decision.reason),
        {{"node", row.node_id}, {"job", row.job_id}, {"step", decision.at_step}});
  JobBackend* backend = BackendOfJob(row.job_id);
  if (!backend) return;
  // A cancel is SIGTERM, the checkpoint grace, then SIGKILL: the point
  // checkpoints and its GPU is free as soon as it exits.
  Status done = backend->Act(row.job_id, "cancel", Owner(run.record), stopped).status();
  if (!done.ok()) spdlog::warn("pipeline {}: cannot stop job {} early: {}", run.record.id, row.job_id, done.message());
}

void PipelineService::EndOfTurn() {
  if (!dirty_) return;
  dirty_ = false;
  for (auto it = runs_.begin(); it != runs_.end();) {
    Run& run = it->second;
    if (run.dirty) Drive(run);
    bool active = false;
    for (const auto& row : run.nodes) active = active || row.state == pipeline::NodeStateName(NodeState::kActive);
    // Finished (or cancelled with every job stopped): served from the store.
    it = run.record.state != "running" && !active ? runs_.erase(it) : std::next(it);
  }
}

Result<PipelineService::Run*> PipelineService::Find(int64_t id, const Caller& caller, bool act) {
  auto it = runs_.find(id);
  const store::PipelineRunRecord* record = it == runs_.end() ? nullptr : &it->second.record;
  std::optional<store::PipelineRunRecord> stored;
  if (!record) {
    auto got = state_->store->GetPipelineRun(id);
    if (!got.ok()) return got.status();
    stored = std::move(got).value();
    if (stored) record = &*stored;
  }
  const bool visible = record && (caller.admin || (caller.authenticated && caller.uid == record->uid));
  if (!visible) return NotFound(fmt::format("no pipeline run {} of yours; `gpuherd pipelines --all` lists them", id));
  if (act && !caller.MayActOn(record->uid)) {
    return PermissionDenied(fmt::format("pipeline run {} belongs to {}", id, record->user));
  }
  return it == runs_.end() ? nullptr : &it->second;
}

Result<PipelineService::Run> PipelineService::Stored(int64_t id, const Caller& caller) {
  auto found = Find(id, caller, false);
  if (!found.ok()) return found.status();
  auto record = state_->store->GetPipelineRun(id);
  if (!record.ok()) return record.status();
  if (!record->has_value()) return NotFound(fmt::format("no pipeline run {}", id));
  return Rebuild(**record);
}

api::PipelineSummary PipelineService::Summary(const Run& run) const {
  api::PipelineSummary v;
  v.id = run.record.id;
  v.name = run.record.name;
  v.state = run.record.state;
  v.outcome = run.record.outcome;
  v.created = run.record.created;
  v.finished = run.record.finished;
  v.user = run.record.user;
  v.source = run.record.source_path;
  v.node_counts = {{"completed", 0}, {"failed", 0},    {"running", 0}, {"waiting", 0},
                   {"skipped", 0},   {"cancelled", 0}, {"stopped", 0}};
  for (const auto& row : run.nodes) {
    // "running" counts the nodes whose job is queued or running.
    ++v.node_counts[row.state == pipeline::NodeStateName(NodeState::kActive) ? "running" : row.state];
  }
  v.node_counts["total"] = static_cast<int64_t>(run.nodes.size());
  return v;
}

api::PipelineDetail PipelineService::Detail(const Run& run) {
  api::PipelineDetail j;
  j.summary = Summary(run);
  j.run_dir = run.record.run_dir;
  j.params = run.plan.params;
  j.backend = run.plan.backend.name.empty() ? default_backend_ : run.plan.backend.name;
  for (const auto& [step, o] : run.plan.objectives) {
    j.objectives[step] = {o.metric, o.mode == pipeline::ObjectiveMode::kMin ? "min" : "max",
                          o.summary == pipeline::ObjectiveSummary::kLast ? "last" : "best", ""};
  }
  // The latest line and the best value of every metric, per node; for a
  // step with an objective, each point's values of it (the summary picks the
  // one that ranks it) and the metric names its step's lines hold.
  std::map<std::string, json> latest;
  std::map<std::string, std::map<std::string, double>> best;
  std::map<std::string, std::vector<pipeline::Observation>> objective_values;
  std::map<std::string, std::set<std::string>> seen;  // by step
  std::set<std::string> logged;                       // steps whose lines held the objective
  auto lines = state_->store->ListRunMetrics(run.record.id, "");
  if (lines.ok()) {
    for (const store::MetricRecord& m : *lines) {
      json line = json::parse(m.line_json, nullptr, false);
      if (!line.is_object()) continue;
      if (m.step || !latest.count(m.node_id)) latest[m.node_id] = line;
      if (auto node = run.by_id.find(m.node_id); node != run.by_id.end()) {
        const std::string& step = run.plan.nodes[node->second].step;
        if (auto o = run.plan.objectives.find(step); o != run.plan.objectives.end()) {
          for (const auto& [name, value] : line.items()) {
            if (name != "step" && name != "time") seen[step].insert(name);
          }
          const std::optional<double> v = pipeline::MetricValue(line, o->second.metric);
          if (v) logged.insert(step);
          if (v && std::isfinite(*v)) objective_values[m.node_id].push_back({m.step.value_or(0), *v, m.time});
        }
      }
      auto& b = best[m.node_id];
      for (const auto& [name, value] : line.items()) {
        if (name == "step" || name == "time" || !value.is_number()) continue;
        const double v = value.get<double>();
        if (!std::isfinite(v)) continue;
        auto it = b.find(name);
        if (it == b.end() || (LowerIsBetter(name) ? v < it->second : v > it->second)) b[name] = v;
      }
    }
  }
  std::map<std::string, std::pair<double, int64_t>> objective_best;  // node → its ranking value and step
  for (const auto& [node_id, values] : objective_values) {
    auto node = run.by_id.find(node_id);
    const pipeline::Objective& o = run.plan.objectives.at(run.plan.nodes[node->second].step);
    if (auto v = pipeline::SummaryValue(values, o)) objective_best[node_id] = {v->value, v->step};
  }
  for (auto& [step, o] : j.objectives) {
    // While the run goes on, only once the daemon warned (a few lines
    // without the metric are not yet a misspelling); after it, from all lines.
    const bool judged = run.record.state != "running" || run.objective_warned.count(step) > 0;
    if (judged) o.warning = pipeline::ObjectiveNotLogged(o.metric, logged.count(step) > 0, seen[step]);
  }
  // Each objective step's points ranked (1 = best), as the report ranks them.
  std::vector<int> ranks(run.nodes.size(), 0);
  for (const auto& [step, objective] : run.plan.objectives) {
    std::vector<size_t> in_step;
    std::vector<std::optional<double>> values;
    for (size_t i = 0; i < run.nodes.size(); ++i) {
      if (run.plan.nodes[i].step != step) continue;
      in_step.push_back(i);
      auto it = objective_best.find(run.nodes[i].node_id);
      values.push_back(it == objective_best.end() ? std::nullopt : std::optional<double>(it->second.first));
    }
    const std::vector<int> step_ranks = pipeline::RankValues(values, objective.mode);
    for (size_t k = 0; k < in_step.size(); ++k) {
      ranks[in_step[k]] = step_ranks[k];
      if (step_ranks[k] == 1 && !j.best_points.count(step)) {
        const auto& [value, at] = objective_best.at(run.nodes[in_step[k]].node_id);
        j.best_points[step] = {run.nodes[in_step[k]].node_id, objective.metric, value, at};
      }
    }
  }
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    const store::PipelineNodeRecord& row = run.nodes[i];
    const pipeline::PlanNode& plan_node = run.plan.nodes[i];
    api::PipelineNodeView n;
    n.id = row.node_id;
    n.key = row.key;
    n.step = row.step;
    n.matrix = plan_node.matrix;
    n.state = row.state;
    JobBackend* backend = row.job_id > 0 ? BackendOfJob(row.job_id) : nullptr;
    if (backend) {
      if (auto job = backend->Show(row.job_id); job.ok()) {
        n.slurm_job_id = job->slurm_job_id;  // none for the local queue's jobs
        n.gpus = job->assigned_gpus;
        if (n.state == pipeline::NodeStateName(NodeState::kActive)) {
          n.state = job->state == "running" || job->state == "stopping" ? "running" : "pending";
        }
      }
    }
    n.gpu_seconds = row.gpu_seconds;
    if (auto attempt = running_attempts_.find(row.job_id); attempt != running_attempts_.end()) {
      n.gpu_seconds += attempt->second.GpuSecondsUntil(state_->clock->Now());
    }
    n.attempts = row.attempts;
    n.retries = plan_node.retries;
    n.job_id = row.job_id;
    n.started = row.started;
    n.ended = row.ended;
    n.reason = row.reason;
    n.needs = plan_node.needs;
    if (auto l = latest.find(row.node_id); l != latest.end()) n.latest_metrics = l->second;
    n.best = best[row.node_id];
    if (json h = json::parse(row.history_json, nullptr, false); h.is_array()) n.attempt_history = std::move(h);
    if (auto o = objective_best.find(row.node_id); o != objective_best.end()) {
      n.objective = api::PipelineNodeView::Objective{o->second.first, o->second.second, ranks[i]};
    }
    j.nodes.push_back(std::move(n));
  }
  return j;
}

bool PipelineService::IsListedState(const std::string& state) {
  return state == "running" || state == "completed" || state == "succeeded" || state == "failed" ||
         state == "cancelled";
}

bool PipelineService::RunListed(const store::PipelineRunRecord& record, const ListFilter& filter, TimeMs now) {
  if (!filter.state.empty()) return record.state == filter.state || record.outcome == filter.state;
  if (filter.all || record.state == "running") return true;
  return record.finished > 0 && record.finished >= now - kListedFinishedMs;
}

Result<std::vector<api::PipelineSummary>> PipelineService::List(const ListFilter& filter, const Caller& caller) {
  const TimeMs now = state_->clock->Now();
  auto visible = [&](const store::PipelineRunRecord& r) {
    return (caller.admin || (caller.authenticated && caller.uid == r.uid)) && RunListed(r, filter, now);
  };
  std::map<int64_t, api::PipelineSummary, std::greater<>> listed;  // newest first
  // Runs in memory first: their latest state may not be committed yet.
  for (const auto& [id, run] : runs_) {
    if (visible(run.record)) listed[id] = Summary(run);
  }
  // Unfinished runs are all in memory (Load), so the newest stored ones
  // cover every listing; only the kept ones have their nodes read.
  auto records = state_->store->ListPipelineRuns(true, kMaxListedRuns);
  if (!records.ok()) return records.status();
  for (const auto& record : *records) {
    if (runs_.count(record.id) || !visible(record)) continue;
    Run run;
    run.record = record;
    auto rows = state_->store->ListPipelineNodes(record.id);
    if (!rows.ok()) return rows.status();
    run.nodes = std::move(rows).value();
    listed[record.id] = Summary(run);
  }
  std::vector<api::PipelineSummary> out;
  out.reserve(listed.size());
  for (auto& [id, summary] : listed) out.push_back(std::move(summary));
  return out;
}

Result<api::PipelineDetail> PipelineService::Show(int64_t id, const Caller& caller) {
  auto found = Find(id, caller, false);
  if (!found.ok()) return found.status();
  if (*found) return Detail(**found);
  auto run = Stored(id, caller);
  if (!run.ok()) return run.status();
  return Detail(*run);
}

Result<std::vector<api::PipelineMetricLine>> PipelineService::Metrics(int64_t id, const std::string& node,
                                                                      const Caller& caller) {
  auto found = Find(id, caller, false);
  if (!found.ok()) return found.status();
  if (!node.empty()) {
    // The node must exist; its id is checked against the plan.
    Run stored;
    const Run* run = *found;
    if (!run) {
      auto rebuilt = Stored(id, caller);
      if (!rebuilt.ok()) return rebuilt.status();
      stored = std::move(rebuilt).value();
      run = &stored;
    }
    if (!run->by_id.count(node)) {
      return NotFound(fmt::format("pipeline run {} has no node '{}'; `gpuherd pipeline show {}` lists them", id,
                                  node, id));
    }
  }
  auto lines = state_->store->ListRunMetrics(id, node);
  if (!lines.ok()) return lines.status();
  std::vector<api::PipelineMetricLine> out;
  for (const store::MetricRecord& m : *lines) {
    json values = json::parse(m.line_json, nullptr, false);
    if (!values.is_object()) continue;
    values.erase("step");
    values.erase("time");
    out.push_back({m.node_id, m.job_id, m.attempt, m.step, m.time, std::move(values)});
  }
  return out;
}

Result<std::string> PipelineService::Cancel(int64_t id, const Caller& caller) {
  auto found = Find(id, caller, true);
  if (!found.ok()) return found.status();
  if (!*found) {
    auto record = state_->store->GetPipelineRun(id);
    return FailedPrecondition(fmt::format("pipeline run {} is already {}", id,
                                          record.ok() && record->has_value() ? (*record)->state : "finished"));
  }
  Run& run = **found;
  if (run.record.state != "running") {
    return FailedPrecondition(fmt::format("pipeline run {} is already {}", id, run.record.state));
  }
  run.record.state = "cancelled";
  run.record.outcome = pipeline::OutcomeName(pipeline::Outcome::kCancelled);
  run.record.finished = state_->clock->Now();
  SaveRun(run);
  Event(run, "pipeline.cancelled", store::Severity::kInfo, "cancelled by " + caller.user);
  const std::string why = "cancelled with its pipeline by " + caller.user;
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    store::PipelineNodeRecord& row = run.nodes[i];
    if (row.state == pipeline::NodeStateName(NodeState::kWaiting)) {
      row.state = pipeline::NodeStateName(NodeState::kCancelled);
      row.reason = why;
      row.ended = run.record.finished;
      SaveNode(run, static_cast<int>(i));
    } else if (row.state == pipeline::NodeStateName(NodeState::kActive)) {
      // A queued job ends at once (its node through OnJobChanged); a
      // running one is stopped with its grace period.
      JobBackend* backend = BackendOfJob(row.job_id);
      if (!backend) continue;
      auto done = backend->Act(row.job_id, "cancel", caller);
      if (!done.ok()) spdlog::warn("pipeline {}: cannot cancel job {}: {}", id, row.job_id, done.status().message());
    }
  }
  run.dirty = true;
  dirty_ = true;
  return std::string("cancelled");
}

Result<std::string> PipelineService::Retry(int64_t id, const Caller& caller) {
  auto found = Find(id, caller, true);
  if (!found.ok()) return found.status();
  Run* run = *found;
  Run loaded;
  if (!run) {
    auto rebuilt = Stored(id, caller);
    if (!rebuilt.ok()) return rebuilt.status();
    loaded = std::move(rebuilt).value();
    run = &loaded;
  }
  const std::vector<pipeline::NodeStatus> statuses = Statuses(run->nodes);
  std::vector<int> again;
  for (size_t i = 0; i < run->nodes.size(); ++i) {
    const NodeState s = statuses[i].state;
    if (s == NodeState::kSkipped || (s == NodeState::kFailed && pipeline::IsFinal(run->plan.nodes[i], statuses[i]))) {
      again.push_back(static_cast<int>(i));
    }
  }
  if (again.empty()) {
    return FailedPrecondition(fmt::format("pipeline run {} has no failed or skipped nodes to retry (it is {})", id,
                                          run->record.state));
  }
  for (int i : again) {
    store::PipelineNodeRecord& row = run->nodes[i];
    row.state = pipeline::NodeStateName(NodeState::kWaiting);
    row.reason = "retried by " + caller.user;
    row.ended = 0;
    SaveNode(*run, i);
  }
  run->record.state = "running";
  run->record.outcome.clear();
  run->record.finished = 0;
  run->dirty = true;
  // A run whose folders could not be made tries again.
  if (run != &loaded && !run->folders_ready) MakeFolders(*run);
  SaveRun(*run);
  Event(*run, "pipeline.retried", store::Severity::kInfo,
        fmt::format("{} failed or skipped nodes set waiting again by {}", again.size(), caller.user));
  if (run == &loaded) MakeFolders(runs_.emplace(id, std::move(loaded)).first->second);
  dirty_ = true;
  return std::string("running");
}

}  // namespace gpuherd::daemon
