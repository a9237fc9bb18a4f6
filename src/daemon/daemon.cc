#include "daemon/daemon.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <string_view>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "core/safe_file.h"
#include "core/state_dir.h"
#include "core/version.h"
#include "alerts/rules.h"
#include "daemon/alert_service.h"
#include "daemon/attempt_log.h"
#include "api/events.h"
#include "daemon/burnin_jobs.h"
#include "daemon/mps_control.h"
#include "daemon/dashboard.h"
#include "daemon/routes/access.h"
#include "daemon/routes/routes.h"
#include "http/token.h"
#include "daemon/daemon_state.h"
#include "daemon/event_loop.h"
#include "daemon/id_folders.h"
#include "daemon/idempotency.h"
#include "daemon/turn_participant.h"
#include "daemon/pipeline_service.h"
#include "daemon/risk_service.h"
#include "daemon/self_heal_queue.h"
#include "daemon/self_heal_service.h"
#include "http/server.h"
#include "daemon/fd_budget.h"
#include "daemon/metrics_service.h"
#include "exec/executor.h"
#include "host/machine.h"
#include "gpu/json.h"
#include "gpu/sim/sim_driver.h"
#include "host/host.h"
#include "telemetry/records_convert.h"
#include "telemetry/sampler.h"

namespace gpuherd::daemon {
namespace {

// Holds an exclusive flock on <home>/daemon.lock for the daemon's life, so two
// daemons never share one state directory. The kernel drops it on any exit.
Result<int> LockHome(const StateDir& dir) {
  std::string path = dir.root + "/daemon.lock";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    std::string pid = "?";
    if (auto text = host::NewHost()->ReadFile(dir.pid_path()); text.ok()) pid = *text;
    while (!pid.empty() && (pid.back() == '\n')) pid.pop_back();
    return FailedPrecondition("another gpuherd daemon (pid " + pid + ") is running with state directory " +
                              dir.root + "; stop it first, or pass another --home");
  }
  return fd;
}

std::string UserName(uint32_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found) return found->pw_name;
  return "uid " + std::to_string(uid);
}

// The callers' names by uid, each looked up again after kTtl: without it
// every request read /etc/passwd (an open, a read and a parse per submit).
class UserNames {
 public:
  static constexpr std::chrono::seconds kTtl{10};
  std::string Of(uint32_t uid) {
    const auto now = std::chrono::steady_clock::now();
    {
      std::lock_guard lock(mu_);
      auto it = names_.find(uid);
      if (it != names_.end() && now - it->second.second < kTtl) return it->second.first;
    }
    std::string name = UserName(uid);
    std::lock_guard lock(mu_);
    if (names_.size() >= kMaxNames) names_.clear();  // bounded: uids are the callers' to choose
    names_[uid] = {name, now};
    return name;
  }

 private:
  static constexpr size_t kMaxNames = 4096;
  std::mutex mu_;
  std::map<uint32_t, std::pair<std::string, std::chrono::steady_clock::time_point>> names_;
};

bool InGroup(const std::string& user, uint32_t primary_gid, const std::string& group) {
  if (group.empty()) return false;
  struct group gr {};
  struct group* found = nullptr;
  char buf[16384];
  if (getgrnam_r(group.c_str(), &gr, buf, sizeof(buf), &found) != 0 || !found) return false;
  if (found->gr_gid == primary_gid) return true;
  for (char** m = found->gr_mem; m && *m; ++m) {
    if (user == *m) return true;
  }
  return false;
}

// --socket: its folder (a RuntimeDirectory under systemd) is made when
// missing, open to every user (0755) since the socket is their way in.
Status PrepareSocketDir(const std::string& socket_path) {
  if (socket_path.empty() || socket_path[0] != '/') {
    return InvalidArgument("--socket takes an absolute path, like /run/gpuherd/gpuherd.sock");
  }
  if (socket_path.size() >= 100) return InvalidArgument("--socket path is too long for a unix socket: " + socket_path);
  std::string folder = socket_path.substr(0, socket_path.rfind('/'));
  if (folder.empty()) return Status::Ok();
  std::error_code ec;
  if (!std::filesystem::exists(folder, ec)) {
    std::filesystem::create_directories(folder, ec);
    if (ec) return IoError("cannot create " + folder + " for the socket: " + ec.message());
    ::chmod(folder.c_str(), 0755);
  }
  return Status::Ok();
}

