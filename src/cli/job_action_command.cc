// gpuherd cancel|hold|release|requeue ID...: the job actions. cancel is one
// request however many jobs it names (POST /v1/jobs/cancel, one commit, with
// scancel's filters); the others are one POST per job.
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"

namespace gpuherd::cli {
namespace {

void AddCancelCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::vector<std::string> ids;
    std::string user, state, name;
    bool all = false, quiet = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "cancel", "Cancel jobs, all in one request (running ones get SIGTERM, then SIGKILL after their grace period)");
  cmd->add_option("ids", f->ids, "Job ids, array ids (every task) or tasks such as 12_3 (with filters: only those "
                               "that match them)")
      ->check(JobRef());
  cmd->add_option("--user", f->user, "Only this user's jobs (another user's: admins only)");
  cmd->add_option("--state", f->state, "Only jobs in this state: pending, held, running or stopping");
  cmd->add_option("--name", f->name, "Only jobs of this name (an array's name: its tasks)");
  cmd->add_flag("--all", f->all, "Every user's unfinished jobs that match the filters (admins only)");
  cmd->add_flag("-q,--quiet", f->quiet, "Print nothing but errors");
  cmd->callback([ctx, f] {
    const bool filtered = f->all || !f->user.empty() || !f->state.empty() || !f->name.empty();
    if (f->ids.empty() && !filtered) {
      return ctx->Usage("name the jobs to cancel: ids, or --user, --state, --name or --all");
    }
    nlohmann::json body = nlohmann::json::object();
    // Plain ids go as numbers, as daemons before arrays had ids read them.
    if (!f->ids.empty()) {
      body["ids"] = nlohmann::json::array();
      for (const std::string& id : f->ids) {
        if (id.find('_') == std::string::npos) {
          body["ids"].push_back(std::stoll(id));
        } else {
          body["ids"].push_back(id);
        }
      }
    }
    if (!f->user.empty()) body["user"] = f->user;
    if (!f->state.empty()) body["state"] = f->state;
    if (!f->name.empty()) body["name"] = f->name;
    if (f->all) body["all"] = true;
    // 20,000 ids and their records commit in one turn: give it time.
    auto reply = DaemonClient(ctx->dir(), 120'000).Post("/v1/jobs/cancel", body);
    if (!reply.ok()) return ctx->Fail(reply.status());
    std::string out;
    for (const char* state : {"cancelled", "stopping"}) {
      for (const auto& id : reply->value(state, nlohmann::json::array())) {
        out += "job " + id.dump() + ": " + state + "\n";
      }
    }
    if (!f->quiet) std::fputs(out.c_str(), stdout);
    for (const auto& s : reply->value("skipped", nlohmann::json::array())) {
      std::fprintf(stderr, "gpuherd: job %s: %s\n", s.value("id", nlohmann::json()).dump().c_str(),
                   Printable(s.value("reason", std::string())).c_str());
      ctx->exit_code = 1;  // as scancel: the others are cancelled, the status says not all were
    }
    if (filtered && f->ids.empty() && reply->value("cancelled", nlohmann::json::array()).empty() &&
        reply->value("stopping", nlohmann::json::array()).empty() && !f->quiet) {
      std::fprintf(stderr, "gpuherd: no unfinished job matches\n");
    }
  });
}

}  // namespace

void AddJobActionCommands(CLI::App& app, CommandContext* ctx) {
  AddCancelCommand(app, ctx);
  struct Action {
    const char* name;
    const char* help;
  };
  static constexpr Action kActions[] = {
      {"hold", "Keep pending jobs from starting"},
      {"release", "Let held jobs start again"},
      {"requeue", "Stop running jobs and queue them again (they resume from their checkpoint)"},
  };
  for (const Action& action : kActions) {
    auto ids = std::make_shared<std::vector<std::string>>();
    CLI::App* cmd = app.add_subcommand(action.name, action.help);
    cmd->add_option("ids", *ids, "Job ids, array ids (every task it applies to) or tasks such as 12_3")
        ->required()
        ->check(JobRef());
    std::string name = action.name;
    cmd->callback([ctx, ids, name] {
      DaemonClient client(ctx->dir());
      for (const std::string& id : *ids) {
        auto reply = client.Post("/v1/jobs/" + id + "/" + name, nlohmann::json::object());
        if (!reply.ok()) {
          ctx->Fail(reply.status());
          continue;
        }
        // An array: each of its unfinished tasks, acted on or not and why.
        if (reply->value("array", false)) {
          for (const auto& task : reply->value("tasks", nlohmann::json::array())) {
            std::string label = Printable(task.value("task", std::string()));
            if (task.contains("error")) {
              std::fprintf(stderr, "gpuherd: job %s: %s\n", label.c_str(),
                           Printable(task.value("error", std::string())).c_str());
              ctx->exit_code = 1;
            } else {
              std::printf("job %s: %s\n", label.c_str(), Printable(task.value("state", std::string())).c_str());
            }
          }
          continue;
        }
        std::printf("job %s: %s\n", id.c_str(), Printable(reply->value("state", std::string())).c_str());
      }
    });
  }
}

}  // namespace gpuherd::cli
