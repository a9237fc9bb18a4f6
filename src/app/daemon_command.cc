// gpuherd daemon: runs in the foreground until SIGINT/SIGTERM or `gpuherd stop`.
#include <malloc.h>
#include <pthread.h>
#include <sys/stat.h>
#include <csignal>
#include <cstdio>
#include <thread>

#include "app/daemon_command.h"

#include "cli/command.h"
#include "core/log.h"
#include "daemon/daemon.h"
#include "daemon/fd_budget.h"

namespace gpuherd::app {

using cli::CommandContext;
using cli::DriverFlags;

void AddDaemonCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    DriverFlags driver;
    int port = daemon::kDefaultApiPort;
    std::string interval = "5s";
    std::string log_level = "info";
    std::string memory_grace = "30s";
    std::string admin_group;
    std::string socket;
    std::vector<std::string> allow_hosts;
    int user_max_gpus = 0, user_max_queued = 0;
    bool no_preemption = false, no_backfill = false;
    bool mps = false;
    std::string alert_rules, alert_command;
    std::vector<std::string> webhooks;
    int metrics_port = -1;
    std::string pipeline_backend = "local", slurm_shared_dir, slurm_partition, slurm_account, slurm_poll = "1s";
    std::vector<std::string> slurm_args;
    int slurm_shards = 10;
    std::string cgroup_root = "/sys/fs/cgroup";
    bool adopt_empty_state = false;
    std::string requalify_after = "10m";
    int requalify_level = 2;
    bool allow_gpu_reset = false;
    std::string self_heal_shadow;
    std::vector<std::string> self_heal;
    int max_connections = 4096, max_connections_per_user = 64;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("daemon", "Run the gpuherd daemon in the foreground");
  flags->driver.AddTo(cmd);
  cmd->add_option("--port", flags->port, "TCP port of the API on 127.0.0.1 (0: any free port, -1: none)")
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--interval", flags->interval, "Sampling period, 100ms or more (default 5s)");
  cmd->add_option("--log-level", flags->log_level, "debug, info, warn or error")
      ->check(CLI::IsMember({"debug", "info", "warn", "error"}));
  cmd->add_option("--memory-grace", flags->memory_grace,
                  "How long a fractional job may exceed its GPU memory share before it is stopped");
  cmd->add_option("--admin-group", flags->admin_group, "Members may act on any job and drain GPUs");
  cmd->add_option("--socket", flags->socket,
                  "The unix socket, when not <home>/gpuherd.sock (which then links to it); the system daemon "
                  "listens on /run/gpuherd/gpuherd.sock, where users' commands find it");
  cmd->add_option("--allow-host", flags->allow_hosts,
                  "Also answer TCP requests whose Host is this name (besides localhost, IP addresses and the "
                  "hostname); repeatable");
  cmd->add_option("--user-max-gpus", flags->user_max_gpus, "Running GPUs per user (0: no limit)")
      ->check(cli::NonNegativeWhole());
  cmd->add_option("--user-max-queued", flags->user_max_queued, "Unfinished jobs per user (0: no limit)")
      ->check(cli::NonNegativeWhole());
  cmd->add_flag("--no-preemption", flags->no_preemption, "Never preempt running jobs");
  cmd->add_flag("--no-backfill", flags->no_backfill, "Start jobs strictly in priority order");
  cmd->add_flag("--mps", flags->mps,
                "Start NVIDIA's MPS control daemon per GPU so that fractions of one user get their compute "
                "share (needs nvidia-cuda-mps-control on PATH)");
  cmd->add_option("--alert-rules", flags->alert_rules,
                  "Alert rules YAML replacing the built-in ones (deploy/alerts/default-rules.yaml)");
  cmd->add_option("--webhook", flags->webhooks, "POST alerts (Alertmanager's webhook JSON) here; repeatable");
  cmd->add_option("--alert-command", flags->alert_command, "Run this with /bin/sh -c, alert JSON on stdin");
  cmd->add_option("--metrics-port", flags->metrics_port,
                  "Also serve /metrics alone on this port on all interfaces, like dcgm-exporter's 9400 "
                  "(default: only on the API port)")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--pipeline-backend", flags->pipeline_backend,
                  "Where pipelines whose file names no backend: run their jobs: local or slurm")
      ->check(CLI::IsMember({"local", "slurm"}))
      ->capture_default_str();
  cmd->add_option("--slurm-shared-dir", flags->slurm_shared_dir,
                  "Enables the Slurm backend: the jobs' output, exit and metrics files go here (the same path on "
                  "every node: shared storage)");
  cmd->add_option("--slurm-partition", flags->slurm_partition, "sbatch --partition for pipeline jobs");
  cmd->add_option("--slurm-account", flags->slurm_account, "sbatch --account for pipeline jobs");
  cmd->add_option("--slurm-arg", flags->slurm_args, "Another sbatch option for every job (--qos=high); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--slurm-poll", flags->slurm_poll, "How often squeue is asked about the jobs")
      ->capture_default_str();
  cmd->add_option("--slurm-shards-per-gpu", flags->slurm_shards,
                  "Shards per GPU in gres.conf: a job's twentieth of a GPU asks for a twentieth of them")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--cgroup-root", flags->cgroup_root,
                  "Where control groups are mounted: each job runs in its own group under gpuherd/ there "
                  "(\"none\": no control groups, the job's shim alone finds its processes)")
      ->capture_default_str();
  cmd->add_flag("--adopt-empty-state", flags->adopt_empty_state,
                "Start although state.db has no jobs or pipelines while the home holds their folders from an "
                "earlier database: new ids continue above every folder, which is never reused");
  cmd->add_option("--requalify-after", flags->requalify_after,
                  "A GPU quarantined for a fault and idle this long gets a requalification burn-in; it returns to "
                  "service when that passes and is retired when it fails (0: never; only an operator returns it)")
      ->capture_default_str();
  cmd->add_option("--requalify-level", flags->requalify_level,
                  "Burn-in level of the requalification (2: the quick checks, memory test, load swings and peer "
                  "checks; 3 adds 15 minutes of stress)")
      ->check(CLI::Range(1, 3))
      ->capture_default_str();
  cmd->add_flag("--allow-gpu-reset", flags->allow_gpu_reset,
                "Reset a quarantined GPU before its requalification, only when no process uses it");
  cmd->add_option("--max-connections", flags->max_connections,
                  "HTTP connections open at once, over the socket and TCP together; the last 8 are kept for root "
                  "and the daemon's user; lowered when the open-files limit leaves too little for jobs")
      ->check(CLI::Range(16, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--max-connections-per-user", flags->max_connections_per_user,
                  "HTTP connections open at once per user on the unix socket and per address over TCP "
                  "(0: no limit); one more is answered 503 and closed")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--self-heal-shadow", flags->self_heal_shadow,
                  "Self-healing rules that only record what they would do (comma-separated rule names, or all)");
  cmd->add_option("--self-heal", flags->self_heal,
                  "A self-healing threshold, KEY=VALUE (window=24h, suspect_jobs=3, quarantine_jobs=4, "
                  "retire_fatal=5, retire_quarantines=3, requarantine_window=7d, suspect_clears_after=72h, "
                  "requalify_timeout=2h, short_job_max=1h: longer jobs go to suspect GPUs last); repeatable");
  cmd->callback([ctx, flags] {
    daemon::DaemonOptions options;
    if (flags->requalify_after == "0") {
      options.self_heal.states.requalify_after = 0;
    } else if (!ParseDuration(flags->requalify_after, &options.self_heal.states.requalify_after) ||
               options.self_heal.states.requalify_after < 0 ||
               options.self_heal.states.requalify_after > 366LL * 24 * kHourMs) {
      return ctx->Fail(InvalidArgument("--requalify-after takes a duration like 10m (0: never); got '" +
                                       flags->requalify_after.substr(0, 60) + "'"));
    }
    options.self_heal.requalify_level = flags->requalify_level;
    options.self_heal.allow_gpu_reset = flags->allow_gpu_reset;
    if (!flags->self_heal_shadow.empty()) {
      if (Status s = daemon::SetSelfHealShadow(&options.self_heal, flags->self_heal_shadow); !s.ok()) {
        return ctx->Fail(s);
      }
    }
    for (const std::string& t : flags->self_heal) {
      if (Status s = daemon::SetSelfHealThreshold(&options.self_heal, t); !s.ok()) return ctx->Fail(s);
    }
    options.cgroup_root = flags->cgroup_root == "none" ? "" : flags->cgroup_root;
    options.pipeline_backend = flags->pipeline_backend;
    options.slurm.site.shared_dir = flags->slurm_shared_dir;
    options.slurm.site.partition = flags->slurm_partition;
    options.slurm.site.account = flags->slurm_account;
    options.slurm.site.sbatch_args = flags->slurm_args;
    options.slurm.site.shards_per_gpu = flags->slurm_shards;
    if (!ParseDuration(flags->slurm_poll, &options.slurm.poll_interval) || options.slurm.poll_interval < 100) {
      return ctx->Fail(InvalidArgument("--slurm-poll must be a duration of at least 100ms, like 1s; got '" +
                                       flags->slurm_poll + "'"));
    }
    if (!ParseDuration(flags->memory_grace, &options.queue.memory_watchdog_grace)) {
      return ctx->Fail(InvalidArgument("--memory-grace takes a duration like 30s; got '" + flags->memory_grace + "'"));
    }
    options.adopt_empty_state = flags->adopt_empty_state;
    options.max_connections = flags->max_connections;
    options.max_connections_per_user = flags->max_connections_per_user;
    options.admin_group = flags->admin_group;
    options.allow_hosts = flags->allow_hosts;
    options.queue.scheduler.max_running_gpus_per_user = flags->user_max_gpus;
    options.queue.scheduler.max_queued_jobs_per_user = flags->user_max_queued;
    options.queue.scheduler.preemption = !flags->no_preemption;
    options.queue.scheduler.backfill = !flags->no_backfill;
    options.queue.scheduler.short_job_max = options.self_heal.short_job_max;
    options.mps = flags->mps;
    options.home = ctx->own_dir().root;
    options.socket_path = flags->socket;
    options.driver = flags->driver.choice();
    options.port = flags->port;
    options.alert_rules_path = flags->alert_rules;
    options.webhook_urls = flags->webhooks;
    options.alert_command = flags->alert_command;
    options.metrics_port = flags->metrics_port;
    if (!ParseDuration(flags->interval, &options.sample_interval) || options.sample_interval < 100) {
      return ctx->Fail(InvalidArgument("--interval must be a duration of at least 100ms, like 5s; got '" +
                                       flags->interval + "'"));
    }
    // Files the daemon creates (the database, job logs) are private unless it
    // opens them up on purpose.
    ::umask(077);
    if (Status s = EnsureStateDir(ctx->own_dir()); !s.ok()) return ctx->Fail(s);
    SetUpLogging(flags->log_level, ctx->own_dir().log_dir() + "/daemon.log");
    // Connections are limited to what fits below the open-files limit
    // (daemon/fd_budget.h); a higher limit leaves room for more of them.
    if (auto fds = daemon::RaiseFdLimit(); !fds.ok()) {
      spdlog::warn("{}", fds.status().ToString());
    } else {
      // Jobs keep the limit the daemon was started with.
      options.job_open_files = fds->before;
      if (fds->soft != fds->before) {
        spdlog::info("open-files limit raised from {} to {} (hard limit {}); jobs keep {}", fds->before, fds->soft,
                     fds->hard, fds->before);
      }
    }

    // Signals are taken by one thread with sigwait, so no handler runs on a
    // thread that holds a lock; every thread created after this inherits the mask.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    // Each turn allocates and frees a few MiB (the batch, JSON bodies); with
    // glibc's default 128 KiB threshold, free() hands that back to the kernel
    // every turn and the next turn faults it in again. Keeping up to 64 MiB
    // cut the daemon's CPU per queued job from 4.4 to 3.35 ms
    // (bench/queue/cpu_per_job.sh).
    ::mallopt(M_TRIM_THRESHOLD, 64 << 20);

    auto clock = host::NewRealClock();
    auto created = daemon::Daemon::Create(options, clock.get());
    if (!created.ok()) return ctx->Fail(created.status());
    daemon::Daemon* d = created->get();
    std::thread waiter([d, signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      d->Stop();  // harmless when Run() has already returned
    });
    Status run = d->Run();
    // Wake the waiter if the daemon stopped for another reason (POST /v1/shutdown).
    pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    if (!run.ok()) ctx->Fail(run);
  });
}

}  // namespace gpuherd::app
