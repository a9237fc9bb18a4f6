// gpuherd pipelines, gpuherd pipeline show|cancel|retry ID: pipeline runs as
// the daemon keeps them.
#include <chrono>
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/pipeline_format.h"
#include "cli/table.h"

namespace gpuherd::cli {
namespace {

using nlohmann::json;

TimeMs WallNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void AddShow(CLI::App* group, CommandContext* ctx) {
  struct Flags {
    int64_t id = 0;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = group->add_subcommand("show", "Show a run: every step and sweep point");
  cmd->add_option("id", f->id, "Pipeline id")->required()->check(PositiveWhole());
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([ctx, f] {
    auto reply = DaemonClient(ctx->dir()).Get("/v1/pipelines/" + std::to_string(f->id));
    if (!reply.ok()) return ctx->Fail(reply.status());
    if (f->json) {
      std::printf("%s\n", reply->dump(2).c_str());
      return;
    }
    std::fputs(ProgressTable(*reply, reply->value("now", WallNow()), ctx->color()).c_str(), stdout);
    if (std::string dir = reply->value("run_dir", std::string()); !dir.empty()) std::printf("run folder: %s\n", Printable(dir).c_str());
    std::string params;
    const json given = reply->value("params", json::object());
    for (const auto& [k, v] : given.items()) {
      params += (params.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    if (!params.empty()) std::printf("params: %s\n", Printable(params).c_str());
  });
}

// cancel and retry: one POST each.
void AddAction(CLI::App* group, CommandContext* ctx, const std::string& name, const std::string& help,
               const std::string& done) {
  auto id = std::make_shared<int64_t>(0);
  CLI::App* cmd = group->add_subcommand(name, help);
  cmd->add_option("id", *id, "Pipeline id")->required()->check(PositiveWhole());
  cmd->callback([ctx, id, name, done] {
    auto reply = DaemonClient(ctx->dir()).Post("/v1/pipelines/" + std::to_string(*id) + "/" + name, json::object());
    if (!reply.ok()) return ctx->Fail(reply.status());
    std::string state = reply->is_object() ? reply->value("state", std::string()) : "";
    std::printf("pipeline %lld: %s\n", static_cast<long long>(*id), state.empty() ? done.c_str() : Printable(state).c_str());
  });
}

}  // namespace

void AddPipelineCommands(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    bool all = false, json = false;
    std::string state;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* list = app.add_subcommand(
      "pipelines", "List pipeline runs: running ones and those that finished in the last day (--all: every one)");
  list->add_flag("-a,--all", f->all, "Include runs that finished more than a day ago");
  list->add_option("--state", f->state, "Only runs in this state: running, succeeded, failed or cancelled (of any age)")
      ->check(CLI::IsMember({"running", "completed", "succeeded", "failed", "cancelled"}));
  list->add_flag("--json", f->json, "Print JSON (an array of runs)");
  list->callback([ctx, f] {
    std::string target = std::string("/v1/pipelines?all=") + (f->all ? "1" : "0");
    if (!f->state.empty()) target += "&state=" + f->state;  // one of the names above: nothing to escape
    auto reply = DaemonClient(ctx->dir()).Get(target);
    if (!reply.ok()) return ctx->Fail(reply.status());
    const json& pipelines = reply->value("pipelines", json::array());
    if (f->json) {
      std::printf("%s\n", pipelines.dump().c_str());
      return;
    }
    std::fputs(PipelinesTable(pipelines, ctx->color()).c_str(), stdout);
  });

  CLI::App* group = app.add_subcommand("pipeline", "Show, cancel or retry one pipeline run");
  group->require_subcommand(1);
  AddShow(group, ctx);
  AddAction(group, ctx, "cancel", "Cancel a run: its queued and running jobs are cancelled", "cancel requested");
  AddAction(group, ctx, "retry", "Run a finished run's failed and skipped nodes again, resuming from checkpoints",
            "retrying its failed nodes");
}

}  // namespace gpuherd::cli
