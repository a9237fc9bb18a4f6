// gpuherd drain|undrain GPU: take a GPU out of scheduling, or return it.
#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"

namespace gpuherd::cli {

void AddDrainCommands(CLI::App& app, CommandContext* ctx) {
  for (const char* verb : {"drain", "undrain"}) {
    struct Flags {
      std::string gpu, reason;
    };
    auto f = std::make_shared<Flags>();
    bool drain = std::string(verb) == "drain";
    CLI::App* cmd = app.add_subcommand(verb, drain ? "Keep new jobs off a GPU (running ones finish)"
                                                   : "Return a drained GPU to work");
    cmd->add_option("gpu", f->gpu, "GPU index or UUID")->required();
    if (drain) cmd->add_option("--reason", f->reason, "Why (shown in gpus, events)");
    std::string name = verb;
    cmd->callback([ctx, f, name] {
      nlohmann::json body = nlohmann::json::object();
      if (!f->reason.empty()) body["reason"] = f->reason;
      auto reply = DaemonClient(ctx->dir()).Post("/v1/gpus/" + f->gpu + "/" + name, body);
      if (!reply.ok()) return ctx->Fail(reply.status());
      std::printf("GPU %s %s\n", f->gpu.c_str(), name == "drain" ? "drained" : "returned to work");
    });
  }
}

}  // namespace gpuherd::cli
