// gpuherd logs ID [-f]: the job's output; -f follows it until the job ends.
#include <unistd.h>

#include <cstdio>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"

namespace gpuherd::cli {

void AddLogsCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    int64_t id = 0;
    bool follow = false, stderr_only = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("logs", "Print a job's output");
  cmd->add_option("id", f->id, "Job id")->required()->check(PositiveWhole());
  cmd->add_flag("-f,--follow", f->follow, "Keep printing until the job ends");
  cmd->add_flag("--stderr", f->stderr_only, "Print the job's stderr instead of its stdout");
  cmd->callback([ctx, f] {
    DaemonClient client(ctx->dir());
    int64_t offset = 0;
    std::string stream = f->stderr_only ? "stderr" : "stdout";
    bool told_waiting = false;
    while (true) {
      auto reply = client.Get("/v1/jobs/" + std::to_string(f->id) + "/logs?stream=" + stream +
                              "&offset=" + std::to_string(offset));
      if (!reply.ok()) return ctx->Fail(reply.status());
      // Attempt 0: the job has never started, so it has no output yet.
      if (reply->value("attempt", 1) == 0 && !reply->value("final", false)) {
        std::string state = reply->value("state", std::string("pending"));
        std::string reason = reply->value("reason", std::string());
        std::string what = "job " + std::to_string(f->id) + " is " + Printable(state) + " and has not started yet" +
                           (reason.empty() ? "" : " (" + Printable(reason) + ")");
        if (!f->follow) return ctx->Fail(FailedPrecondition(what + "; `gpuherd logs -f " + std::to_string(f->id) +
                                                            "` waits for it and follows its output"));
        if (!told_waiting) std::fprintf(stderr, "gpuherd: %s; waiting for it to start\n", PrintableLines(what).c_str());
        told_waiting = true;
        ::usleep(300'000);
        continue;
      }
      // The output itself is the job's, printed raw as cat would (docs/security.md,
      // "Terminal output"): the reader asked for it by the job's id.
      std::string data = reply->value("data", std::string());
      std::fwrite(data.data(), 1, data.size(), stdout);
      std::fflush(stdout);
      offset = reply->value("next_offset", offset);
      bool more = reply->value("truncated", false);
      if (more) continue;
      if (!f->follow || reply->value("final", true)) return;
      ::usleep(300'000);
    }
  });
}

}  // namespace gpuherd::cli
