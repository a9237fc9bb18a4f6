// gpuherd show ID: one job in full, with why it is pending.
#include <cstdio>

#include <fmt/format.h>

#include "api/decode.h"
#include "api/jobs.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_format.h"
#include "cli/table.h"

namespace gpuherd::cli {
namespace {

std::string Mib(const nlohmann::json& bytes) { return fmt::format("{} MiB", bytes.get<uint64_t>() >> 20); }

// "512 MiB used of 4096 MiB (fence active)": what the job holds against its
// share, and whether the memory fence or only the watchdog enforces it.
std::string MemoryFenceLine(const nlohmann::json& f) {
  const std::string state = f.value("state", std::string());
  std::string line = f.contains("used_bytes") ? Mib(f["used_bytes"]) + " used of " + Mib(f["share_bytes"])
                                              : "share " + Mib(f["share_bytes"]);
  if (state == "active") return line + " (fence active: an allocation past the share fails)";
  if (state == "preloaded") return line + " (fence preloaded, no CUDA call seen yet; the memory watchdog enforces the share)";
  if (state == "off") return line + " (fence off: " + f.value("detail", std::string()) + "; the memory watchdog enforces the share)";
  return line + " (no fence; the memory watchdog enforces the share)";
}

}  // namespace

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
    if (f->json) {
      std::printf("%s\n", reply->dump(2).c_str());
      return;
    }
    auto job = api::Decode<api::JobView>(*reply, "job " + std::to_string(f->id));
    if (!job.ok()) return ctx->Fail(job.status());
    const api::JobView& j = *job;
    std::string command;
    for (const std::string& a : j.command) command += (command.empty() ? "" : " ") + Printable(a);
    std::printf("job %lld  %s\n", static_cast<long long>(j.id), Printable(j.name).c_str());
    std::printf("  state      %s%s\n", StateCell(j.state, ctx->color()).c_str(),
                j.reason.empty() ? "" : ("  (" + Printable(j.reason) + ")").c_str());
    std::printf("  user       %s\n", Printable(j.user).c_str());
    std::printf("  command    %s\n", reply->contains("command") ? command.c_str() : "(its owner's)");
    std::printf("  gpus       %s on %s\n", api::GpusRequested(j).c_str(), api::GpusAssigned(j).c_str());
    std::printf("  time       %s (submitted %s)\n", api::JobTime(j, j.now).c_str(), FormatTimeUtc(j.submitted).c_str());
    // One restart counter (daemon/job_service.h RestartCount); only those
    // after faults count against --max-restarts.
    std::printf("  attempt    %d (restarts %d; %d after faults, of %d allowed)\n", j.attempt, j.restarts,
                j.fault_restarts, j.max_restarts);
    if (j.exit_code) std::printf("  exit code  %d\n", *j.exit_code);
    if (j.exit_signal) std::printf("  signal     %d\n", *j.exit_signal);
    if (!j.priority_explained.empty()) std::printf("  priority   %s\n", Printable(j.priority_explained).c_str());
    if (reply->contains("memory_fence")) {
      std::printf("  gpu memory %s\n", MemoryFenceLine((*reply)["memory_fence"]).c_str());
    }
    if (reply->contains("containment") && (*reply)["containment"].is_string()) {
      std::printf("  containment %s\n", (*reply)["containment"].get<std::string>().c_str());
    }
    if (!j.logs.empty()) std::printf("  logs       %s\n", Printable(j.logs).c_str());
  });
}

}  // namespace gpuherd::cli
