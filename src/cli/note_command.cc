// gpuherd note: writes an operator's note into the event log ("replaced fan").
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"

namespace gpuherd::cli {

void AddNoteCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::string message, gpu, severity = "info";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("note", "Add an operator's note to the event log");
  cmd->add_option("message", flags->message, "What happened, e.g. \"replaced the fan\"")->required();
  cmd->add_option("--gpu", flags->gpu, "The GPU it concerns (index or UUID)");
  cmd->add_option("--severity", flags->severity, "info, warning or critical")
      ->check(CLI::IsMember({"info", "warning", "critical"}));
  cmd->callback([ctx, flags] {
    nlohmann::json body = {{"message", flags->message}, {"severity", flags->severity}};
    if (!flags->gpu.empty()) body["gpu"] = flags->gpu;
    auto reply = DaemonClient(ctx->dir()).Post("/v1/events", body);
    if (!reply.ok()) return ctx->Fail(reply.status());
    std::printf("recorded\n");
  });
}

}  // namespace gpuherd::cli
