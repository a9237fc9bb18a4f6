// gpuherd: keeps a lab's GPUs healthy and busy. See README.md.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "core/log.h"
#include "core/version.h"
#include "exec/launcher.h"

int main(int argc, char** argv) {
  // The daemon's job launcher is this same binary started with a hidden
  // argument; it must not parse the command line or touch logging.
  if (int code = gpuherd::exec::MaybeRunLauncher(argc, argv); code >= 0) return code;
  using namespace gpuherd::cli;
  // Commands log warnings only; the daemon sets up its own logging.
  gpuherd::SetUpLogging("warn");
  CLI::App app{"gpuherd: keeps every GPU of a lab healthy and busy", "gpuherd"};
  app.set_version_flag("--version", gpuherd::kVersion);
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--home) may follow the subcommand
  CommandContext ctx;
  app.add_option("--home", ctx.home, "State directory (default: $GPUHERD_HOME, /var/lib/gpuherd for root, "
                                     "else ~/.local/share/gpuherd)");
  AddDaemonCommand(app, &ctx);
  AddGpusCommand(app, &ctx);
  AddTopCommand(app, &ctx);
  AddEventsCommand(app, &ctx);
  AddNoteCommand(app, &ctx);
  AddStopCommand(app, &ctx);
  AddStatusCommand(app, &ctx);
  AddSubmitCommand(app, &ctx);
  AddPsCommand(app, &ctx);
  AddShowCommand(app, &ctx);
  AddLogsCommand(app, &ctx);
  AddJobActionCommands(app, &ctx);
  AddDrainCommands(app, &ctx);
  AddAlertsCommand(app, &ctx);
  AddBurnInCommand(app, &ctx);
  AddHealthCommand(app, &ctx);
  AddDoctorCommand(app, &ctx);
  AddSlurmCommands(app, &ctx);
  AddK8sCommands(app, &ctx);
  AddRunCommand(app, &ctx);
  AddPipelineCommands(app, &ctx);
  AddReportCommand(app, &ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    // Usage errors exit 2, as most tools do; --help and --version exit 0.
    return code == 0 ? 0 : 2;
  }
  return ctx.exit_code;
}
