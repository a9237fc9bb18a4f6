// gpuherd burnin: tests GPUs at one of three levels, all chosen GPUs at once,
// with live progress, then ranks them by health score and records the runs.
// Exit codes: see burnin_format.h (0 healthy, 1 faults, 2 usage, 3 could not
// run, 130 stopped).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <stop_token>
#include <thread>

#include <fmt/format.h>

#include "burnin/gpu_reset.h"
#include "burnin/report.h"
#include "burnin/runner.h"
#include "cli/burnin_format.h"
#include "cli/burnin_history.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"
#include "exec/command_runner.h"
#include "gpu/compute_open.h"
#include "gpu/open.h"
#include "host/clock.h"

namespace gpuherd::cli {
namespace {

// Earlier runs per model behind the fleet median.
constexpr int kReferenceRuns = 200;
// Without a terminal, a GPU's progress line at most this often (and at each
// phase change).
constexpr DurationMs kPlainProgressInterval = 10 * kSecondMs;

struct BurnInFlags {
  DriverFlags driver;
  std::string gpus = "all";
  int level = 0;
  std::string duration = "15m";
  CLI::Option* duration_option = nullptr;
  double memtest_fraction = 0.90;
  bool json = false;
  std::string report;
  bool direct = false;
  bool reset_first = false;
};

int Error(int code, const std::string& message) {
  std::fprintf(stderr, "gpuherd: %s\n", PrintableLines(message).c_str());
  return code;
}

// Turns SIGINT and SIGTERM into a stop request. The signals are blocked before
// any other thread exists, so every thread inherits the mask, and a watcher
// thread takes them with sigtimedwait: nothing runs inside a signal handler.
// A second signal ends the process at once.
class StopOnSignal {
 public:
  StopOnSignal() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, &previous_);
    watcher_ = std::jthread([this](std::stop_token done) { Watch(done); });
  }
  ~StopOnSignal() {
    watcher_.request_stop();
    watcher_.join();
    pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

  std::stop_token token() const { return source_.get_token(); }
  int signal() const { return signal_.load(); }

 private:
  void Watch(std::stop_token done) {
    const timespec poll = {0, 200'000'000};
    while (!done.stop_requested()) {
      const int sig = sigtimedwait(&signals_, nullptr, &poll);
      if (sig <= 0) continue;
      if (signal_.exchange(sig) != 0) {
        static const char kQuit[] = "\ngpuherd: second signal: quitting now; the runs are not recorded\n";
        (void)!::write(STDERR_FILENO, kQuit, sizeof(kQuit) - 1);
        std::_Exit(kBurnInExitAborted);
      }
      std::fprintf(stderr, "\ngpuherd: %s: stopping the burn-in and freeing the GPUs (again to quit at once)\n",
                   sig == SIGINT ? "interrupted" : "terminated");
      source_.request_stop();
    }
  }

  sigset_t signals_, previous_;
  std::stop_source source_;
  std::atomic<int> signal_{0};
  std::jthread watcher_;
};

// "all", or indices and UUIDs separated by commas; positions in the fleet,
// in its order.
Result<std::vector<int>> ChooseGpus(const std::string& text, const gpu::Fleet& fleet) {
  if (fleet.gpus.empty()) return Unavailable("the driver found no GPUs to test");
  std::set<int> chosen;
  if (text == "all") {
    for (size_t i = 0; i < fleet.gpus.size(); ++i) chosen.insert(static_cast<int>(i));
    return std::vector<int>(chosen.begin(), chosen.end());
  }
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string id = text.substr(start, comma - start);
    start = comma + 1;
    if (id.empty()) continue;
    int position = gpu::FindGpu(fleet.gpus, id);
    if (position < 0) {
      return InvalidArgument(fmt::format("--gpu: no GPU '{}' in this fleet of {} (indices 0-{}); give indices or "
                                         "UUIDs separated by commas, or all",
                                         id, fleet.gpus.size(), fleet.gpus.size() - 1));
    }
    chosen.insert(position);
  }
  if (chosen.empty()) return InvalidArgument("--gpu names no GPU; give indices or UUIDs, or all");
  return std::vector<int>(chosen.begin(), chosen.end());
}

