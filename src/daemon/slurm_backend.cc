#include "daemon/slurm_backend.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/safe_file.h"
#include "core/owned_dirs.h"
#include "core/private_dirs.h"
#include "core/state_dir.h"
#include "sched/job_spec.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
namespace slurm = exec::slurm;
using sched::JobState;

std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.empty() ? "(no message)" : line;
}

std::optional<int> ReadExitFile(const std::string& path) {
  // Jobs' users write into the shared folder: no link is followed, a FIFO
  // does not block, at most a few bytes are read.
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  auto text = ReadSmallFileBeneath(path.substr(0, slash), path.substr(slash + 1), 64);
  if (!text.ok()) return std::nullopt;
  std::istringstream in(*text);
  int code = 0;
  // The batch script writes 0-255; anything else is no record.
  if (in >> code && code >= 0 && code <= 255) return code;
  return std::nullopt;
}

}  // namespace

SlurmBackend::SlurmBackend(DaemonState* state, exec::CommandRunner* runner, SlurmBackendOptions options,
                           PostToLoop post)
    : state_(state),
      runner_(runner),
      options_(std::move(options)),
      post_(std::move(post)),
      actions_(std::make_unique<WorkQueue>()),
      polls_(std::make_unique<WorkQueue>()) {}

SlurmBackend::~SlurmBackend() {
  polls_.reset();
  actions_.reset();
}

