// gpuherd show ID: one job in full, like Slurm's `scontrol show job`: its
// whole spec, where it stands and why, and every attempt with how it ended
// and what it used of its GPUs.
#include <cstdio>

#include <fmt/format.h>

#include "api/decode.h"
#include "api/job_detail.h"
#include "api/jobs.h"
#include "cli/acct_format.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_format.h"
#include "cli/table.h"
#include "sched/job_spec.h"

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
  // The detail comes from a file in the job's own folder.
  if (state == "off") {
    return line + " (fence off: " + Printable(f.value("detail", std::string())) +
           "; the memory watchdog enforces the share)";
  }
  return line + " (no fence; the memory watchdog enforces the share)";
}

// An argument as a shell would need it: quoted when it holds anything but
// plain characters, so that the line can be pasted back.
std::string ShellWord(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./=:,+@%") == std::string::npos) {
    return Printable(word);
  }
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return Printable(quoted + "'");
}

std::string Joined(const std::map<std::string, std::string>& pairs) {
  std::string out;
  for (const auto& [k, v] : pairs) out += (out.empty() ? "" : " ") + Printable(k) + "=" + ShellWord(v);
  return out.empty() ? "-" : out;
}

// The spec's lines; command, cwd and env only when the reply has them.
void PrintSpec(const api::JobSpecView& s, const nlohmann::json& raw) {
  if (raw.contains("cwd")) std::printf("  cwd        %s\n", s.cwd.empty() ? "(the submitter's)" : Printable(s.cwd).c_str());
  if (raw.contains("env")) std::printf("  env        %s\n", Joined(s.env).c_str());
  std::printf("  labels     %s\n", Joined(s.labels).c_str());
  std::string deps;
  for (int64_t d : s.depends_on) deps += (deps.empty() ? "" : ",") + std::to_string(d);
  std::printf("  depends on %s\n", deps.empty() ? "-" : deps.c_str());
  // "0.25 GPU, 4 GiB of GPU memory": the unit follows the number, before the memory.
  std::string gpus = sched::FormatGpuTwentieths(s.gpu_twentieths) +
                     (s.gpu_twentieths == 0 || s.gpu_twentieths > 20 ? " GPUs" : " GPU");
  if (s.gpu_mem_bytes > 0) gpus += ", " + sched::FormatBytes(s.gpu_mem_bytes) + " of GPU memory";
  if (!s.model.empty()) gpus += ", model " + Printable(s.model);
  if (s.min_cc) gpus += ", compute capability >= " + sched::FormatComputeCapability(*s.min_cc);
  if (s.mixed_models) gpus += ", models may be mixed";
  std::string cpus = s.cpus > 0 ? fmt::format("{} CPU{}", s.cpus, s.cpus == 1 ? "" : "s") : "no claim on CPUs";
  std::printf("  requests   %s; %s; %s host memory\n", gpus.c_str(), cpus.c_str(),
              s.mem_bytes > 0 ? sched::FormatBytes(s.mem_bytes).c_str() : "no limit on");
  std::printf("  limits     time %s, checkpoint grace %s, max restarts %d, %s\n",
              s.time_limit_ms > 0 ? FormatDuration(s.time_limit_ms).c_str() : "none",
              FormatDuration(s.checkpoint_grace_ms).c_str(), s.max_restarts,
              s.preemptible ? "preemptible" : "not preemptible");
}

// An array as a unit: its tasks' states, counted, then task by task.
void PrintArray(const api::ArraySummary& a, bool color) {
  std::string counts;
  for (const auto& [state, n] : a.states) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, state);
  std::printf("array %lld  %s\n", static_cast<long long>(a.id), Printable(a.name).c_str());
  std::printf("  tasks      %d (%s to %s): %s\n", a.size, api::ArrayTaskId(a.id, 0).c_str(),
              api::ArrayTaskId(a.id, a.size - 1).c_str(), counts.empty() ? "none" : counts.c_str());
  for (size_t i = 0; i < a.tasks.size() && i < static_cast<size_t>(api::kMaxArrayTasksListed); ++i) {
    const auto& t = a.tasks[i];
    std::printf("    %-12s job %-8lld %s\n", api::ArrayTaskId(a.id, t.index).c_str(), static_cast<long long>(t.id),
                StateCell(t.state, color).c_str());
  }
  std::printf("  `gpuherd show %s` shows one task in full\n", api::ArrayTaskId(a.id, 0).c_str());
}

}  // namespace

void AddShowCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::string id;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("show", "Show one job: its whole spec, where it stands and every attempt");
  cmd->add_option("id", f->id, "Job id, array id (a summary of its tasks) or a task such as 12_3")
      ->required()
      ->check(JobRef());
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->callback([ctx, f] {
    auto reply = DaemonClient(ctx->dir()).Get("/v1/jobs/" + f->id);
    if (!reply.ok()) return ctx->Fail(reply.status());
    if (f->json) {
      std::printf("%s\n", reply->dump(2).c_str());
      return;
    }
    if (auto array = reply->find("array"); array != reply->end() && array->is_object()) {
      auto summary = api::Decode<api::ArraySummary>(*array, "array " + f->id);
      if (!summary.ok()) return ctx->Fail(summary.status());
      return PrintArray(*summary, ctx->color());
    }
    auto job = api::Decode<api::JobView>(*reply, "job " + f->id);
    if (!job.ok()) return ctx->Fail(job.status());
    const api::JobView& j = *job;
    std::string command;
    for (const std::string& a : j.command) command += (command.empty() ? "" : " ") + ShellWord(a);
    std::printf("job %lld  %s\n", static_cast<long long>(j.id), Printable(j.name).c_str());
    std::printf("  state      %s%s\n", StateCell(j.state, ctx->color()).c_str(),
                j.reason.empty() ? "" : ("  (" + Printable(j.reason) + ")").c_str());
    std::printf("  user       %s\n", Printable(j.user).c_str());
    if (j.array_id > 0) {
      std::printf("  array      task %s of array %lld (%d tasks)\n", api::ArrayTaskId(j.array_id, j.array_index).c_str(),
                  static_cast<long long>(j.array_id), j.array_size);
    }
    std::printf("  command    %s\n", reply->contains("command") ? command.c_str() : "(its owner's)");
    if (auto spec = reply->find("spec"); spec != reply->end() && spec->is_object()) {
      auto view = api::Decode<api::JobSpecView>(*spec, "the spec of job " + f->id);
      if (!view.ok()) return ctx->Fail(view.status());
      PrintSpec(*view, *spec);
    }
    std::printf("  priority   %d\n", j.priority);
    std::printf("  gpus       %s on %s\n", Printable(api::GpusRequested(j)).c_str(),
                Printable(api::GpusAssigned(j)).c_str());
    std::printf("  time       %s (submitted %s)\n", api::JobTime(j, j.now).c_str(), FormatTimeUtc(j.submitted).c_str());
    // One restart counter (daemon/job_service.h RestartCount); only those
    // after faults count against --max-restarts.
    std::printf("  attempt    %d (restarts %d; %d after faults, of %d allowed)\n", j.attempt, j.restarts,
                j.fault_restarts, j.max_restarts);
    if (j.exit_code) std::printf("  exit code  %d\n", *j.exit_code);
    if (j.exit_signal) std::printf("  signal     %d\n", *j.exit_signal);
    if (!j.priority_explained.empty()) std::printf("  ranking    %s\n", Printable(j.priority_explained).c_str());
    if (reply->contains("memory_fence")) {
      std::printf("  gpu memory %s\n", MemoryFenceLine((*reply)["memory_fence"]).c_str());
    }
    if (reply->contains("containment") && (*reply)["containment"].is_string()) {
      std::printf("  containment %s\n", Printable((*reply)["containment"].get<std::string>()).c_str());
    }
    if (!j.logs.empty()) std::printf("  logs       %s\n", Printable(j.logs).c_str());
    if (auto m = reply->find("metrics"); m != reply->end() && m->is_object()) {
      auto intake = api::Decode<api::MetricIntakeView>(*m, "the metrics intake of job " + f->id);
      if (!intake.ok()) return ctx->Fail(intake.status());
      std::printf("  metrics    %s\n", api::MetricIntakeText(*intake).c_str());
    }
    if (auto list = reply->find("attempts"); list != reply->end() && list->is_array()) {
      auto attempts = api::Decode<std::vector<api::AttemptView>>(*list, "the attempts of job " + f->id);
      if (!attempts.ok()) return ctx->Fail(attempts.status());
      if (attempts->empty()) {
        std::printf("  attempts   none yet\n");
      } else {
        std::printf("  attempts\n");
        std::string table = AttemptsTable(*attempts, j.now);
        size_t start = 0;
        while (start < table.size()) {
          size_t end = table.find('\n', start);
          if (end == std::string::npos) end = table.size();
          std::printf("    %s\n", table.substr(start, end - start).c_str());
          start = end + 1;
        }
        // Where each attempt's stdout and stderr are (`gpuherd logs ID --attempt N`).
        for (const api::AttemptView& a : *attempts) {
          if (!a.logs.empty()) std::printf("    output of attempt %d: %s\n", a.attempt, Printable(a.logs).c_str());
        }
      }
    }
  });
}

}  // namespace gpuherd::cli