// <home>/gpuherd.sock links to the socket elsewhere, so that everything
// that knows only the home (--home, `gpuherd stop` in the unit) finds it.
Status LinkHomeSocket(const StateDir& dir, const std::string& target) {
  const std::string link = dir.socket_path();
  struct stat st {};
  if (::lstat(link.c_str(), &st) == 0) {
    // The home is the daemon's own and locked by it: what is there is a
    // previous daemon's socket or link.
    if (!S_ISLNK(st.st_mode) && !S_ISSOCK(st.st_mode)) {
      return FailedPrecondition(link + " exists and is neither a socket nor a link to one; move it away");
    }
    ::unlink(link.c_str());
  }
  if (::symlink(target.c_str(), link.c_str()) != 0) {
    return IoError("cannot link " + link + " to " + target + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

// A simulated fleet only: what the queue's running jobs put on each GPU, and
// their memory as the jobs report it (GPUHERD_SIM_GPU_MEM_FILE), else half
// their share, or half the card for a whole-GPU job (which has no share and
// would otherwise look as if it held nothing). Real GPUs report their own load.
void SimulateJobLoad(gpu::sim::SimDriver& sim, const StateDir& dir, size_t gpu_count,
                     const std::vector<JobLoad>& jobs) {
  std::map<int, gpu::sim::Load> loads;
  for (const JobLoad& j : jobs) {
    uint64_t per_gpu_mem = j.gpu_mem_bytes / 2;
    bool reported_mem = false;
    // The job's user writes this file: read beneath jobs/ without following
    // a link or blocking on a FIFO, at most a few bytes, as a bounded number.
    auto reported = ReadSmallFileBeneath(dir.jobs_dir(), fmt::format("{}/sim_gpu_mem_mb", j.id), 32);
    uint64_t mb = 0;
    if (reported.ok()) {
      std::string_view text = *reported;
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), mb);
      if (ec == std::errc() && end == text.data() + text.size() && !text.empty() && mb <= (uint64_t{1} << 30)) {
        per_gpu_mem = mb << 20;
        reported_mem = true;
      }
    }
    for (int g : j.gpus) {
      if (g < 0 || g >= static_cast<int>(gpu_count)) continue;
      auto& load = loads[g];
      load.util = std::min(1.0, load.util + std::max(0.05, j.gpu_twentieths / 20.0 / j.gpus.size()));
      const uint64_t mem = reported_mem || j.gpu_mem_bytes > 0 ? per_gpu_mem : sim.model(g).memory_bytes / 2;
      load.processes.push_back({j.shim_pid, mem, j.name});
    }
  }
  for (int i = 0; i < static_cast<int>(gpu_count); ++i) sim.SetLoad(i, loads[i]);
}

}  // namespace

struct Daemon::Impl {
  DaemonOptions options;
  StateDir dir;
  host::Clock* clock = nullptr;
  int lock_fd = -1;
  std::string token;
  DaemonState state;
  std::unique_ptr<gpu::Driver> driver;  // used by the sampler thread only
  std::unique_ptr<telemetry::Sampler> sampler;
  std::unique_ptr<EventLoop> loop;
  std::unique_ptr<exec::Executor> executor;
  std::unique_ptr<MpsControl> mps;  // --mps; quits its control daemons after the jobs are gone
  std::unique_ptr<AttemptLog> attempts;  // used by jobs: declared before, destroyed after
  // The queue's parts (job_service.h's QueueParts).
  std::unique_ptr<queue::FairShare> fair_share;
  std::unique_ptr<queue::MemoryWatchdog> memory_watchdog;
  std::unique_ptr<JobService> jobs;
  // Declared after jobs, destroyed before: the launches under way finish
  // while the queue they report to is alive.
  std::unique_ptr<queue::JobLauncher> launcher;
  std::unique_ptr<LocalBackend> local_backend;
  std::unique_ptr<exec::CommandRunner> slurm_runner;
  std::unique_ptr<SlurmBackend> slurm_backend;
  std::unique_ptr<PipelineService> pipelines;  // uses jobs and the backends: declared after, destroyed first
  std::unique_ptr<routes::Routes> routes;
  std::unique_ptr<IdempotencyKeys> idempotency;  // loop thread only
  std::vector<std::string> allowed_hosts;  // Host names served over TCP (routes/access.h)
  std::unique_ptr<AlertService> alerts;
  std::unique_ptr<MetricsService> metrics;
  std::unique_ptr<RiskService> risk;
  std::unique_ptr<SelfHealJobQueue> self_heal_queue;
  std::unique_ptr<SelfHealService> self_heal;  // uses jobs and alerts
  std::unique_ptr<http::Server> server;
  std::unique_ptr<http::Server> metrics_server;  // --metrics-port: /metrics only
  // Long history ranges, read on an HTTP thread (ServeLongHistory): one at a
  // time, with a read-only connection of their own.
  std::mutex history_mu;
  std::unique_ptr<store::Store> history_reader;