// The options from the flags; kInvalidArgument says which flag to fix.
Result<burnin::BurnInOptions> OptionsFromFlags(const BurnInFlags& flags) {
  burnin::BurnInOptions options;
  if (flags.level < 1 || flags.level > 3) {
    return InvalidArgument(fmt::format(
        "--level must be 1 (quick check), 2 (adds the memory test) or 3 (adds sustained stress); got {}",
        flags.level));
  }
  options.level = flags.level;
  DurationMs duration = 0;
  if (!ParseDuration(flags.duration, &duration) || duration <= 0) {
    return InvalidArgument("--duration takes a positive duration like 30s, 15m or 72h; got '" + flags.duration +
                           "'");
  }
  options.stress_duration = duration;
  options.memtest_fraction = flags.memtest_fraction;
  options.seed = flags.driver.seed;
  Status valid = burnin::ValidateOptions(options);
  if (!valid.ok()) return valid.Annotate("check --duration and --memtest-fraction");
  return options;
}

std::string Label(const gpu::GpuInfo& gpu) { return fmt::format("GPU {} ({})", gpu.index, gpu.name); }

// Writes --report's HTML, if asked for: `code`, or could-not-run when the
// file cannot be written.
int WriteReport(const BurnInFlags& flags, const std::vector<burnin::BurnInRun>& ranked, int code) {
  if (flags.report.empty()) return code;
  Status written = WriteFileAtomically(flags.report, burnin::RenderHtmlReport(ranked), 0644, /*sync=*/false);
  return written.ok() ? code : Error(kBurnInExitCouldNotRun, "cannot write the report: " + written.message());
}

