#include "daemon/queue/job_launcher.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/owned_dirs.h"
#include "exec/job_trees.h"
#include "host/cpulist.h"

namespace gpuherd::daemon {

int RestartCount(const sched::Job& job, int prior_attempts) {
  return prior_attempts + std::max(0, job.attempt - 1);
}

}  // namespace gpuherd::daemon

namespace gpuherd::daemon::queue {
namespace {

// CPUs of the GPUs' NUMA node that this process may actually use: a simulated
// fleet's affinity names CPUs this machine may not have.
std::vector<int> AffinityFor(const gpu::Fleet& fleet, const std::vector<int>& gpus) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return {};
  std::set<int> cpus;
  for (int g : gpus) {
    if (g < 0 || g >= static_cast<int>(fleet.gpus.size())) continue;
    auto affinity = host::ParseCpuList(fleet.gpus[g].cpu_affinity);
    if (!affinity.ok()) continue;
    for (int c : *affinity) {
      if (c >= 0 && c < CPU_SETSIZE && CPU_ISSET(c, &allowed)) cpus.insert(c);
    }
  }
  return {cpus.begin(), cpus.end()};
}

}  // namespace

JobLauncher::JobLauncher(const gpu::Fleet* fleet, StateDir dir, exec::JobExecutor* executor, PostToLoop post,
                         RunOffLoop run_off_loop)
    : fleet_(fleet),
      dir_(std::move(dir)),
      executor_(executor),
      post_(std::move(post)),
      run_off_loop_(std::move(run_off_loop)) {
  if (!run_off_loop_) {
    launches_ = std::make_unique<WorkQueue>();
    run_off_loop_ = [q = launches_.get()](std::function<void()> task) { q->Post(std::move(task)); };
  }
}

std::string JobLauncher::AttemptDir(sched::JobId id, int attempt) const {
  return fmt::format("{}/{}/{}", dir_.jobs_dir(), id, attempt);
}

std::string JobLauncher::RecordDir(sched::JobId id, int attempt) const {
  return exec::AttemptRecordDir(dir_.records_dir(), id, attempt);
}

std::string JobLauncher::MetricsFile(sched::JobId id) const {
  return fmt::format("{}/{}/metrics.jsonl", dir_.jobs_dir(), id);
}

exec::LaunchSpec JobLauncher::Prepare(const sched::Job& job, const AttemptFacts& facts) const {
  exec::LaunchSpec l;
  l.job_id = job.id;
  l.attempt = job.attempt;
  l.argv = job.spec.argv;
  l.cwd = job.spec.cwd;
  l.env = job.spec.env;
  l.record_dir = RecordDir(job.id, job.attempt);
  l.output_dir = AttemptDir(job.id, job.attempt);
  // Jobs run as their submitter when the daemon can switch users (root).
  if (::geteuid() == 0 && job.spec.uid != 0) {
    l.uid = job.spec.uid;
    l.gid = job.spec.gid;
  }
  l.cpus = AffinityFor(*fleet_, job.gpus);
  l.time_limit = job.spec.time_limit;
  l.grace = job.spec.checkpoint_grace;
  l.limits.memory_bytes = job.spec.mem_bytes;  // enforced in the job's control group
  l.limits.cpus = job.spec.cpus;

  // The job protocol (docs/queue.md "Job protocol").
  std::string visible;
  for (const auto& u : job.gpu_uuids) visible += (visible.empty() ? "" : ",") + u;
  l.env["CUDA_VISIBLE_DEVICES"] = job.spec.gpu_twentieths > 0 ? visible : "";
  l.env["GPUHERD_JOB_ID"] = std::to_string(job.id);
  l.env["GPUHERD_JOB_NAME"] = job.spec.name;
  l.env["GPUHERD_ATTEMPT"] = std::to_string(job.attempt);
  l.env["GPUHERD_CHECKPOINT_DIR"] =
      facts.checkpoint_dir.empty() ? fmt::format("{}/{}", dir_.checkpoint_dir(), job.id) : facts.checkpoint_dir;
  l.env["GPUHERD_METRICS_FILE"] = MetricsFile(job.id);
  l.env["GPUHERD_RESTART_COUNT"] = std::to_string(RestartCount(job, facts.prior_attempts));
  if (job.attempt > 1) l.env["GPUHERD_RESUME"] = "1";
  if (job.spec.fractional()) {
    l.env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = std::to_string(job.spec.gpu_twentieths * 5);
    l.env["GPUHERD_GPU_MEM_LIMIT_MB"] = std::to_string(job.spec.gpu_mem_bytes >> 20);
    // Exactly the share the scheduler counts: what the memory fence enforces.
    l.env["GPUHERD_GPU_MEM_LIMIT_BYTES"] = std::to_string(job.spec.gpu_mem_bytes);
    if (mps_ != nullptr && job.gpus.size() == 1 && facts.mps_alone) {
      for (const auto& [key, value] : mps_->JobEnv(job.gpus[0], job.spec.gpu_mem_bytes)) l.env[key] = value;
    }
  }
  if (job.spec.whole_gpus() > 1) {
    // torchrun-style single-node rendezvous; the port is unique per job.
    l.env["MASTER_ADDR"] = "127.0.0.1";
    l.env["MASTER_PORT"] = std::to_string(29500 + job.id % 20000);
    l.env["WORLD_SIZE"] = std::to_string(job.spec.whole_gpus());
    l.env["LOCAL_WORLD_SIZE"] = std::to_string(job.spec.whole_gpus());
    bool all_nvlink = true;
    for (int a : job.gpus) {
      for (int b : job.gpus) {
        if (a != b && fleet_->topology.at(a).at(b) != gpu::Link::kNvLink) all_nvlink = false;
      }
    }
    l.env["NCCL_P2P_LEVEL"] = all_nvlink ? "NVL" : "PIX";
  }
  if (fleet_->simulated) {
    l.env["GPUHERD_SIM_GPU_MEM_FILE"] = fmt::format("{}/{}/sim_gpu_mem_mb", dir_.jobs_dir(), job.id);
  }
  return l;
}

void JobLauncher::Launch(exec::LaunchSpec launch, std::function<void(const Result<int>&)> done) {
  // Forks happen off the loop, so the loop goes on answering.
  run_off_loop_([this, launch = std::move(launch), done = std::move(done)]() mutable {
    // The job's own folders (metrics and the attempts' output below it, its
    // checkpoints) belong to the user it runs as. Root makes only these, in
    // jobs/ and checkpoints/, which only root writes, and hands them over
    // (exec/job_trees.h, rule 3); the job's process makes what is inside.
    // A pipeline node's checkpoint folder is the run's, made as its user.
    const std::optional<DirOwner> owner =
        launch.uid ? std::optional<DirOwner>(DirOwner{*launch.uid, *launch.gid}) : std::nullopt;
    std::vector<std::string> folders = {fmt::format("{}/{}", dir_.jobs_dir(), launch.job_id)};
    const std::string default_checkpoints = fmt::format("{}/{}", dir_.checkpoint_dir(), launch.job_id);
    if (launch.env.at("GPUHERD_CHECKPOINT_DIR") == default_checkpoints) folders.push_back(default_checkpoints);
    for (const std::string& d : folders) {
      Status made = MakeHomeDirs(dir_, d, owner);
      if (!made.ok()) spdlog::warn("job {}: {}", launch.job_id, made.message());
    }
    Result<int> pid = executor_->Launch(launch);
    post_([done = std::move(done), pid = std::move(pid)] { done(pid); });
  });
}

}  // namespace gpuherd::daemon::queue