  ~Impl() {
    if (metrics_server) metrics_server->Stop();
    if (server) server->Stop();
    if (sampler) sampler->Stop();
    // Jobs keep running under their shims; the next daemon re-adopts them.
    if (executor) executor->Shutdown();
    if (lock_fd >= 0) ::close(lock_fd);
  }

  // The turn's participants (turn_participant.h), in this order: pipelines
  // first (the jobs they submit are scheduled in the same turn), the queue,
  // then the services whose side effects only follow the queue's.
  TurnParticipants participants;
  std::vector<std::unique_ptr<TurnParticipant>> adapters;  // for services without the interface
  bool burnins_recorded = false;

  // End of each loop turn: every participant's end of turn (the scheduling
  // pass among them), then everything the turn changed in one transaction,
  // then the side effects it decided, or none of them when the commit failed.
  bool CommitTurn() {
    participants.EndOfTurn();
    if (state.batch.empty()) {
      participants.AfterCommit(true);
      return true;
    }
    burnins_recorded = !state.batch.burnin_runs.empty();
    Status s = state.store->Commit(&state.batch);
    state.batch = store::WriteBatch();
    if (!s.ok()) spdlog::error("cannot commit state: {}", s.ToString());
    participants.AfterCommit(s.ok());
    return s.ok();
  }

  void AddParticipant(std::function<void()> end_of_turn, std::function<void(bool)> after_commit) {
    adapters.push_back(std::make_unique<FunctionParticipant>(std::move(end_of_turn), std::move(after_commit)));
    participants.Add(adapters.back().get());
  }

  mutable UserNames user_names;  // HTTP threads
  Caller CallerOf(const http::Request& request) const {
    Caller c;
    bool token_ok = http::HasValidToken(request.headers, token);
    if (request.via_unix_socket && request.peer_uid) {
      c.uid = *request.peer_uid;
      c.gid = request.peer_gid.value_or(0);
      c.user = user_names.Of(c.uid);
      c.authenticated = true;
      c.admin = token_ok || c.uid == 0 || c.uid == ::geteuid() || InGroup(c.user, c.gid, options.admin_group);
    } else if (token_ok) {
      c.uid = ::geteuid();
      c.gid = ::getegid();
      c.user = user_names.Of(c.uid);
      c.authenticated = true;
      c.admin = true;
    } else {
      c.uid = Caller::kNoUid;  // owns nothing: MayActOn() is false for every job and run
      c.gid = Caller::kNoUid;
    }
    return c;
  }

  void Ingest(const telemetry::SampleRound& round) {
    auto result = state.telemetry->Ingest(round);
    if (jobs) {
      // Faults self-healing judges go through its rules; the queue keeps the
      // rest (a critical thermal event drains as before).
      std::vector<store::EventRecord> for_queue;
      for (const auto& e : result.events) {
        if (!self_heal || !SelfHealService::Judges(e)) for_queue.push_back(e);
      }
      if (self_heal) self_heal->OnGpuEvents(result.events);
      jobs->OnGpuEvents(for_queue);
      jobs->OnRound();
      if (self_heal) self_heal->OnRound(round.time);
    }
    if (attempts) attempts->OnRound();
    if (pipelines) pipelines->OnRound();
    if (alerts) alerts->AfterRound(round.time);
    if (risk) risk->OnRollups(result.rollups, round.time);
    if (metrics) metrics->AfterRound();
    for (auto& e : result.events) {
      spdlog::log(e.severity == store::Severity::kCritical ? spdlog::level::err : spdlog::level::warn,
                  "{}: {}", e.kind, e.message);
      state.batch.events.push_back(std::move(e));
    }
    for (auto& r : result.rollups) state.batch.rollups.push_back(std::move(r));
    ++state.rounds;
    state.skipped_ticks += round.skipped_ticks;
    state.last_round_took = round.took;
  }