// The daemon's GPUs are tested by a maintenance job of its queue: it starts
// once no job holds them and keeps new work off them meanwhile. Its stderr
// (the progress) is relayed; its stdout is the runs as JSON, which the job
// also recorded in the daemon's store.
int RunThroughDaemon(const CommandContext& ctx, const BurnInFlags& flags, DaemonClient& client,
                     const StopOnSignal& stop) {
  nlohmann::json body = {{"level", flags.level}};
  if (flags.gpus == "all") {
    body["gpus"] = "all";
  } else {
    body["gpus"] = nlohmann::json::array();
    size_t start = 0;
    while (start <= flags.gpus.size()) {
      size_t comma = std::min(flags.gpus.find(',', start), flags.gpus.size());
      if (comma > start) body["gpus"].push_back(flags.gpus.substr(start, comma - start));
      start = comma + 1;
    }
  }
  if (flags.level == 3) body["duration"] = flags.duration;
  if (flags.level >= 2) body["memtest_fraction"] = flags.memtest_fraction;
  auto started = client.Post("/v1/burnin", body);
  if (!started.ok()) {
    const bool usage = started.status().code() == Code::kInvalidArgument;
    return Error(usage ? kBurnInExitUsage : kBurnInExitCouldNotRun,
                 "the daemon did not start the burn-in: " + started.status().message() +
                     (started.status().code() == Code::kPermissionDenied
                          ? " (or run it as root; --direct tests from this process once no job uses the GPUs)"
                          : ""));
  }
  const int64_t id = (*started)["id"].get<int64_t>();
  const std::string job = "/v1/jobs/" + std::to_string(id);
  std::fprintf(stderr, "burn-in level %d runs as job %lld of the daemon's queue; it starts once no job holds its "
                       "GPUs, and no new work starts there meanwhile. Ctrl-C cancels it.\n",
               flags.level, static_cast<long long>(id));

  std::string last_state, last_reason;
  int64_t err_offset = 0;
  bool cancel_sent = false;
  nlohmann::json shown;
  for (;;) {
    if (stop.token().stop_requested() && !cancel_sent) {
      auto cancelled = client.Post(job + "/cancel", nlohmann::json::object());
      if (!cancelled.ok()) std::fprintf(stderr, "gpuherd: cannot cancel job %lld: %s\n", static_cast<long long>(id),
                                        Printable(cancelled.status().message()).c_str());
      cancel_sent = true;
    }
    auto got = client.Get(job);
    if (!got.ok()) return Error(kBurnInExitCouldNotRun, "lost the burn-in job: " + got.status().message());
    shown = *got;
    const std::string state = shown.value("state", std::string());
    const std::string reason = shown.value("reason", std::string());
    if (state == "pending" && (state != last_state || reason != last_reason)) {
      std::fprintf(stderr, "job %lld pending: %s\n", static_cast<long long>(id), Printable(reason).c_str());
    }
    last_state = state;
    last_reason = reason;
    auto err = client.Get(job + "/logs?stream=stderr&offset=" + std::to_string(err_offset));
    if (err.ok()) {
      std::fputs((*err)["data"].get<std::string>().c_str(), stderr);
      err_offset = (*err)["next_offset"].get<int64_t>();
    }
    if (state == "completed" || state == "failed" || state == "cancelled") break;
    ::usleep(500'000);
  }

  std::string out;
  for (int64_t offset = 0;;) {
    auto chunk = client.Get(job + "/logs?stream=stdout&offset=" + std::to_string(offset));
    if (!chunk.ok()) return Error(kBurnInExitCouldNotRun, "cannot read the burn-in's output: " + chunk.status().message());
    const std::string data = (*chunk)["data"].get<std::string>();
    out += data;
    offset = (*chunk)["next_offset"].get<int64_t>();
    if (data.empty()) break;
  }
  nlohmann::json result = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  std::vector<burnin::BurnInRun> runs;
  if (result.is_object() && result.contains("runs") && result["runs"].is_array()) {
    for (const auto& r : result["runs"]) {
      auto run = burnin::BurnInRunFromJson(r);
      if (run.ok()) runs.push_back(std::move(run).value());
    }
  }
  const std::string state = shown.value("state", std::string());
  if (runs.empty()) {
    if (state == "cancelled") return Error(kBurnInExitAborted, "the burn-in job was cancelled before it reported");
    return Error(kBurnInExitCouldNotRun, fmt::format("burn-in job {} ended {} without results: {} (`gpuherd logs {} "
                                                     "--stderr` shows its output)",
                                                     id, state, shown.value("reason", std::string()), id));
  }
  std::vector<burnin::BurnInRun> ranked = RankRuns(runs);
  if (flags.json) {
    result["job"] = id;
    std::printf("%s\n", result.dump(2).c_str());
  } else {
    if (result.value("simulated", false)) {
      std::printf("%s (%s): the scores describe simulated cards, not hardware.\n",
                  Colored("SIMULATED FLEET", kYellow, ctx.color()).c_str(),
                  Printable(result.value("sim_reason", std::string())).c_str());
    }
    std::fputs(RenderBurnInTable(ranked, ctx.color()).c_str(), stdout);
    std::printf("Recorded by the daemon (job %lld); `gpuherd health GPU` shows a GPU's checks.\n",
                static_cast<long long>(id));
  }
  std::fflush(stdout);
  int code = cancel_sent ? kBurnInExitAborted : BurnInExitCode(runs);
  code = WriteReport(flags, ranked, code);
  return code;
}

// --reset-first (a requalification under `daemon --allow-gpu-reset`):
// burnin/gpu_reset.h resets the GPU only when no process uses it.
burnin::Check ResetGpu(gpu::Driver& driver, const gpu::GpuInfo& info, host::Clock& clock) {
  auto runner = exec::NewProcessRunner();
  burnin::Check c = burnin::ResetBeforeBurnIn(driver, info, clock.Now(), *runner);
  std::fprintf(stderr, "GPU %d: %s\n", info.index, Printable(c.message).c_str());
  return c;
}

int RunCommand(const CommandContext& ctx, const BurnInFlags& flags) {
  // First, before any thread starts: every thread must inherit the mask.
  StopOnSignal stop;

  auto options = OptionsFromFlags(flags);
  if (!options.ok()) return Error(kBurnInExitUsage, options.status().message());
  if (flags.duration_option->count() > 0 && flags.level < 3) {
    std::fprintf(stderr, "note: --duration applies to level 3 only; level %d ignores it\n", flags.level);
  }
  if (!flags.report.empty()) {
    const std::filesystem::path parent = std::filesystem::absolute(flags.report).parent_path();
    std::error_code ec;
    if (!std::filesystem::is_directory(parent, ec)) {
      return Error(kBurnInExitUsage, "--report: the directory " + parent.string() + " does not exist");
    }
  }

  // While a daemon runs, its GPUs are its own and so is the database.
  DaemonClient client(ctx.dir(), 10000);
  const bool daemon_runs = client.Reachable();
  if (daemon_runs && !flags.direct && !flags.driver.asked_for_sim()) {
    return RunThroughDaemon(ctx, flags, client, stop);
  }

  gpu::DriverChoice choice = flags.driver.choice();
  // A burn-in of simulated cards stands in for real ones only when asked for.
  choice.fallback_sim_count = 0;
  auto opened = gpu::OpenDriver(choice);
  if (!opened.ok()) {
    return Error(kBurnInExitCouldNotRun, "cannot open the GPU driver: " + opened.status().message() +
                                             " (to try the burn-in without GPUs, add --sim N)");
  }
  gpu::Driver& driver = *opened->driver;
  auto fleet = driver.Discover();
  if (!fleet.ok()) return Error(kBurnInExitCouldNotRun, "cannot enumerate the GPUs: " + fleet.status().message());
  auto indices = ChooseGpus(flags.gpus, *fleet);
  if (!indices.ok()) {
    return Error(indices.status().code() == Code::kInvalidArgument ? kBurnInExitUsage : kBurnInExitCouldNotRun,
                 indices.status().message());
  }
  auto clock = host::NewRealClock();
  auto compute = gpu::OpenComputeBackend(driver, *clock, choice);
  if (!compute.ok()) return Error(kBurnInExitCouldNotRun, "cannot run work on the GPUs: " + compute.status().message());

  // A simulated burn-in run by hand next to a daemon must not put simulated
  // cards into that daemon's history (`gpuherd health` would list them beside
  // the real ones). The daemon's own burn-in jobs (GPUHERD_JOB_ID set by its
  // launcher) test the daemon's simulated fleet and do record.
  const bool unrecorded = daemon_runs && flags.driver.asked_for_sim() &&
                          std::getenv("GPUHERD_JOB_ID") == nullptr;
  std::unique_ptr<BurnInHistory> history;
  if (unrecorded) {
    std::fprintf(stderr, "note: a daemon runs; this simulated burn-in is not recorded in its history\n");
  } else if (daemon_runs) {
    history = BurnInHistory::ViaDaemon(&client);
    Status allowed = history->CheckCanRecord();
    if (!allowed.ok()) return Error(kBurnInExitCouldNotRun, "the daemon would not record the results: " + allowed.message());
  } else {
    auto store = BurnInHistory::ViaStore(ctx.dir(), /*writable=*/true);
    if (!store.ok()) return Error(kBurnInExitCouldNotRun, "cannot record burn-in results: " + store.status().message());
    history = std::move(store).value();
  }

  std::map<int, std::string> labels;
  std::set<std::string> models;
  for (int i : *indices) {
    labels[i] = Label(fleet->gpus[i]);
    models.insert(fleet->gpus[i].name);
  }
  for (const std::string& model : models) {
    if (!history) break;
    auto earlier = history->RunsOfModel(model, kReferenceRuns);
    if (!earlier.ok()) return Error(kBurnInExitCouldNotRun, "cannot read earlier burn-ins: " + earlier.status().message());
    options->references[model] = burnin::ReferenceFromHistory(model, *earlier);
  }

  if (driver.simulated()) {
    std::fprintf(stderr, "SIMULATED FLEET (%s): these are not real GPUs\n", Printable(opened->sim_reason).c_str());
  }
  std::fprintf(stderr, "burn-in level %d of %zu GPU%s%s; Ctrl-C stops it\n", options->level, indices->size(),
               indices->size() == 1 ? "" : "s",
               options->level == 3 ? (", stress for " + FormatDuration(options->stress_duration)).c_str() : "");
  std::map<int, burnin::Check> resets;
  if (flags.reset_first) {
    for (int i : *indices) resets[i] = ResetGpu(driver, fleet->gpus[i], *clock);
  }
  ProgressDisplay display(::isatty(STDERR_FILENO) != 0, labels, kPlainProgressInterval);
  host::Clock* clock_ptr = clock.get();
  auto runs = burnin::RunBurnIn(driver, *fleet, *indices, **compute, *clock, *options, stop.token(),
                                [&](const std::vector<burnin::Progress>& progress) {
                                  std::fputs(display.Update(progress, clock_ptr->Now()).c_str(), stderr);
                                  std::fflush(stderr);
                                });
  if (!runs.ok()) {
    return Error(runs.status().code() == Code::kInvalidArgument ? kBurnInExitUsage : kBurnInExitCouldNotRun,
                 runs.status().message());
  }

  for (burnin::BurnInRun& run : *runs) {
    if (auto r = resets.find(run.gpu_index); r != resets.end()) run.checks.insert(run.checks.begin(), r->second);
  }
  // Run as a job of the daemon's queue: the runs name it, and a passing one
  // may return a GPU the daemon drained to work.
  if (const char* job = std::getenv("GPUHERD_JOB_ID")) {
    for (burnin::BurnInRun& run : *runs) run.job_id = std::atoll(job);
  }
  // A daemon started during a long burn-in owns the database by now.
  if (history && !history->via_daemon() && client.Reachable()) {
    // A daemon started during a simulated burn-in run by hand is not told either.
    if (flags.driver.asked_for_sim() && std::getenv("GPUHERD_JOB_ID") == nullptr) {
      history.reset();
    } else {
      history = BurnInHistory::ViaDaemon(&client);
    }
  }
  Status recorded = history ? history->Record(&*runs) : Status::Ok();

  std::vector<burnin::BurnInRun> ranked = RankRuns(*runs);
  if (flags.json) {
    nlohmann::json out = {{"runs", nlohmann::json::array()}, {"simulated", driver.simulated()}};
    if (driver.simulated()) out["sim_reason"] = opened->sim_reason;
    out["recorded"] = history != nullptr && recorded.ok();
    for (const burnin::BurnInRun& run : ranked) out["runs"].push_back(burnin::ToJson(run));
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    if (driver.simulated()) {
      std::printf("%s (%s): the scores describe simulated cards, not hardware.\n",
                  Colored("SIMULATED FLEET", kYellow, ctx.color()).c_str(), Printable(opened->sim_reason).c_str());
    }
    std::fputs(RenderBurnInTable(ranked, ctx.color()).c_str(), stdout);
    if (!history) {
      std::printf("Not recorded: a daemon runs, and its history is of its own GPUs.\n");
    } else if (recorded.ok()) std::printf("Recorded in %s; `gpuherd health GPU` shows a GPU's checks.\n", Printable(history->where()).c_str());
  }
  std::fflush(stdout);

  int code = stop.signal() != 0 ? kBurnInExitAborted : BurnInExitCode(*runs);
  code = WriteReport(flags, ranked, code);
  if (history && !recorded.ok()) {
    code = Error(kBurnInExitCouldNotRun, "the results were not recorded in " + history->where() + ": " +
                                              recorded.message() + " (keep the --json output)");
  }
  return code;
}

}  // namespace

