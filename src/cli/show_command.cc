// gpuherd show ID: one job in full, with why it is pending.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_format.h"
#include "cli/table.h"

namespace gpuherd::cli {

void AddShowCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    int64_t id = 0;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("show", "Show one job, and why it is pending");
  cmd->add_option("id", f->id, "Job id")->required()->check(CLI::PositiveNumber);
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([ctx, f] {
    auto reply = DaemonClient(ctx->dir()).Get("/v1/jobs/" + std::to_string(f->id));
    if (!reply.ok()) return ctx->Fail(reply.status());
    const nlohmann::json& j = *reply;
    if (f->json) {
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    std::string command;
    for (const auto& a : j.value("command", nlohmann::json::array())) command += (command.empty() ? "" : " ") + Printable(a.get<std::string>());
    TimeMs now = j.value("now", int64_t{0});
    std::printf("job %lld  %s\n", static_cast<long long>(j.value("id", int64_t{0})), Printable(j.value("name", std::string())).c_str());
    std::printf("  state      %s%s\n", StateCell(j.value("state", std::string()), ctx->color()).c_str(),
                j.value("reason", std::string()).empty() ? "" : ("  (" + Printable(j.value("reason", std::string())) + ")").c_str());
    std::printf("  user       %s\n", Printable(j.value("user", std::string())).c_str());
    std::printf("  command    %s\n", command.c_str());
    std::printf("  gpus       %s on %s\n", GpusRequested(j).c_str(), GpusAssigned(j).c_str());
    std::printf("  time       %s (submitted %s)\n", JobTime(j, now).c_str(),
                FormatTimeUtc(j.value("submitted", int64_t{0})).c_str());
    std::printf("  attempt    %d (restarts %d of %d)\n", j.value("attempt", 0), j.value("restarts", 0),
                j.value("max_restarts", 0));
    if (j.contains("exit_code")) std::printf("  exit code  %d\n", j["exit_code"].get<int>());
    if (j.contains("exit_signal")) std::printf("  signal     %d\n", j["exit_signal"].get<int>());
    if (j.contains("priority_explained")) {
      std::printf("  priority   %s\n", Printable(j["priority_explained"].get<std::string>()).c_str());
    }
    if (j.contains("logs")) std::printf("  logs       %s\n", Printable(j["logs"].get<std::string>()).c_str());
  });
}

}  // namespace gpuherd::cli