Result<std::unique_ptr<SlurmBackend>> SlurmBackend::Create(DaemonState* state, exec::CommandRunner* runner,
                                                           SlurmBackendOptions options, PostToLoop post) {
  const std::string& dir = options.site.shared_dir;
  if (dir.empty() || !fs::path(dir).is_absolute()) {
    return InvalidArgument("the Slurm backend needs an absolute shared folder (--slurm-shared-dir), got '" + dir +
                           "'");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return IoError("cannot create the Slurm shared folder " + dir + ": " + ec.message());
  // Like /tmp: every job's user writes its files here, none can remove another's.
  if (::chmod(dir.c_str(), 01777) != 0 && ::geteuid() == 0) {
    return IoError("cannot make " + dir + " writable for the jobs' users");
  }
  // Every user may write in `dir`: a link planted as ids/ is not followed,
  // and root writes its id files only into an ids/ no one else can change.
  GPUHERD_RETURN_IF_ERROR(MakeDirsBeneath(dir, dir + "/ids", std::nullopt));
  if (auto ids = OpenPrivateDir(dir + "/ids"); !ids.ok()) return ids.status();
  return std::unique_ptr<SlurmBackend>(new SlurmBackend(state, runner, std::move(options), std::move(post)));
}

std::string SlurmBackend::IdFile(sched::JobId id) const {
  return fmt::format("{}/ids/{}", options_.site.shared_dir, id);
}

void SlurmBackend::SaveSlurmId(sched::JobId id, int64_t slurm_id) const {
  Status saved = WriteFileAtomically(IdFile(id), std::to_string(slurm_id) + "\n", 0644);
  if (!saved.ok()) spdlog::error("slurm: job {} (Slurm {}): {}", id, slurm_id, saved.message());
}

int64_t SlurmBackend::SlurmId(sched::JobId id) const {
  if (auto it = tracked_.find(id); it != tracked_.end()) return it->second.slurm_id;
  // ids/ is the daemon's; read like every file in the shared folder.
  auto text = ReadSmallFileBeneath(options_.site.shared_dir, "ids/" + std::to_string(id), 64);
  if (!text.ok()) return 0;
  std::istringstream in(*text);
  int64_t slurm_id = 0;
  return in >> slurm_id ? slurm_id : 0;
}

sched::JobId SlurmBackend::NextId() {
  // Microseconds of the wall clock, kept increasing: unique across daemon
  // restarts without a counter to store.
  last_sequence_ = std::max(last_sequence_ + 1, state_->clock->Now() * 1000);
  return kSlurmJobIdBase + last_sequence_;
}

std::string SlurmBackend::MetricsPath(sched::JobId id) const {
  const int64_t slurm_id = SlurmId(id);
  return slurm_id > 0 ? slurm::MetricsFile(options_.site, slurm_id) : std::string();
}

Result<sched::JobId> SlurmBackend::Submit(const sched::JobSpec& job_spec, const Caller& owner,
                                          const SubmitExtras& extras, const BackendOptions& options) {
  const sched::JobSpec* spec = &job_spec;
  slurm::BatchRequest request;
  request.argv = spec->argv;
  request.cwd = spec->cwd;
  request.env = spec->env;
  request.gpu_twentieths = spec->gpu_twentieths;
  request.cpus = spec->cpus;
  request.mem_bytes = spec->mem_bytes;
  request.time_limit = spec->time_limit;
  request.checkpoint_grace = spec->checkpoint_grace;
  request.name = spec->name;
  std::string node = spec->labels.count("gpuherd/node") ? spec->labels.at("gpuherd/node") : spec->name;
  const sched::JobId id = NextId();
  // job=<id> finds the Slurm job again if the daemon stops between sbatch's
  // answer and the id file (see Recover).
  request.comment = fmt::format("gpuherd pipeline={} node={} attempt={} job={}",
                                spec->labels.count("gpuherd/pipeline") ? spec->labels.at("gpuherd/pipeline") : "",
                                node, extras.prior_attempts + 1, id);
  request.checkpoint_dir = extras.checkpoint_dir;
  request.prior_attempts = extras.prior_attempts;
  if (request.checkpoint_dir.empty()) request.checkpoint_dir = options_.site.shared_dir + "/checkpoints/" + node;

  slurm::SlurmOptions site = options_.site;
  if (!options.partition.empty()) site.partition = options.partition;
  if (!options.account.empty()) site.account = options.account;
  site.sbatch_args.insert(site.sbatch_args.end(), options.sbatch_args.begin(), options.sbatch_args.end());

  exec::CommandRequest command;
  command.argv = slurm::SbatchArgs(request, site);
  command.stdin_text = slurm::BatchScript(request, site);
  command.timeout = options_.command_timeout;
  // sbatch submits as its caller: the job runs as the pipeline's owner.
  if (::geteuid() == 0 && owner.uid != 0) {
    command.uid = owner.uid;
    command.gid = owner.gid;
  }
  Tracked t;
  t.job.id = id;
  t.job.spec = *spec;
  t.job.state = JobState::kPending;
  t.job.submitted = state_->clock->Now();
  t.job.reason = "being submitted to Slurm";
  tracked_[id] = std::move(t);
  // sbatch waits for the turn's commit (AfterCommit): a daemon that dies
  // before it has not submitted anything, and once it runs, the job's id is
  // already on record with whoever submitted it (a pipeline's node), so a
  // restart cannot submit the node a second time.
  unsent_.emplace_back(id, [this, id, command = std::move(command)] {
    Result<int64_t> slurm_id = Unavailable("");
    auto ran = runner_->Run(command);
    if (!ran.ok()) {
      slurm_id = Unavailable("cannot run sbatch: " + ran.status().message() +
                             " (install slurm-wlm, or use backend: local)");
    } else if (ran->exit_code != 0) {
      slurm_id = FailedPrecondition(fmt::format("sbatch refused the job (exit {}): {}", ran->exit_code,
                                                FirstLine(ran->err.empty() ? ran->out : ran->err)));
    } else {
      slurm_id = slurm::ParseSbatchOutput(ran->out);
    }
    // Durable before the loop hears of it: a restarted daemon finds the job.
    if (slurm_id.ok()) SaveSlurmId(id, *slurm_id);
    post_([this, id, slurm_id] { OnSubmitted(id, slurm_id); });
  });
  return id;
}

void SlurmBackend::AfterCommit(bool committed) {
  std::vector<std::pair<sched::JobId, std::function<void()>>> unsent;
  unsent.swap(unsent_);
  for (auto& [id, sbatch] : unsent) {
    auto it = tracked_.find(id);
    if (it == tracked_.end()) continue;
    Tracked& t = it->second;
    if (!committed || t.cancel_requested) {
      t.reported_running = true;  // it never ran: no start to report
      if (committed) Finish(t, JobState::kCancelled, "cancelled before it was submitted to Slurm", std::nullopt);
      else Finish(t, JobState::kFailed, "not submitted to Slurm: the daemon could not record it", std::nullopt);
      continue;
    }
    actions_->Post(std::move(sbatch));
  }
}

void SlurmBackend::OnSubmitted(sched::JobId id, const Result<int64_t>& slurm_id) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return;
  Tracked& t = it->second;
  if (!slurm_id.ok()) {
    t.reported_running = true;  // it never ran: no start to report
    Finish(t, JobState::kFailed, slurm_id.status().message(), std::nullopt);
    return;
  }
  t.slurm_id = *slurm_id;
  t.job.reason = "queued in Slurm";
  by_slurm_id_[t.slurm_id] = id;
  if (t.cancel_requested) RunLater({"scancel", std::to_string(t.slurm_id)}, fmt::format("cancel job {}", t.slurm_id));
  SchedulePoll();
}