  // A week of minutes takes seconds to average: the loop only copies the
  // fleet and the clock, and this HTTP thread reads the store (WAL lets it
  // read while the loop commits).
  http::Response ServeLongHistory(int64_t seconds) {
    auto inputs = loop->CallOr<std::optional<routes::LongHistory>>(
        [&] { return std::optional<routes::LongHistory>(routes::LongHistoryInputs(state, seconds)); }, std::nullopt);
    if (!inputs) return http::ErrorResponse(503, "the daemon is stopping");
    std::lock_guard<std::mutex> lock(history_mu);
    if (!history_reader) {
      auto reader = store::Store::Open(dir.db_path(), {.read_only = true});
      if (!reader.ok()) return routes::StatusResponse(reader.status());
      history_reader = std::move(reader).value();
    }
    return routes::AnswerLongHistory(*inputs, *history_reader);
  }

  http::Response Serve(const http::Request& request) {
    if (auto refused = routes::CheckHost(request, allowed_hosts)) return std::move(*refused);
    // The dashboard's page and scripts: fixed bytes, no state, no token.
    if (auto page = ServeDashboard(request)) return std::move(*page);
    Caller caller = CallerOf(request);
    if (routes::IsMutation(request) && !caller.authenticated) {
      return http::ErrorResponse(401, "this request changes state: over TCP it needs the API token, sent as "
                                    "\"Authorization: Bearer <token>\" with the token from " + dir.token_path() +
                                    " (or use the unix socket " + dir.socket_path() + ")");
    }
    if (auto seconds = routes::LongHistorySeconds(request)) return ServeLongHistory(*seconds);
    auto key = IdempotencyKeyOf(request);
    if (!key.ok()) return http::ErrorResponse(400, key.status().message());
    // What needs none of the loop's state (a pipeline file's expansion) is
    // done here, on this HTTP thread.
    routes::Prepared prepared = routes->Prepare(request, caller);
    return loop->CallOr<http::Response>(
        [&] {
          if (!key->has_value()) return routes->Handle(request, caller, &prepared);
          return idempotency->Run(caller.uid, **key, request,
                                  [&] { return routes->Handle(request, caller, &prepared); });
        },
        unavailable);
  }

  // What a request gets when its turn could not be committed: made once, at
  // start, not per request.
  http::Response unavailable;

  // The second listener: /metrics and nothing else, open to any scraper.
  http::Response ServeMetrics(const http::Request& request) {
    if (request.path != "/metrics") {
      return http::ErrorResponse(404, "this port serves only /metrics; the API is on port " +
                                        std::to_string(server->tcp_port()));
    }
    return Serve(request);
  }

  // Loads the rules (a file:line error refuses the start), starts the
  // notifier and takes back the alerts a previous daemon left active.
  Status StartAlerts() {
    AlertServiceOptions alert_options;
    if (options.alert_rules_path.empty()) {
      alert_options.rules = alerts::DefaultRules();
    } else {
      auto rules = alerts::LoadRulesFile(options.alert_rules_path);
      if (!rules.ok()) return rules.status();
      alert_options.rules = std::move(rules).value();
    }
    alert_options.notify.webhook_urls = options.webhook_urls;
    alert_options.notify.command = options.alert_command;
    alert_options.payload.hostname = state.hostname;
    alert_options.adopted_rules = SelfHealService::AlertRules();  // StartSelfHeal takes them back
    if (!options.ib_sysfs_root.empty()) alert_options.ib_host = host::NewHost(options.ib_sysfs_root);
    auto created = AlertService::Create(&state, jobs.get(), std::move(alert_options));
    if (!created.ok()) return created.status().Annotate("cannot start the alert notifications");
    alerts = std::move(created).value();
    GPUHERD_RETURN_IF_ERROR(alerts->Restore());
    if (!CommitTurn()) return IoError("cannot write " + dir.db_path());
    spdlog::info("{} alert rules ({})", alerts->engine().rules().size(),
                 options.alert_rules_path.empty() ? "built in" : options.alert_rules_path);
    return Status::Ok();
  }

