// gpuherd: keeps a lab's GPUs healthy and busy. See README.md.
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>

#include <CLI/CLI.hpp>

#include "app/command_line.h"
#include "app/front_end.h"
#include "cli/command.h"
#include "cli/table.h"
#ifndef GPUHERD_CLIENT
#include "app/daemon_command.h"
#endif
#include "core/log.h"
#include "exec/launcher.h"

namespace {

using gpuherd::app::CommandOf;

#ifdef GPUHERD_CLIENT
// `daemon` and `predict` continue in gpuherd-daemon, installed beside this
// binary: only they need the libraries behind webhooks (TLS) and the failure
// model (XGBoost), whose loading would otherwise double the start-up cost of
// every short command.
int RunInDaemonBinary(char** argv) {
  return gpuherd::app::ExecSibling("gpuherd-daemon", argv, "the daemon and the predict commands");
}
#endif

}  // namespace

int main(int argc, char** argv) {
#ifdef GPUHERD_CLIENT
  if (const char* command = CommandOf(argc, argv)) {
    if (std::strcmp(command, "daemon") == 0 || std::strcmp(command, "predict") == 0) return RunInDaemonBinary(argv);
  }
#endif
  // The daemon's job launcher is this same binary started with a hidden
  // argument; it must not parse the command line or touch logging.
  if (int code = gpuherd::exec::MaybeRunLauncher(argc, argv); code >= 0) return code;
  using namespace gpuherd::cli;
  // Commands log warnings only; the daemon sets up its own logging.
  gpuherd::SetUpLogging("warn");
  CommandContext ctx;
  CLI::App app{"gpuherd: keeps every GPU of a lab healthy and busy", "gpuherd"};
  gpuherd::app::SetUpCommandLine(app, &ctx);
#ifdef GPUHERD_CLIENT
  // Listed for --help; a command line naming them never gets here.
  app.add_subcommand("daemon", "Run the gpuherd daemon (in gpuherd-daemon)");
  app.add_subcommand("predict", "Train and evaluate the failure-risk model (in gpuherd-daemon)");
#else
  gpuherd::app::AddDaemonCommand(app, &ctx);
#endif
  // Each command file registers its commands. A command line naming one
  // registers only that file's (CLI11 builds every option of every command it
  // is given, a few milliseconds that `gpuherd submit`, run once per job,
  // would pay each time); help and unknown commands get them all.
  struct Registration {
    std::initializer_list<const char*> names;
    void (*add)(CLI::App&, CommandContext*);
  };
  const Registration registrations[] = {
      {{"gpus"}, AddGpusCommand},
      {{"top"}, AddTopCommand},
      {{"topo"}, AddTopoCommand},
      {{"events"}, AddEventsCommand},
      {{"note"}, AddNoteCommand},
      {{"stop"}, AddStopCommand},
      {{"status"}, AddStatusCommand},
      {{"submit"}, AddSubmitCommand},
      {{"ps"}, AddPsCommand},
      {{"show"}, AddShowCommand},
      {{"acct"}, AddAcctCommand},
      {{"logs"}, AddLogsCommand},
      {{"wait"}, AddWaitCommand},
      {{"cancel", "hold", "release", "requeue"}, AddJobActionCommands},
      {{"drain", "undrain"}, AddDrainCommands},
      {{"alerts"}, AddAlertsCommand},
      {{"burnin"}, AddBurnInCommand},
      {{"health"}, AddHealthCommand},
      {{"healthcheck"}, AddHealthcheckCommand},
      {{"passport"}, AddPassportCommand},
      {{"doctor"}, AddDoctorCommand},
      {{"slurm"}, AddSlurmCommands},
      {{"k8s"}, AddK8sCommands},
      {{"run"}, AddRunCommand},
      {{"pipelines", "pipeline"}, AddPipelineCommands},
      {{"report"}, AddReportCommand},
#ifndef GPUHERD_CLIENT
      {{"predict"}, AddPredictCommands},
#endif
      {{"dashboard"}, AddDashboardCommand},
  };
  const Registration* only = nullptr;
  const char* command = CommandOf(argc, argv);
  if (command != nullptr) {
    for (const Registration& r : registrations) {
      for (const char* name : r.names) {
        if (std::strcmp(command, name) == 0) only = &r;
      }
    }
    if (only == nullptr && std::strcmp(command, "daemon") != 0 && std::strcmp(command, "predict") != 0) {
      std::fprintf(stderr, "gpuherd: unknown command '%s'; `gpuherd --help` lists the commands\n",
                   gpuherd::cli::PrintableLines(command).c_str());
      return 2;
    }
  }
  for (const Registration& r : registrations) {
    if (only == nullptr || only == &r) r.add(app, &ctx);
  }
  return gpuherd::app::ParseAndRun(app, ctx, argc, argv);
}
