// gpuherd daemon: runs the daemon in the foreground. Only gpuherd-daemon has
// it (it links the daemon; the gpuherd binary hands the command over).
#pragma once

#include <CLI/CLI.hpp>

#include "cli/command.h"

namespace gpuherd::app {

void AddDaemonCommand(CLI::App& app, cli::CommandContext* ctx);

}  // namespace gpuherd::app
