// The command line both front ends (main.cc, client_main.cc) share: the same
// global flags, help and exit codes, whichever binary parses a command.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "core/version.h"

namespace gpuherd::app {

// The global flags; `ctx` must outlive `app`.
inline void SetUpCommandLine(CLI::App& app, cli::CommandContext* ctx) {
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.fallthrough();  // global flags (--home) may follow the subcommand
  app.add_option("--home", ctx->home, "State directory (default: $GPUHERD_HOME, /var/lib/gpuherd for root, "
                                      "else ~/.local/share/gpuherd)");
}

// Parses and runs the command; the process's exit code. Usage errors exit 2,
// as most tools do; --help and --version exit 0.
inline int ParseAndRun(CLI::App& app, const cli::CommandContext& ctx, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  return ctx.exit_code;
}

}  // namespace gpuherd::app
