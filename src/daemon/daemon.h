// The daemon: wires the GPU driver, sampler, telemetry, store and HTTP API
// around one event loop that owns all mutable state (daemon_state.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "daemon/job_service.h"
#include "daemon/self_heal_service.h"
#include "daemon/slurm_backend.h"
#include "gpu/open.h"
#include "host/clock.h"

namespace gpuherd::daemon {

constexpr int kDefaultApiPort = 7480;

struct DaemonOptions {
  std::string home;              // the state directory, already resolved
  // The unix socket when not <home>/gpuherd.sock (--socket): the system
  // daemon's /run/gpuherd/gpuherd.sock, where users find it without a
  // setting (cli/daemon_locator.h). <home>/gpuherd.sock then links to it.
  std::string socket_path;
  gpu::DriverChoice driver;
  int port = kDefaultApiPort;    // TCP on 127.0.0.1; 0 = any free port, -1 = none
  DurationMs sample_interval = 5 * kSecondMs;
  size_t ring_capacity = 720;    // samples kept in memory per GPU (1 h at 5 s)
  QueueConfig queue;
  std::string admin_group;       // members may act on any job and drain GPUs
  // Names besides localhost, IP addresses and the hostname that TCP requests
  // may give as Host (--allow-host; routes/access.h).
  std::vector<std::string> allow_hosts;
  // Alerts: the rules file (empty: the defaults built in), where to notify.
  std::string alert_rules_path;  // a file:line error refuses the start
  std::vector<std::string> webhook_urls;
  std::string alert_command;     // run by /bin/sh -c with the payload on stdin
  int metrics_port = -1;         // a second TCP listener serving only /metrics; -1 = none
  std::string metrics_host = "0.0.0.0";  // where Prometheus on another host can reach it
  // Where /sys/class/infiniband is read; empty: "/". Tests point it at a fixture tree.
  std::string ib_sysfs_root;
  // Pipelines: "local" or "slurm" for runs whose file names no backend. The
  // Slurm backend exists when slurm.site.shared_dir is set.
  std::string pipeline_backend = "local";
  SlurmBackendOptions slurm;
  // Start NVIDIA's MPS control daemon per GPU (mps_control.h).
  bool mps = false;
  // Containment: where control groups are mounted; empty: none, the job
  // shims' subreaper only (docs/queue.md "Containment").
  std::string cgroup_root = "/sys/fs/cgroup";
  // The soft open-files limit jobs run with: the one the daemon found before
  // it raised its own (fd_budget.h); 0: the daemon's.
  uint64_t job_open_files = 0;
  // Start on a database that has never assigned an id although the home
  // holds job or pipeline folders, with ids above them (id_folders.h).
  bool adopt_empty_state = false;
  // Self-healing GPUs (self_heal_service.h): --requalify-after, --requalify-level,
  // --allow-gpu-reset, --self-heal-shadow, --self-heal KEY=VALUE.
  SelfHealOptions self_heal;
  // HTTP connections (docs/security.md "Connection limits"): per uid on the unix socket
  // and per address over TCP (0: no limit), and in all, lowered to what the
  // open-files limit allows (fd_budget.h).
  int max_connections_per_user = 64;
  int max_connections = 4096;
};

class Daemon {
 public:
  // Opens everything and starts the listeners and the sampler; fails with a
  // message a person can act on (another daemon on this home, port in use,
  // unwritable home, bad scenario). `clock` must outlive the Daemon.
  static Result<std::unique_ptr<Daemon>> Create(const DaemonOptions& options, host::Clock* clock);
  ~Daemon();

  // Runs the event loop on the calling thread until Stop() or POST
  // /v1/shutdown; then stops the sampler and listeners and commits the last
  // rollups and the daemon.stop event.
  Status Run();
  // Thread-safe; async-signal-unsafe (call it from a signal-waiting thread).
  void Stop();

  int tcp_port() const;
  // The /metrics listener's port; -1 without one.
  int metrics_port() const;
  std::string socket_path() const;

 private:
  struct Impl;
  explicit Daemon(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpuherd::daemon