void AddBurnInCommand(CLI::App& app, CommandContext* ctx) {
  auto flags = std::make_shared<BurnInFlags>();
  CLI::App* cmd = app.add_subcommand(
      "burnin", "Test GPUs (1: quick check, 2: + memory test, 3: + sustained stress) and score their health");
  cmd->add_option("--gpu", flags->gpus, "GPUs to test: indices or UUIDs separated by commas, or all")
      ->capture_default_str();
  cmd->add_option("--level", flags->level, "1, 2 or 3; a level runs the ones below it too")->required();
  flags->duration_option =
      cmd->add_option("--duration", flags->duration, "Sustained stress of level 3, e.g. 30s, 15m, 72h")
          ->capture_default_str();
  cmd->add_option("--memtest-fraction", flags->memtest_fraction,
                  "Share of free memory the level-2 memory test covers (0-1)")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the runs as JSON");
  cmd->add_option("--report", flags->report, "Also write an HTML report with temperature curves to this file");
  cmd->add_flag("--direct", flags->direct, "Test the GPUs from this process even though a daemon runs");
  cmd->add_flag("--reset-first", flags->reset_first,
                "Reset each GPU (nvidia-smi --gpu-reset) before testing it, only when no process uses it");
  flags->driver.AddTo(cmd);
  cmd->callback([ctx, flags] { ctx->exit_code = RunCommand(*ctx, *flags); });
}

}  // namespace gpuherd::cli
