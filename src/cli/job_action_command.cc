// gpuherd cancel|hold|release|requeue ID...: the job actions, each one POST.
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"

namespace gpuherd::cli {

void AddJobActionCommands(CLI::App& app, CommandContext* ctx) {
  struct Action {
    const char* name;
    const char* help;
  };
  static constexpr Action kActions[] = {
      {"cancel", "Cancel jobs (running ones get SIGTERM, then SIGKILL after their grace period)"},
      {"hold", "Keep pending jobs from starting"},
      {"release", "Let held jobs start again"},
      {"requeue", "Stop running jobs and queue them again (they resume from their checkpoint)"},
  };
  for (const Action& action : kActions) {
    auto ids = std::make_shared<std::vector<int64_t>>();
    CLI::App* cmd = app.add_subcommand(action.name, action.help);
    cmd->add_option("ids", *ids, "Job ids")->required()->check(CLI::PositiveNumber);
    std::string name = action.name;
    cmd->callback([ctx, ids, name] {
      DaemonClient client(ctx->dir());
      for (int64_t id : *ids) {
        auto reply = client.Post("/v1/jobs/" + std::to_string(id) + "/" + name, nlohmann::json::object());
        if (!reply.ok()) {
          ctx->Fail(reply.status());
          continue;
        }
        std::printf("job %lld: %s\n", static_cast<long long>(id), reply->value("state", std::string()).c_str());
      }
    });
  }
}

}  // namespace gpuherd::cli
