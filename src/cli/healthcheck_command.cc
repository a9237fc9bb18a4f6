// gpuherd healthcheck [--slurm] [--node NAME] [--dry-run] [--json]: level 1's
// idle checks on every GPU now, plus each GPU's latest burn-in verdict; with
// --slurm, drains this node in Slurm when a GPU is unhealthy and resumes it
// when all are well again (only a drain of its own). Made for slurm.conf's
// HealthCheckProgram: no daemon needed, a second or two on a real node.
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "burnin/idle_checks.h"
#include "api/decode.h"
#include "api/gpus.h"
#include "burnin/node_health.h"
#include "cli/burnin_history.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/no_driver.h"
#include "cli/table.h"
#include "exec/command_runner.h"
#include "exec/slurm.h"
#include "host/clock.h"
#include "host/host.h"

namespace gpuherd::cli {
namespace {

struct HealthcheckFlags {
  bool slurm = false;
  std::string node;
  bool dry_run = false;
  bool json = false;
  DriverFlags driver;
};

// Each GPU's latest finished burn-in, from the daemon when it answers
// quickly, else from the state database; empty (with a note) without either.
std::map<std::string, burnin::Health> LatestHealth(const CommandContext& ctx, std::string* note) {
  std::map<std::string, burnin::Health> out;
  auto history = BurnInHistory::ForReading(ctx.dir(), 3000);
  if (!history.ok()) {
    *note = "no burn-in history (" + history.status().message() + ")";
    return out;
  }
  auto latest = (*history)->LatestPerGpu();
  if (!latest.ok()) {
    *note = "no burn-in history (" + latest.status().message() + ")";
    return out;
  }
  for (const burnin::BurnInRun& run : *latest) out[run.gpu_uuid] = run.health;
  return out;
}

// One GPU's level-1 checks from a reading; a GPU that did not answer fails.
std::vector<burnin::Check> Level1(const gpu::GpuInfo& info, const Result<gpu::GpuSample>& sample) {
  if (!sample.ok()) {
    burnin::Check lost;
    lost.name = "driver";
    lost.outcome = burnin::CheckOutcome::kFail;
    lost.reason = "gpu_not_answering";
    return {lost};
  }
  std::vector<burnin::Check> checks = burnin::IdleChecks(info, *sample);
  checks.push_back(burnin::PcieLinkCheck(info, *sample, std::nullopt, 1));
  return checks;
}

// The running daemon's GPUs as it reads them, judged with its self-healing
// state: a quarantined, requalifying or retired GPU is kept from work, so the
// node is not well. nullopt when no daemon answers.
std::optional<Result<std::vector<burnin::GpuJudgement>>> JudgeDaemonGpus(
    const CommandContext& ctx, const std::map<std::string, burnin::Health>& health, bool* simulated) {
  DaemonClient client(ctx.dir(), 3000);
  if (!client.Reachable()) return std::nullopt;
  auto reply = client.Get("/v1/gpus");
  if (!reply.ok()) return Result<std::vector<burnin::GpuJudgement>>(reply.status());
  auto fleet = api::Decode<api::Fleet>(*reply, "the daemon's GPUs");
  if (!fleet.ok()) return Result<std::vector<burnin::GpuJudgement>>(fleet.status());
  *simulated = fleet->simulated;
  std::vector<burnin::GpuJudgement> judged;
  for (const api::Gpu& g : fleet->gpus) {
    Result<gpu::GpuSample> sample = g.state == "lost" || !g.sample
                                        ? Result<gpu::GpuSample>(Unavailable(g.last_error))
                                        : Result<gpu::GpuSample>(*g.sample);
    std::vector<burnin::Check> checks = Level1(g.info, sample);
    if (g.health_state && g.health_state->state != "in_service") {
      burnin::Check state;
      state.name = "self_heal";
      const std::string& st = g.health_state->state;
      state.outcome = st == "suspect" ? burnin::CheckOutcome::kWarn : burnin::CheckOutcome::kFail;
      state.reason = st;
      state.message = g.health_state->reason;
      checks.push_back(state);
    }
    auto h = health.find(g.info.uuid);
    judged.push_back(burnin::JudgeGpu(g.info.index, g.info.uuid, checks,
                                      h == health.end() ? std::nullopt : std::optional<burnin::Health>(h->second)));
  }
  return Result<std::vector<burnin::GpuJudgement>>(std::move(judged));
}

Status Run(const CommandContext& ctx, const HealthcheckFlags& flags, int* exit_code) {
  auto host = host::NewHost();
  auto clock = host::NewRealClock();
  std::string note;
  const auto health = LatestHealth(ctx, &note);
  std::vector<burnin::GpuJudgement> judged;
  bool simulated = false;
  // With a daemon running, its GPUs are the node's (a simulated fleet asked
  // for with --sim is judged here instead).
  auto from_daemon = flags.driver.asked_for_sim() ? std::nullopt : JudgeDaemonGpus(ctx, health, &simulated);
  if (from_daemon) {
    if (!from_daemon->ok()) return from_daemon->status().Annotate("cannot read the daemon's GPUs");
    judged = std::move(from_daemon->value());
  } else {
    auto opened = gpu::OpenDriver(StrictChoice(flags.driver));
    if (!opened.ok()) {
      if (!flags.driver.asked_for_sim()) return NoDriver(opened.status());
      return opened.status().Annotate("cannot open the GPU driver");
    }
    auto fleet = opened->driver->Discover();
    if (!fleet.ok()) return fleet.status().Annotate("cannot enumerate the GPUs");
    simulated = fleet->simulated;
    for (const gpu::GpuInfo& info : fleet->gpus) {
      auto h = health.find(info.uuid);
      judged.push_back(burnin::JudgeGpu(info.index, info.uuid, Level1(info, opened->driver->Sample(info.index, clock->Now())),
                                        h == health.end() ? std::nullopt : std::optional<burnin::Health>(h->second)));
    }
  }

  std::string node = flags.node.empty() ? host->Hostname().substr(0, host->Hostname().find('.')) : flags.node;
  std::string state, reason;
  auto runner = exec::NewProcessRunner();
  if (flags.slurm) {
    exec::CommandRequest show;
    show.argv = {"scontrol", "show", "node", node};
    show.timeout = 10 * kSecondMs;
    auto shown = runner->Run(show);
    if (!shown.ok()) return shown.status().Annotate("cannot ask Slurm about node " + node);
    if (shown->exit_code != 0) {
      return NotFound("scontrol does not know node '" + node + "': " + shown->err + " (pass --node NAME)");
    }
    auto fields = exec::slurm::ParseScontrolNode(shown->out);
    state = fields["State"];
    reason = fields["Reason"];
  }
  burnin::NodeAction action = burnin::DecideNodeAction(node, state, reason, judged);
  std::vector<std::string> command;
  if (flags.slurm && action.kind == burnin::NodeAction::Kind::kDrain) {
    command = {"scontrol", "update", "nodename=" + node, "state=drain", "reason=" + action.reason};
  } else if (flags.slurm && action.kind == burnin::NodeAction::Kind::kResume) {
    command = {"scontrol", "update", "nodename=" + node, "state=resume"};
  }
  if (!command.empty() && !flags.dry_run) {
    exec::CommandRequest update;
    update.argv = command;
    update.timeout = 10 * kSecondMs;
    auto done = runner->Run(update);
    if (!done.ok()) return done.status().Annotate("cannot " + std::string(burnin::NodeActionName(action.kind)));
    if (done->exit_code != 0) {
      return Unavailable("scontrol refused to " + std::string(burnin::NodeActionName(action.kind)) + " " + node +
                         ": " + done->err);
    }
  }
  int unhealthy = 0;
  for (const auto& g : judged) unhealthy += g.unhealthy ? 1 : 0;
  if (flags.json) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : judged) {
      gpus.push_back({{"index", g.index}, {"uuid", g.uuid}, {"unhealthy", g.unhealthy}, {"why", g.why}});
    }
    std::string shell;
    for (const auto& c : command) shell += (shell.empty() ? "" : " ") + exec::slurm::ShellQuote(c);
    nlohmann::json out = {{"node", node},         {"gpus", gpus},
                          {"slurm_state", state}, {"slurm_reason", reason},
                          {"action", burnin::NodeActionName(action.kind)},
                          {"command", shell},     {"dry_run", flags.dry_run},
                          {"simulated", simulated}, {"message", action.message},
                          {"note", note}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    if (simulated) std::fprintf(stderr, "note: SIMULATED fleet: these are not real GPUs\n");
    // Slurm's reason for a node is text an operator (or a script) set.
    if (!note.empty()) std::fprintf(stderr, "note: %s\n", Printable(note).c_str());
    if (flags.slurm) {
      std::printf("%s\n", Printable(action.message).c_str());
    } else {
      for (const auto& g : judged) {
        if (g.unhealthy) std::printf("GPU %d unhealthy (%s)\n", g.index, Printable(g.why).c_str());
      }
      std::printf("%s: %d of %zu GPUs unhealthy\n", Printable(node).c_str(), unhealthy, judged.size());
    }
    if (!command.empty()) {
      std::string shell;
      for (const auto& c : command) shell += (shell.empty() ? "" : " ") + exec::slurm::ShellQuote(c);
      std::printf("%s%s\n", flags.dry_run ? "would run: " : "ran: ", Printable(shell).c_str());
    }
  }
  // Without --slurm the exit code says whether every GPU is well (for
  // scripts); with it, the node's state in Slurm says so and 0 means done.
  *exit_code = !flags.slurm && unhealthy > 0 ? 3 : 0;
  return Status::Ok();
}

}  // namespace

void AddHealthcheckCommand(CLI::App& app, CommandContext* ctx) {
  auto flags = std::make_shared<HealthcheckFlags>();
  CLI::App* cmd = app.add_subcommand(
      "healthcheck", "Level-1 checks and the latest burn-in verdicts of this node's GPUs; with --slurm, drain or "
                     "resume the node in Slurm (for slurm.conf's HealthCheckProgram)");
  cmd->add_flag("--slurm", flags->slurm,
                "Drain this node (scontrol) when a GPU is unhealthy; resume it when all are well and gpuherd "
                "drained it");
  cmd->add_option("--node", flags->node, "Slurm's name of this node (default: the short host name)");
  cmd->add_flag("--dry-run", flags->dry_run, "Print the scontrol command instead of running it");
  cmd->add_flag("--json", flags->json, "Print JSON");
  flags->driver.AddTo(cmd);
  cmd->callback([ctx, flags] {
    int code = 0;
    Status s = Run(*ctx, *flags, &code);
    if (!s.ok()) return FailMaybeNoDriver(ctx, s);
    ctx->exit_code = code;
  });
}

}  // namespace gpuherd::cli