  // Self-healing GPUs: the GPUs' states as stored, requalifications under
  // way carried on. After the queue's and the alerts' reload.
  Status StartSelfHeal() {
    Caller daemon_user;
    daemon_user.uid = ::geteuid();
    daemon_user.gid = ::getegid();
    daemon_user.user = UserName(daemon_user.uid);
    daemon_user.admin = true;
    daemon_user.authenticated = true;
    self_heal_queue = std::make_unique<SelfHealJobQueue>(
        &state, jobs.get(), MakeBurnInLauncher(options.driver, state.sim_reason, state.fleet.gpus.size(), options.home),
        daemon_user);
    self_heal = std::make_unique<SelfHealService>(&state, self_heal_queue.get(), options.self_heal);
    GPUHERD_RETURN_IF_ERROR(self_heal->Load());
    participants.Add(self_heal.get());  // after the queue: reads its drains back on a failed commit
    Impl* raw = this;
    self_heal->SetAlertSink([raw](const alerts::AlertTransition& t) { raw->alerts->RaiseExternal(t); });
    self_heal->AdoptAlerts(alerts->TakeAdopted());
    if (!CommitTurn()) return IoError("cannot write " + dir.db_path());
    const auto& o = options.self_heal;
    spdlog::info("self-healing: requalify after {} idle (level {}){}{}",
                 o.states.requalify_after > 0 ? FormatDuration(o.states.requalify_after) : "never", o.requalify_level,
                 o.allow_gpu_reset ? ", GPU reset allowed" : "",
                 o.shadow_rules.empty() ? "" : ", some rules in shadow mode");
    return Status::Ok();
  }

  // Records the fleet at start: new GPUs, GPUs seen before but missing now.
  Status RecordFleet(TimeMs now) {
    auto known = state.store->ListGpus();
    if (!known.ok()) return known.status();
    for (const auto& info : state.fleet.gpus) {
      bool seen_before = false;
      for (const auto& r : *known) seen_before |= r.uuid == info.uuid;
      state.batch.gpus.push_back(telemetry::ToGpuRecord(info, now));
      if (!seen_before) {
        state.batch.events.push_back(api::NewEvent(now, "gpu.discovered", store::Severity::kInfo,
                                               "new GPU " + std::to_string(info.index) + ": " + info.name +
                                                   " (" + info.pci_bus_id + ")",
                                               info.uuid));
      }
    }
    for (const auto& r : *known) {
      bool present = false;
      for (const auto& info : state.fleet.gpus) present |= r.uuid == info.uuid;
      // A simulated fleet is not the machine's hardware: do not call its
      // absence a fault, and do not let it hide real GPUs' absence.
      nlohmann::json info = nlohmann::json::parse(r.info_json, nullptr, /*allow_exceptions=*/false);
      bool record_was_simulated = info.is_object() && info.value("simulated", false);
      if (!present && record_was_simulated == state.fleet.simulated) {
        state.batch.events.push_back(api::NewEvent(now, "gpu.missing", store::Severity::kWarning,
                                               "GPU " + r.name + " (" + r.pci_bus_id +
                                                   ") was here before and is not found now",
                                               r.uuid));
      }
    }
    return Status::Ok();
  }
};

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Daemon::~Daemon() = default;

