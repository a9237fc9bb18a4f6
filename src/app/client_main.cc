// gpuherd, the binary people and jobs run: a statically linked front end that
// runs the commands a script calls once per job (submit, wait, logs, cancel,
// hold, release, requeue) and `ps`, which scripts poll, itself, and hands
// every other command line to gpuherd-cli (or `daemon` and `predict` to
// gpuherd-daemon) installed beside it. Loading a dynamically linked C++
// program costs more than these commands do: resolving its thousands of
// symbols against libstdc++, yaml-cpp, SQLite, spdlog and fmt was 4.7 of the
// 5.7 million instructions of a `gpuherd submit`. Linked statically, with fmt
// header-only and without spdlog or SQLite, it has nothing to resolve.
#include <cstring>

#include <CLI/CLI.hpp>

#include "app/command_line.h"
#include "app/front_end.h"
#include "cli/command.h"

namespace {

using gpuherd::app::CommandOf;
using gpuherd::app::ExecSibling;

struct FastCommand {
  const char* name;
  void (*add)(CLI::App&, gpuherd::cli::CommandContext*);
};

constexpr FastCommand kFastCommands[] = {
    {"submit", gpuherd::cli::AddSubmitCommand}, {"wait", gpuherd::cli::AddWaitCommand},
    {"logs", gpuherd::cli::AddLogsCommand},     {"cancel", gpuherd::cli::AddJobActionCommands},
    {"hold", gpuherd::cli::AddJobActionCommands}, {"release", gpuherd::cli::AddJobActionCommands},
    {"requeue", gpuherd::cli::AddJobActionCommands}, {"ps", gpuherd::cli::AddPsCommand},
};

}  // namespace

int main(int argc, char** argv) {
  const char* command = CommandOf(argc, argv);
  const FastCommand* fast = nullptr;
  for (const FastCommand& c : kFastCommands) {
    if (command != nullptr && std::strcmp(command, c.name) == 0) fast = &c;
  }
  if (fast == nullptr) {
    if (command != nullptr && (std::strcmp(command, "daemon") == 0 || std::strcmp(command, "predict") == 0)) {
      return ExecSibling("gpuherd-daemon", argv, "the daemon and the predict commands");
    }
    return ExecSibling("gpuherd-cli", argv, "every command but submit, wait, logs, ps and the job actions");
  }
  // The same registration and parsing as gpuherd-cli's (src/app/main.cc)
  // for these commands: same flags, help, messages and exit codes.
  gpuherd::cli::CommandContext ctx;
  CLI::App app{"gpuherd: keeps every GPU of a lab healthy and busy", "gpuherd"};
  gpuherd::app::SetUpCommandLine(app, &ctx);
  fast->add(app, &ctx);
  return gpuherd::app::ParseAndRun(app, ctx, argc, argv);
}
