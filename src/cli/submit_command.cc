// gpuherd submit [flags] -- CMD ARGS...: queues a job (or, with --array N, N
// tasks of it) and prints its id once the daemon has committed it.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_format.h"
#include "cli/spec_file.h"
#include "sched/job_spec.h"

namespace gpuherd::cli {
namespace {

// The submitter's variables a job usually needs; others go with --env.
constexpr const char* kInheritedEnv[] = {"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ",
                                         "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH"};

}  // namespace

void AddSubmitCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::string gpus = "0", gpu_mem, model, min_cc, mem, time_limit, grace, name, file;
    int cpus = 0, priority = 0, max_restarts = 0, array = 0;
    bool preemptible = false, mixed_models = false, json = false, hold = false;
    std::vector<std::string> env, labels, command;
    std::vector<int64_t> after, after_any, after_not_ok;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("submit", "Queue a job: gpuherd submit --gpus 1 -- python train.py");
  cmd->add_option("--gpus", f->gpus, "GPUs: 0, a fraction 0.05-0.95 in steps of 0.05, or a whole number (default 0)");
  cmd->add_option("--gpu-mem", f->gpu_mem, "GPU memory, e.g. 8GiB (required for fractions)");
  cmd->add_option("--model", f->model, "Only GPUs whose name contains this, e.g. A100");
  cmd->add_option("--min-cc", f->min_cc, "Minimum compute capability, e.g. 8.0");
  cmd->add_option("--cpus", f->cpus, "CPUs the job needs")->check(NonNegativeWhole());
  cmd->add_option("--mem", f->mem, "Host memory, e.g. 32GiB");
  cmd->add_option("--priority", f->priority, "Urgency, -100 to 100 (default 0)")->check(CLI::Range(-100, 100));
  cmd->add_option("--time-limit", f->time_limit, "Stop the job after this long, e.g. 12h");
  cmd->add_option("--checkpoint-grace", f->grace, "Time between SIGTERM and SIGKILL (default 30s)");
  cmd->add_flag("--preemptible", f->preemptible, "Let higher-priority jobs preempt this one");
  cmd->add_flag("--mixed-models", f->mixed_models, "A multi-GPU job may get GPUs of different models");
  cmd->add_option("--max-restarts", f->max_restarts, "Restarts after GPU faults or preemption")
      ->check(CLI::Range(0, 1000));
  // Slurm's dependency kinds (afterok, afterany, afternotok); ids by comma or repeated.
  cmd->add_option("--after", f->after, "Start only after these jobs completed (ids, e.g. 4,5)")
      ->delimiter(',')
      ->check(PositiveWhole());
  cmd->add_option("--afterany", f->after_any, "Start only after these jobs ended, however they ended")
      ->delimiter(',')
      ->check(PositiveWhole());
  cmd->add_option("--afternotok", f->after_not_ok, "Start only after these jobs failed or were cancelled")
      ->delimiter(',')
      ->check(PositiveWhole());
  cmd->add_option("--name", f->name, "A name for the job");
  cmd->add_option("--env", f->env, "KEY=VALUE added to the job's environment (repeatable)");
  cmd->add_option("--label", f->labels, "KEY=VALUE label (repeatable)");
  cmd->add_option("-f,--file", f->file, "A job spec in JSON or YAML (flags override it)")->check(CLI::ExistingFile);
  cmd->add_option("--array", f->array,
                  "Queue N tasks of this job at once (GPUHERD_ARRAY_INDEX=0..N-1); prints N ids")
      ->check(CLI::Range(1, sched::kMaxArraySize));
  cmd->add_flag("--hold", f->hold, "Queue the job held: it starts only after `gpuherd release ID`");
  cmd->add_flag("--json", f->json, "Print {\"id\": N} instead of the bare id");
  cmd->add_option("command", f->command, "The command, after --")->expected(-1);
  cmd->callback([ctx, f] {
    nlohmann::json spec = nlohmann::json::object();
    if (!f->file.empty()) {
      auto loaded = LoadSpecFile(f->file);
      if (!loaded.ok()) return ctx->Fail(loaded.status());
      spec = *loaded;
    }
    if (!f->command.empty()) spec["command"] = f->command;
    if (!spec.contains("command")) {
      return ctx->Usage("no command given; put it after --, e.g. gpuherd submit --gpus 1 -- python train.py");
    }
    auto set_if = [&](const char* key, const std::string& value) {
      if (!value.empty()) spec[key] = value;
    };
    if (f->gpus != "0" || !spec.contains("gpus")) {
      char* end = nullptr;
      double g = std::strtod(f->gpus.c_str(), &end);
      if (end == f->gpus.c_str() || *end != '\0') {
        return ctx->Usage("--gpus takes a number such as 1, 2 or 0.5; got '" + f->gpus + "'");
      }
      spec["gpus"] = g;
    }
    set_if("gpu_mem", f->gpu_mem);
    set_if("model", f->model);
    set_if("min_cc", f->min_cc);
    set_if("mem", f->mem);
    set_if("time_limit", f->time_limit);
    set_if("name", f->name);
    if (!f->grace.empty()) spec["checkpoint"] = {{"grace", f->grace}};
    if (f->cpus) spec["cpus"] = f->cpus;
    if (f->priority) spec["priority"] = f->priority;
    if (f->preemptible) spec["preemptible"] = true;
    if (f->mixed_models) spec["mixed_models"] = true;
    if (f->max_restarts) spec["max_restarts"] = f->max_restarts;
    if (!f->after.empty()) {
      spec.erase("depends_on");  // the flag replaces the file's, under either name
      spec["after"] = f->after;
    }
    if (!f->after_any.empty()) spec["after_any"] = f->after_any;
    if (!f->after_not_ok.empty()) spec["after_not_ok"] = f->after_not_ok;
    if (!spec.contains("cwd")) {
      char cwd[PATH_MAX];
      if (::getcwd(cwd, sizeof(cwd))) spec["cwd"] = cwd;
    }
    nlohmann::json env = spec.value("env", nlohmann::json::object());
    for (const char* name : kInheritedEnv) {
      if (const char* v = std::getenv(name); v && !env.contains(name)) env[name] = v;
    }
    for (const std::string& kv : f->env) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        return ctx->Usage("--env takes KEY=VALUE; got '" + kv + "'");
      }
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    spec["env"] = env;
    for (const std::string& kv : f->labels) {
      auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        return ctx->Usage("--label takes KEY=VALUE; got '" + kv + "'");
      }
      spec["labels"][kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (f->array > 0) spec["array"] = f->array;
    if (f->hold) spec["hold"] = true;
    auto reply = DaemonClient(ctx->dir()).Post("/v1/jobs", spec);
    if (!reply.ok()) {
      if (!f->file.empty()) return ctx->Fail(reply.status());
      return ctx->Fail(Status(reply.status().code(), SpokenAsFlags(reply.status().message())));
    }
    if (f->json) {
      std::printf("%s\n", reply->dump().c_str());
    } else if (auto ids = reply->find("ids"); ids != reply->end() && ids->is_array()) {
      std::string out;
      for (const auto& id : *ids) out += std::to_string(id.get<int64_t>()) + "\n";
      std::fputs(out.c_str(), stdout);
    } else {
      std::printf("%lld\n", static_cast<long long>(reply->value("id", int64_t{0})));
    }
  });
}

}  // namespace gpuherd::cli