Result<std::unique_ptr<Daemon>> Daemon::Create(const DaemonOptions& options, host::Clock* clock) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->clock = clock;
  impl->dir = StateDir{options.home};
  const StateDir& dir = impl->dir;
  impl->unavailable = http::ErrorResponse(
      503, "the daemon is stopping or cannot write its state directory; see its log in " + dir.log_dir());
  GPUHERD_RETURN_IF_ERROR(EnsureStateDir(dir));
  auto lock = LockHome(dir);
  if (!lock.ok()) return lock.status();
  impl->lock_fd = *lock;

  auto token = http::LoadOrCreateToken(dir);
  if (!token.ok()) return token.status();
  impl->token = *token;

  auto store = store::Store::Open(dir.db_path());
  if (!store.ok()) return store.status();
  DaemonState& state = impl->state;
  state.store = std::move(store).value();
  GPUHERD_RETURN_IF_ERROR(KeepIdsAboveFolders(dir, state.store.get(), options.adopt_empty_state));
  state.clock = clock;
  state.host = host::NewHost();
  state.hostname = state.host->Hostname();
  state.started_at = clock->Now();
  state.sample_interval = options.sample_interval;

  auto opened = gpu::OpenDriver(options.driver);
  if (!opened.ok()) return opened.status();
  impl->driver = std::move(opened->driver);
  state.sim_reason = opened->sim_reason;
  auto fleet = impl->driver->Discover();
  if (!fleet.ok()) return fleet.status().Annotate("cannot enumerate GPUs");
  state.fleet = *fleet;
  if (state.fleet.simulated) spdlog::warn("SIMULATED fleet of {} GPUs: {}", state.fleet.gpus.size(), state.sim_reason);
  if (options.mps) {
    if (state.fleet.simulated) {
      return FailedPrecondition("--mps needs real GPUs; this fleet is simulated (" + state.sim_reason + ")");
    }
    std::vector<std::string> uuids;
    for (const auto& g : state.fleet.gpus) uuids.push_back(g.uuid);
    auto mps = StartMpsControl(options.home, uuids);
    if (!mps.ok()) return mps.status();
    impl->mps = std::move(mps).value();
  }

  telemetry::TelemetryOptions telemetry_options;
  telemetry_options.ring_capacity = options.ring_capacity;
  state.telemetry = std::make_unique<telemetry::Telemetry>(telemetry_options);
  state.telemetry->SetFleet(state.fleet);

  TimeMs now = clock->Now();
  GPUHERD_RETURN_IF_ERROR(impl->RecordFleet(now));
  state.batch.events.push_back(api::NewEvent(
      now, "daemon.start", store::Severity::kInfo,
      fmt::format("gpuherd {} started with {} GPUs ({}{})", kVersion, state.fleet.gpus.size(),
                  state.fleet.driver_name, state.fleet.simulated ? ", simulated: " + state.sim_reason : ""),
      "", {{"pid", ::getpid()}, {"driver", state.fleet.driver_name}, {"simulated", state.fleet.simulated}}));
  if (!impl->CommitTurn()) return IoError("cannot write " + dir.db_path());

  Impl* raw = impl.get();
  impl->loop = std::make_unique<EventLoop>([raw] { return raw->CommitTurn(); });

  exec::ExecutorOptions exec_options;
  exec_options.cgroup_mount = options.cgroup_root;
  exec_options.cgroup_parent = exec::CgroupParentFor(options.home);
  exec_options.job_open_files = options.job_open_files;
  auto executor = exec::Executor::Start(exec_options, [raw](exec::ExitRecord record) {
    raw->loop->Post([raw, record = std::move(record)] { raw->jobs->OnExit(record); });
  });
  if (!executor.ok()) return executor.status().Annotate("cannot start the job executor");
  impl->executor = std::move(executor).value();
  if (impl->executor->cgroups().version() == host::CgroupVersion::kNone) {
    spdlog::warn("job containment: {}: a job's processes are found through its shim alone",
                 impl->executor->containment());
  } else {
    spdlog::info("job containment: {}", impl->executor->containment());
  }
  QueueConfig queue_config = options.queue;
  if (auto size = host::ReadMachineSize(*impl->state.host); size.ok()) {
    if (queue_config.host_cpus == 0) queue_config.host_cpus = size->cpus;
    if (queue_config.host_mem_bytes == 0) queue_config.host_mem_bytes = size->mem_bytes;
  } else {
    spdlog::warn("jobs' --cpus and --mem are not counted: {}", size.status().ToString());
  }
  // The queue and its parts: launches (the job environment protocol), fair
  // share, the memory watchdog; the GPU pool lives inside the queue.
  impl->launcher = std::make_unique<queue::JobLauncher>(
      &impl->state.fleet, dir, impl->executor.get(),
      [raw](std::function<void()> task) { raw->loop->Post(std::move(task)); });
  impl->launcher->SetMps(impl->mps.get());
  impl->fair_share = std::make_unique<queue::FairShare>(queue_config.scheduler.weights.fair_window);
  impl->memory_watchdog = std::make_unique<queue::MemoryWatchdog>(&impl->state, impl->executor.get(),
                                                                  queue_config.memory_watchdog_grace);
  impl->jobs = std::make_unique<JobService>(
      &impl->state, impl->executor.get(),
      QueueParts{impl->launcher.get(), impl->fair_share.get(), impl->memory_watchdog.get()}, queue_config);
  // Pipelines' end of turn runs before the queue's; the service exists later.
  impl->AddParticipant([raw] { if (raw->pipelines) raw->pipelines->EndOfTurn(); }, nullptr);
  impl->participants.Add(impl->jobs.get());
  // After the queue has read itself back from a failed commit, the runs do.
  impl->AddParticipant(nullptr, [raw](bool ok) { if (raw->pipelines) raw->pipelines->AfterCommit(ok); });
  impl->AddParticipant(nullptr, [raw](bool ok) { if (raw->slurm_backend) raw->slurm_backend->AfterCommit(ok); });
  impl->AddParticipant(nullptr, [raw](bool ok) {
    if (!raw->alerts) return;
    if (ok && raw->burnins_recorded) raw->alerts->OnBurnInsRecorded();
    raw->alerts->AfterCommit(ok);
  });
  if (auto* sim = dynamic_cast<gpu::sim::SimDriver*>(impl->driver.get())) {
    impl->jobs->SetLoadListener([sim, dir, raw](const std::vector<JobLoad>& jobs) {
      SimulateJobLoad(*sim, dir, raw->state.fleet.gpus.size(), jobs);
    });
  }
  impl->attempts = std::make_unique<AttemptLog>(&impl->state);
  GPUHERD_RETURN_IF_ERROR(impl->attempts->Load());
  impl->jobs->SetAttemptLog(impl->attempts.get());
  GPUHERD_RETURN_IF_ERROR(impl->jobs->Load());
  if (!impl->CommitTurn()) return IoError("cannot write " + dir.db_path());
  // Every running attempt is adopted now; the groups of the others are stale.
  if (int stale = impl->executor->RemoveStaleCgroups(); stale > 0) {
    spdlog::info("removed {} control groups of jobs that ended while no daemon ran", stale);
  }
  // After the queue's reload is committed, so that the runs see their jobs'
  // final states; only then does the queue report changes to them.
  impl->local_backend = std::make_unique<LocalBackend>(impl->jobs.get(), &impl->state);
  std::vector<JobBackend*> backends = {impl->local_backend.get()};
  if (!options.slurm.site.shared_dir.empty()) {
    impl->slurm_runner = exec::NewProcessRunner();
    auto slurm = SlurmBackend::Create(&impl->state, impl->slurm_runner.get(), options.slurm,
                                      [raw](std::function<void()> task) { raw->loop->Post(std::move(task)); });
    if (!slurm.ok()) return slurm.status();
    impl->slurm_backend = std::move(slurm).value();
    backends.push_back(impl->slurm_backend.get());
  } else if (options.pipeline_backend == "slurm") {
    return InvalidArgument("pipelines on Slurm need a shared folder for the jobs' files: --slurm-shared-dir DIR");
  }
  impl->pipelines = std::make_unique<PipelineService>(
      &impl->state, backends, options.pipeline_backend, dir,
      [raw](std::function<void()> task) { raw->loop->Post(std::move(task)); });
  GPUHERD_RETURN_IF_ERROR(impl->pipelines->Load());
  for (JobBackend* b : backends) {
    const bool local = b == impl->local_backend.get();
    b->SetStateListener([raw, local](const sched::Job& job) {
      raw->pipelines->OnJobChanged(job);
      // Requalification burn-ins are jobs of this machine's queue.
      if (local && raw->self_heal) raw->self_heal->OnJobChanged(job);
    });
  }
  if (!impl->CommitTurn()) return IoError("cannot write " + dir.db_path());
  GPUHERD_RETURN_IF_ERROR(impl->StartAlerts());
  impl->pipelines->SetAlertSink(
      [raw](const alerts::AlertTransition& t) { raw->alerts->RaiseExternal(t); });
  impl->risk = RiskService::Create(&impl->state, impl->alerts.get(), predict::ModelPath(impl->dir));
  GPUHERD_RETURN_IF_ERROR(impl->StartSelfHeal());
  impl->metrics = std::make_unique<MetricsService>(&impl->state, impl->jobs.get(), impl->alerts.get());
  impl->metrics->SetSelfHeal(impl->self_heal.get());
  // The servers start below; /metrics is served only after that.
  impl->metrics->SetConnections([raw] {
    telemetry::ConnectionMetrics sum;
    for (const http::Server* server : {raw->server.get(), raw->metrics_server.get()}) {
      if (server == nullptr) continue;
      http::ConnectionStats stats = server->connection_stats();
      sum.open += stats.open;
      sum.limit += stats.limit;
      sum.refused_per_user += stats.refused_per_user;
      sum.refused_per_address += stats.refused_per_address;
      sum.refused_total += stats.refused_total;
      sum.accept_errors += stats.accept_errors;
    }
    return sum;
  });
  routes::RouteContext route_context;
  route_context.state = &impl->state;
  route_context.jobs = impl->jobs.get();
  route_context.attempts = impl->attempts.get();
  route_context.pipelines = impl->pipelines.get();
  route_context.alerts = impl->alerts.get();
  route_context.metrics = impl->metrics.get();
  route_context.self_heal = impl->self_heal.get();
  route_context.burnin_launcher =
      MakeBurnInLauncher(options.driver, impl->state.sim_reason, impl->state.fleet.gpus.size(), options.home);
  route_context.request_stop = [raw] { raw->loop->Stop(); };
  impl->routes = std::make_unique<routes::Routes>(std::move(route_context));
  impl->idempotency = std::make_unique<IdempotencyKeys>(&impl->state);
  impl->allowed_hosts = routes::AllowedHosts(impl->state.hostname, options.allow_hosts);

  telemetry::SamplerOptions sampler_options;
  sampler_options.interval = options.sample_interval;
  auto sampler = telemetry::Sampler::Create(impl->driver.get(), clock, state.fleet, sampler_options);
  if (!sampler.ok()) return sampler.status();
  impl->sampler = std::move(sampler).value();

  http::ServerOptions http;
  http.tcp_port = options.port;
  http.unix_path = dir.socket_path();
  if (!options.socket_path.empty() && options.socket_path != dir.socket_path()) {
    GPUHERD_RETURN_IF_ERROR(PrepareSocketDir(options.socket_path));
    http.unix_path = options.socket_path;
  }
  // Handlers mostly wait for the loop's next commit; more of them let more
  // submissions share one commit.
  http.threads = 8;
  ConnectionPlan connections = PlanConnections(options.max_connections, options.max_connections_per_user,
                                               options.metrics_port >= 0, CurrentFdLimit(), ::geteuid());
  if (!connections.lowered.empty()) spdlog::warn("{}", connections.lowered);
  http.limits = connections.api;
  spdlog::info("HTTP connections: at most {} ({} kept for admins), {} per user", http.limits.total,
               http.limits.reserved, http.limits.per_user);
  auto server = http::Server::Start(http, [raw](const http::Request& r) { return raw->Serve(r); });
  if (!server.ok()) return server.status();
  impl->server = std::move(server).value();
  if (http.unix_path != dir.socket_path()) GPUHERD_RETURN_IF_ERROR(LinkHomeSocket(dir, http.unix_path));
  if (options.metrics_port >= 0) {
    http::ServerOptions metrics_http;
    metrics_http.tcp_host = options.metrics_host;
    metrics_http.tcp_port = options.metrics_port;
    metrics_http.limits = connections.metrics;
    auto metrics_server = http::Server::Start(metrics_http, [raw](const http::Request& r) { return raw->ServeMetrics(r); });
    if (!metrics_server.ok()) return metrics_server.status().Annotate("cannot serve /metrics (--metrics-port)");
    impl->metrics_server = std::move(metrics_server).value();
  }

  GPUHERD_RETURN_IF_ERROR(WriteFileAtomically(dir.pid_path(), std::to_string(::getpid()) + "\n", 0644));
  GPUHERD_RETURN_IF_ERROR(
      WriteFileAtomically(dir.port_path(), std::to_string(impl->server->tcp_port()) + "\n", 0644));
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Status Daemon::Run() {
  Impl* impl = impl_.get();
  GPUHERD_RETURN_IF_ERROR(impl->sampler->Start([impl](telemetry::SampleRound round) {
    impl->loop->Post([impl, round = std::move(round)] { impl->Ingest(round); });
  }));
  spdlog::info("gpuherd {} serving on {} and 127.0.0.1:{}; state in {}", kVersion, impl->dir.socket_path(),
               impl->server->tcp_port(), impl->dir.root);
  impl->loop->Run();

  impl->sampler->Stop();
  if (impl->metrics_server) impl->metrics_server->Stop();
  impl->server->Stop();
  impl->executor->Shutdown();
  TimeMs now = impl->clock->Now();
  for (auto& r : impl->state.telemetry->Flush()) impl->state.batch.rollups.push_back(std::move(r));
  impl->state.batch.events.push_back(
      api::NewEvent(now, "daemon.stop", store::Severity::kInfo, "gpuherd stopped", "", {{"pid", ::getpid()}}));
  bool committed = impl->CommitTurn();
  ::unlink(impl->dir.pid_path().c_str());
  spdlog::info("gpuherd stopped");
  return committed ? Status::Ok() : IoError("the last state could not be written to " + impl->dir.db_path());
}

void Daemon::Stop() { impl_->loop->Stop(); }

int Daemon::tcp_port() const { return impl_->server->tcp_port(); }

int Daemon::metrics_port() const { return impl_->metrics_server ? impl_->metrics_server->tcp_port() : -1; }

std::string Daemon::socket_path() const { return impl_->dir.socket_path(); }

}  // namespace gpuherd::daemon