void SlurmBackend::RunLater(std::vector<std::string> argv, std::string what) {
  actions_->Post([this, argv = std::move(argv), what = std::move(what)] {
    exec::CommandRequest command;
    command.argv = argv;
    command.timeout = options_.command_timeout;
    auto ran = runner_->Run(command);
    if (!ran.ok()) {
      spdlog::warn("slurm: cannot {}: {}", what, ran.status().message());
    } else if (ran->exit_code != 0) {
      spdlog::warn("slurm: cannot {}: {}", what, FirstLine(ran->err));
    }
  });
}

Result<std::string> SlurmBackend::Act(sched::JobId id, const std::string& action, const Caller& /*caller*/,
                                      const std::string& /*why*/) {
  auto it = tracked_.find(id);
  if (it == tracked_.end()) return FailedPrecondition(fmt::format("job {} (Slurm {}) has ended", id, SlurmId(id)));
  const std::string sid = std::to_string(it->second.slurm_id);
  if (action == "cancel") {
    it->second.cancel_requested = true;
    // Not submitted yet: cancelled once sbatch answers.
    if (it->second.slurm_id > 0) RunLater({"scancel", sid}, "cancel job " + sid);
    return std::string("stopping");
  }
  if (it->second.slurm_id == 0) return FailedPrecondition("the job is still being submitted to Slurm");
  if (action == "requeue") {
    RunLater({"scontrol", "requeue", sid}, "requeue job " + sid);
    actions_->Post([this, sid] {
      // Slurm holds a requeued job back for about two minutes (BeginTime);
      // a restart asked for by an anomaly check need not wait that long. The
      // begin time is moved once the old attempt is cleaned up (the reason
      // turns to BeginTime) and a second later: a job started while slurmd
      // still kills its old step fails to launch.
      for (int i = 0; i < 100; ++i) {
        exec::CommandRequest q;
        q.argv = {"squeue", "--noheader", "--states=all", "--format=%T|%r", "--jobs=" + sid};
        q.timeout = options_.command_timeout;
        auto state = runner_->Run(q);
        if (state.ok() && state->out.rfind("PENDING|BeginTime", 0) == 0) {
          std::this_thread::sleep_for(std::chrono::seconds(1));
          exec::CommandRequest update;
          update.argv = {"scontrol", "update", "jobid=" + sid, "starttime=now"};
          update.timeout = options_.command_timeout;
          (void)runner_->Run(update);
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
    return std::string("pending");
  }
  return InvalidArgument("the Slurm backend can cancel or requeue a job, not '" + action + "'");
}

Status SlurmBackend::Signal(sched::JobId id, int signal) {
  auto it = tracked_.find(id);
  if (it == tracked_.end() || it->second.job.state != JobState::kRunning) {
    return FailedPrecondition(fmt::format("job {} is not running in Slurm", id));
  }
  const char* name = signal == SIGUSR1 ? "USR1" : signal == SIGTERM ? "TERM" : nullptr;
  if (!name) return InvalidArgument("only SIGUSR1 and SIGTERM are passed to Slurm jobs");
  // To the batch shell, which forwards it to the command.
  const std::string sid = std::to_string(it->second.slurm_id);
  RunLater({"scancel", "--batch", std::string("--signal=") + name, sid}, fmt::format("signal job {}", sid));
  return Status::Ok();
}

Result<BackendJob> SlurmBackend::Show(sched::JobId id) {
  BackendJob b;
  b.id = id;
  auto it = tracked_.find(id);
  if (it == tracked_.end()) {
    // Ended: only its Slurm id is left to show.
    const int64_t slurm_id = SlurmId(id);
    if (slurm_id == 0) return NotFound(fmt::format("job {} is not a known Slurm job", id));
    b.slurm_job_id = slurm_id;
    return b;
  }
  const Tracked& t = it->second;
  if (t.slurm_id > 0) b.slurm_job_id = t.slurm_id;
  b.state = sched::JobStateName(t.job.state);
  b.slurm_state = t.slurm_state;
  b.nodes = t.nodes;
  b.reason = t.job.reason;
  return b;
}

Result<std::optional<sched::Job>> SlurmBackend::Recover(sched::JobId id) {
  if (!Owns(id)) return InvalidArgument(fmt::format("job {} is not a Slurm job", id));
  last_sequence_ = std::max(last_sequence_, id - kSlurmJobIdBase);
  const int64_t slurm_id = SlurmId(id);
  if (slurm_id == 0) {
    // The daemon stopped while sbatch ran, or before it wrote the id file:
    // squeue finds the job by its comment if Slurm took it; if not, the node
    // goes on as after a failure.
    Tracked t;
    t.job.id = id;
    t.job.state = JobState::kPending;
    t.job.reason = "looking for it in Slurm after a daemon restart";
    tracked_.try_emplace(id, std::move(t));
    actions_->Post([this, id] {
      exec::CommandRequest command;
      command.argv = slurm::CommentSqueueArgs();
      command.timeout = options_.command_timeout;
      auto ran = runner_->Run(command);
      Result<int64_t> found = NotFound("its submission to Slurm was cut short by a daemon restart");
      if (ran.ok() && ran->exit_code == 0) {
        if (int64_t slurm_id = slurm::FindJobByComment(ran->out, fmt::format("job={}", id))) {
          found = slurm_id;
          SaveSlurmId(id, slurm_id);
        }
      } else {
        found = Unavailable("its submission to Slurm was cut short by a daemon restart, and squeue could not "
                            "say whether Slurm has it: " +
                            (ran.ok() ? FirstLine(ran->err) : ran.status().message()));
      }
      post_([this, id, found] { OnSubmitted(id, found); });
    });
    return std::optional<sched::Job>();
  }
  Tracked t;
  t.job.id = id;
  t.slurm_id = slurm_id;
  t.job.state = JobState::kPending;
  t.job.reason = "recovered after a daemon restart";
  tracked_.try_emplace(id, std::move(t));
  by_slurm_id_[slurm_id] = id;
  SchedulePoll();
  return std::optional<sched::Job>();
}

void SlurmBackend::SchedulePoll() {
  if (poll_in_flight_ || by_slurm_id_.empty()) return;
  poll_in_flight_ = true;
  std::vector<int64_t> ids;
  for (const auto& [slurm_id, id] : by_slurm_id_) ids.push_back(slurm_id);
  const DurationMs wait = std::max<DurationMs>(0, last_poll_ + options_.poll_interval - state_->clock->Now());
  polls_->Post([this, ids = std::move(ids), wait] {
    if (wait > 0) std::this_thread::sleep_for(std::chrono::milliseconds(wait));
    PollResult result = Poll(ids);
    post_([this, result = std::move(result)] {
      poll_in_flight_ = false;
      last_poll_ = state_->clock->Now();
      ApplyPoll(result);
      SchedulePoll();
    });
  });
}

SlurmBackend::PollResult SlurmBackend::Poll(const std::vector<int64_t>& ids) {
  PollResult result;
  exec::CommandRequest command;
  command.argv = slurm::SqueueArgs(ids);
  command.timeout = options_.command_timeout;
  auto ran = runner_->Run(command);
  if (ran.ok() && ran->exit_code != 0 && ran->err.find("Invalid job id") != std::string::npos) {
    // Every job asked about has left slurmctld's memory: list them all.
    command.argv = slurm::SqueueArgs({});
    ran = runner_->Run(command);
  }
  if (!ran.ok()) {
    result.status = ran.status();
    return result;
  }
  if (ran->exit_code != 0) {
    result.status = Unavailable("squeue failed: " + FirstLine(ran->err));
    return result;
  }
  std::set<int64_t> listed;
  for (auto& e : slurm::ParseSqueue(ran->out)) {
    listed.insert(e.id);
    const slurm::StateClass c = slurm::ClassifyState(e.state);
    if (c != slurm::StateClass::kWaiting && c != slurm::StateClass::kRunning) {
      if (auto code = ReadExitFile(slurm::ExitFile(options_.site, e.id))) result.exit_codes[e.id] = *code;
    }
    result.entries.push_back(std::move(e));
  }
  for (int64_t sid : ids) {
    if (listed.count(sid)) continue;
    Gone g;
    g.id = sid;  // the Slurm id here; the loop maps it
    g.exit_code = ReadExitFile(slurm::ExitFile(options_.site, sid));
    if (!g.exit_code) {
      // Accounting (where configured) remembers jobs slurmctld has forgotten.
      exec::CommandRequest sacct;
      sacct.argv = {"sacct", "--noheader", "--parsable2", "--jobs=" + std::to_string(sid), "--format=State",
                    "--allocations"};
      sacct.timeout = options_.command_timeout;
      if (auto got = runner_->Run(sacct); got.ok() && got->exit_code == 0) {
        std::string state = got->out.substr(0, got->out.find('\n'));
        g.sacct_state = state.substr(0, state.find(' '));  // "CANCELLED by 0"
      }
    }
    result.gone.push_back(std::move(g));
  }
  return result;
}

void SlurmBackend::Report(const sched::Job& job) {
  if (listener_) listener_(job);
}

void SlurmBackend::Finish(Tracked& t, JobState state, const std::string& reason, std::optional<int> exit_code) {
  const TimeMs now = state_->clock->Now();
  if (!t.reported_running) {
    // It ran between two polls: its start is reported too, so that the
    // pipeline reads its metrics file.
    t.job.state = JobState::kRunning;
    t.job.attempt += 1;
    t.job.started = now;
    t.reported_running = true;
    Report(t.job);
  }
  t.job.state = state;
  t.job.ended = now;
  t.job.reason = reason;
  t.job.exit_code = exit_code;
  const sched::Job job = t.job;
  by_slurm_id_.erase(t.slurm_id);
  tracked_.erase(job.id);
  Report(job);
}

void SlurmBackend::ApplyPoll(const PollResult& result) {
  if (!result.status.ok()) {
    spdlog::warn("slurm: {}; trying again", result.status.message());
    return;
  }
  const TimeMs now = state_->clock->Now();
  for (const slurm::QueueEntry& e : result.entries) {
    auto mapped = by_slurm_id_.find(e.id);
    if (mapped == by_slurm_id_.end()) continue;
    auto it = tracked_.find(mapped->second);
    if (it == tracked_.end()) continue;
    Tracked& t = it->second;
    t.missing = 0;
    if (e.state != t.slurm_state) spdlog::debug("slurm: job {} (Slurm {}) is {} ({})", t.job.id, e.id, e.state, e.reason);
    t.slurm_state = e.state;
    t.nodes = e.nodes;
    auto found = result.exit_codes.find(e.id);
    const std::optional<int> code = found == result.exit_codes.end() ? std::nullopt : std::optional<int>(found->second);
    const slurm::StateClass state_class = slurm::ClassifyState(e.state);
    if (state_class == slurm::StateClass::kWaiting || state_class == slurm::StateClass::kRunning) {
      t.final_seen.clear();
    } else if (t.final_seen != e.state) {
      t.final_seen = e.state;
      continue;
    }
    switch (state_class) {
      case slurm::StateClass::kRunning:
        if (t.job.state != JobState::kRunning) {
          t.job.state = JobState::kRunning;
          t.job.attempt += 1;
          t.job.started = now;
          t.job.reason.clear();
          t.reported_running = true;
          Report(t.job);
        }
        break;
      case slurm::StateClass::kWaiting:
        if (t.job.state == JobState::kRunning) {
          // Slurm put it back (node failure, preemption, scontrol requeue):
          // it resumes from its checkpoint when it starts again.
          t.job.state = JobState::kPending;
          t.job.reason = fmt::format("requeued by Slurm ({})", e.reason);
          Report(t.job);
        } else {
          t.job.reason = "waiting in Slurm: " + e.reason;
        }
        break;
      case slurm::StateClass::kCompleted:
        Finish(t, JobState::kCompleted, "", code.value_or(0));
        break;
      case slurm::StateClass::kCancelled:
        Finish(t, JobState::kCancelled, t.cancel_requested ? "cancelled" : "cancelled in Slurm", code);
        break;
      case slurm::StateClass::kFailed: {
        std::string why = e.state == "FAILED" && code ? fmt::format("exited with code {}", *code)
                                                      : fmt::format("Slurm ended it: {}", e.state);
        spdlog::info("slurm: job {} (Slurm {}) ended {}; exit file {}", t.job.id, e.id, e.state,
                     code ? std::to_string(*code) : "none");
        Finish(t, JobState::kFailed, why, code);
        break;
      }
    }
  }
  for (const Gone& g : result.gone) {
    auto mapped = by_slurm_id_.find(g.id);
    if (mapped == by_slurm_id_.end()) continue;
    auto it = tracked_.find(mapped->second);
    if (it == tracked_.end()) continue;
    Tracked& t = it->second;
    // squeue may miss a job for a moment (while slurmctld requeues it): only a
    // second miss in a row means slurmctld has forgotten it.
    if (++t.missing < 2) continue;
    spdlog::info("slurm: job {} (Slurm {}) left the queue after {}; exit file {}", t.job.id, g.id,
                 t.slurm_state.empty() ? "no state seen" : t.slurm_state,
                 g.exit_code ? std::to_string(*g.exit_code) : "none");
    if (g.exit_code) {
      if (*g.exit_code == 0) {
        Finish(t, JobState::kCompleted, "", 0);
      } else {
        Finish(t, JobState::kFailed, fmt::format("exited with code {}", *g.exit_code), g.exit_code);
      }
    } else if (t.cancel_requested || g.sacct_state == "CANCELLED") {
      Finish(t, JobState::kCancelled, "cancelled", std::nullopt);
    } else if (g.sacct_state == "COMPLETED") {
      Finish(t, JobState::kCompleted, "", 0);
    } else {
      Finish(t, JobState::kFailed,
             fmt::format("left Slurm's queue without an exit status{}; see {}",
                         g.sacct_state.empty() ? "" : " (" + g.sacct_state + ")",
                         slurm::ErrorFile(options_.site, g.id)),
             std::nullopt);
    }
  }
}

}  // namespace gpuherd::daemon
