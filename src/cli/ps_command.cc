// gpuherd ps: the queue (unfinished jobs; --all adds recently finished ones).
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_format.h"
#include "cli/table.h"

namespace gpuherd::cli {

void AddPsCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    bool all = false, json = false;
    std::string user, state;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("ps", "List jobs: running and pending (--all: finished too)");
  cmd->add_flag("-a,--all", f->all, "Include finished jobs (completed, failed, cancelled)");
  cmd->add_option("--user", f->user, "Only this user's jobs");
  cmd->add_option("--state", f->state, "Only jobs in this state");
  cmd->add_flag("--json", f->json, "Print JSON (an array of jobs)");
  cmd->callback([ctx, f] {
    std::string target = std::string("/v1/jobs?all=") + (f->all ? "1" : "0");
    if (!f->user.empty()) target += "&user=" + f->user;
    if (!f->state.empty()) target += "&state=" + f->state;
    auto reply = DaemonClient(ctx->dir()).Get(target);
    if (!reply.ok()) return ctx->Fail(reply.status());
    const nlohmann::json& jobs = (*reply)["jobs"];
    if (f->json) {
      std::printf("%s\n", jobs.dump(2).c_str());
      return;
    }
    TimeMs now = reply->value("now", int64_t{0});
    Table table({"ID", "NAME", "USER", "STATE", "GPUS", "ON", "PRIO", "TIME", "REASON"});
    for (const auto& j : jobs) {
      table.AddRow({std::to_string(j.value("id", 0)), j.value("name", std::string()), j.value("user", std::string()),
                    StateCell(j.value("state", std::string()), ctx->color()), GpusRequested(j), GpusAssigned(j),
                    std::to_string(j.value("priority", 0)), JobTime(j, now), j.value("reason", std::string())});
    }
    std::fputs(table.Render({0, 6}).c_str(), stdout);
  });
}

}  // namespace gpuherd::cli
