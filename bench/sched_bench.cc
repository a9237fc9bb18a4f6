// One scheduling pass at 100 / 1,000 / 10,000 GPUs with 1k / 10k / 100k
// pending jobs: a realistic mix (60% 1-GPU, 15% 2-GPU, 10% 4-8 GPU, 15%
// fractional) on a fleet 70% busy. Prints Markdown tables: milliseconds of
// CPU per pass (the thread's CPU time, so that other work on a shared
// machine does not count), and nanoseconds per (job · log2 job) to show the
// growth is n log n.
//
// Then the deep queue: 20,000 pending on a full 8-GPU machine (one
// `--array 20000`, and a mixed queue), where nothing can start.
//
// Usage: sched_bench [--quick | --only GPUS JOBS | --deep]
//   (--quick stops at 1,000 GPUs × 10k jobs; --deep runs only the deep queue)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <ctime>
#include <string>
#include <vector>

#include "sched/fleet_state.h"
#include "sched/scheduler.h"

namespace gpuherd::sched {
namespace {

constexpr uint64_t kGiB = 1ull << 30;
constexpr TimeMs kNow = 1'750'000'000'000;  // a fixed instant: passes are pure

// CPU time of this thread: other work on a shared machine does not count.
double CpuMs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct Model {
  const char* name;
  int cc;
  uint64_t memory;
};
constexpr Model kModels[] = {{"NVIDIA H100 80GB HBM3", 90, 80 * kGiB},
                             {"NVIDIA A100-SXM4-40GB", 80, 40 * kGiB},
                             {"NVIDIA L40S", 89, 48 * kGiB}};

// Servers of 8 GPUs: one NVLink island, PCIe switches of 2, NUMA nodes of 4;
// one model per server. 1% drained, 1% too hot.
FleetState MakeFleet(int gpus, std::mt19937_64& rng) {
  FleetState fleet;
  std::uniform_real_distribution<double> temp(35, 75);
  std::uniform_int_distribution<int> percent(0, 99);
  for (int i = 0; i < gpus; ++i) {
    const Model& m = kModels[(i / 8) % 3];
    GpuState g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.name = m.name;
    g.cc = m.cc;
    g.memory_total_bytes = m.memory;
    g.temp_c = temp(rng);
    g.slowdown_temp_c = 87;
    g.numa_node = i / 4;
    g.nvlink_island = i / 8;
    g.pcie_switch = i / 2;
    int roll = percent(rng);
    if (roll == 0) g.drained = true;
    if (roll == 1) g.temp_c = 90;
    fleet.gpus.push_back(g);
  }
  return fleet;
}

// In twentieths: 60 % one GPU, 15 % two, 10 % four or eight, 15 % a
// fraction from 0.05 to 0.5.
int DrawTwentieths(std::mt19937_64& rng) {
  int roll = std::uniform_int_distribution<int>(0, 99)(rng);
  if (roll < 60) return 20;
  if (roll < 75) return 40;
  if (roll < 85) return roll < 80 ? 80 : 160;
  return std::uniform_int_distribution<int>(1, 10)(rng);
}

JobSpec DrawSpec(std::mt19937_64& rng, int users) {
  JobSpec spec;
  spec.argv = {"train"};
  spec.gpu_twentieths = DrawTwentieths(rng);
  if (spec.fractional()) spec.gpu_mem_bytes = std::uniform_int_distribution<int>(4, 16)(rng) * kGiB;
  std::uniform_int_distribution<int> percent(0, 99);
  spec.priority = percent(rng) < 20 ? std::uniform_int_distribution<int>(-20, 40)(rng) : 0;
  spec.user = "user" + std::to_string(std::uniform_int_distribution<int>(0, users - 1)(rng));
  if (percent(rng) < 70) {
    spec.time_limit = std::uniform_int_distribution<int>(1, 16)(rng) * 30 * kMinuteMs;
  }
  if (percent(rng) < 10) spec.model = "H100";
  spec.preemptible = percent(rng) < 30;
  return spec;
}

// Fills 70% of the usable GPUs with running jobs of the same mix.
std::vector<RunningJob> MakeRunning(FleetState& fleet, std::mt19937_64& rng, JobId* next_id) {
  std::vector<RunningJob> running;
  const int target = static_cast<int>(fleet.gpus.size() * 0.7);
  int busy = 0;
  size_t cursor = 0;
  while (busy < target && cursor < fleet.gpus.size()) {
    JobSpec spec = DrawSpec(rng, 200);
    spec.model.clear();
    RunningJob job;
    job.id = (*next_id)++;
    job.started = kNow - std::uniform_int_distribution<int>(1, 240)(rng) * kMinuteMs;
    if (spec.time_limit > 0 && job.started + spec.time_limit <= kNow) {
      spec.time_limit = kNow - job.started + 30 * kMinuteMs;
    }
    int n = spec.fractional() ? 1 : spec.whole_gpus();
    for (int k = 0; k < n && cursor < fleet.gpus.size(); ++k) job.gpus.push_back(cursor++);
    busy += static_cast<int>(job.gpus.size());
    if (spec.fractional()) {
      // A second fraction beside it, so shared GPUs exist.
      RunningJob neighbour = job;
      neighbour.id = (*next_id)++;
      neighbour.spec = spec;
      running.push_back(neighbour);
    }
    job.spec = std::move(spec);
    running.push_back(std::move(job));
  }
  AccountRunningJobs(running, &fleet);
  return running;
}

std::vector<PendingJob> MakePending(int count, std::mt19937_64& rng, JobId* next_id) {
  std::vector<PendingJob> pending;
  pending.reserve(count);
  std::uniform_int_distribution<int> percent(0, 99);
  for (int i = 0; i < count; ++i) {
    PendingJob job;
    job.id = (*next_id)++;
    job.spec = DrawSpec(rng, std::max(10, count / 100));
    job.submitted = kNow - std::uniform_int_distribution<int>(0, 7200)(rng) * kSecondMs;
    job.user_gpu_hours = std::uniform_real_distribution<double>(0, 50)(rng);
    if (percent(rng) < 5) {
      job.deps = Dependencies::kWaiting;
      job.blocking_dep = job.id - 1;
      job.blocking_dep_state = JobState::kPending;
    }
    pending.push_back(std::move(job));
  }
  return pending;
}

struct Row {
  int gpus = 0, pending = 0, running = 0;
  size_t starts = 0, preemptions = 0;
  double ms = 0;
  double ns_per_nlogn = 0;
};

Row Measure(int gpus, int jobs, int reps) {
  std::mt19937_64 rng(gpus * 1000003ull + jobs);
  JobId next_id = 1;
  FleetState fleet = MakeFleet(gpus, rng);
  std::vector<RunningJob> running = MakeRunning(fleet, rng, &next_id);
  std::vector<PendingJob> pending = MakePending(jobs, rng, &next_id);
  SchedulerConfig config;
  config.max_running_gpus_per_user = 64;
  std::vector<double> times;
  Decisions d;
  for (int r = 0; r < reps; ++r) {
    double t0 = CpuMs();
    d = Schedule(fleet, pending, running, kNow, config);
    times.push_back(CpuMs() - t0);
  }
  std::sort(times.begin(), times.end());
  Row row;
  row.gpus = gpus;
  row.pending = jobs;
  row.running = static_cast<int>(running.size());
  row.starts = d.starts.size();
  row.preemptions = d.preemptions.size();
  row.ms = times[times.size() / 2];
  row.ns_per_nlogn = row.ms * 1e6 / (jobs * std::log2(static_cast<double>(jobs)));
  return row;
}

// 8 GPUs, every one held by a job that nothing may preempt and that has no
// time limit: no GPU can free up for anyone during the pass.
struct DeepRow {
  const char* what;
  int pending = 0;
  size_t starts = 0, waiting = 0;
  double ms = 0;
};

DeepRow MeasureDeep(const char* what, bool array, int reps) {
  std::mt19937_64 rng(20000);
  JobId next_id = 1;
  FleetState fleet = MakeFleet(8, rng);
  for (GpuState& g : fleet.gpus) {
    g.drained = false;
    g.temp_c = 40;
  }
  std::vector<RunningJob> running;
  for (int i = 0; i < 8; ++i) {
    RunningJob job;
    job.id = next_id++;
    job.spec.argv = {"serve"};
    job.spec.gpu_twentieths = kTwentiethsPerGpu;
    job.spec.user = "ops";
    job.spec.priority = 100;
    job.started = kNow - kHourMs;
    job.gpus = {i};
    running.push_back(std::move(job));
  }
  AccountRunningJobs(running, &fleet);
  std::vector<PendingJob> pending;
  if (array) {
    JobSpec spec;
    spec.argv = {"sweep"};
    spec.gpu_twentieths = kTwentiethsPerGpu;
    spec.user = "alice";
    for (int i = 0; i < 20000; ++i) {
      pending.push_back({.id = next_id++, .spec = spec, .submitted = kNow - kMinuteMs});
    }
  } else {
    pending = MakePending(20000, rng, &next_id);
  }
  SchedulerConfig config;
  std::vector<double> times;
  Decisions d;
  for (int r = 0; r < reps; ++r) {
    double t0 = CpuMs();
    d = Schedule(fleet, pending, running, kNow, config);
    times.push_back(CpuMs() - t0);
  }
  std::sort(times.begin(), times.end());
  return {what, static_cast<int>(pending.size()), d.starts.size(), d.waiting.size(),
          times[times.size() / 2]};
}

void PrintDeep() {
  std::printf("\n## 20,000 pending on a full 8-GPU machine (median CPU time of 9 passes)\n\n");
  std::printf("| queue | pending | starts | waiting | ms / pass |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  for (bool array : {true, false}) {
    DeepRow r = MeasureDeep(array ? "one array of 1-GPU jobs" : "the mixed queue above", array, 9);
    std::printf("| %s | %d | %zu | %zu | %.2f |\n", r.what, r.pending, r.starts, r.waiting, r.ms);
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace gpuherd::sched

int main(int argc, char** argv) {
  using gpuherd::sched::Measure;
  using gpuherd::sched::Row;
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  if (argc > 1 && std::strcmp(argv[1], "--deep") == 0) {
    gpuherd::sched::PrintDeep();
    return 0;
  }
  if (argc == 4 && std::strcmp(argv[1], "--only") == 0) {  // one size, for profiling
    Row r = Measure(std::atoi(argv[2]), std::atoi(argv[3]), 5);
    std::printf("%d GPUs × %d jobs: %.2f ms, %zu starts\n", r.gpus, r.pending, r.ms, r.starts);
    return 0;
  }
  const int gpu_sizes[] = {100, 1000, 10000};
  const int job_sizes[] = {1000, 10000, 100000};
  std::printf("## One scheduling pass (median CPU time of repeated passes)\n\n");
  std::printf("| GPUs | pending | running | starts | preemptions | ms / pass | ns / (n·log2 n) |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<Row> diagonal;
  for (int g : gpu_sizes) {
    for (int n : job_sizes) {
      if (quick && (g > 1000 || n > 10000)) continue;
      int reps = static_cast<long>(g) * n > 100'000'000 ? 3 : 7;
      Row r = Measure(g, n, reps);
      std::printf("| %d | %d | %d | %zu | %zu | %.2f | %.1f |\n", r.gpus, r.pending, r.running,
                  r.starts, r.preemptions, r.ms, r.ns_per_nlogn);
      std::fflush(stdout);
      if (static_cast<long>(g) * 10 == n) diagonal.push_back(r);
    }
  }
  std::printf("\n## Growth along the diagonal (GPUs ×10, jobs ×10)\n\n");
  std::printf("| from | to | time ratio | n·log2 n ratio | time ratio / n·log n ratio |\n");
  std::printf("|---|---|---:|---:|---:|\n");
  for (size_t i = 1; i < diagonal.size(); ++i) {
    const Row& a = diagonal[i - 1];
    const Row& b = diagonal[i];
    double time_ratio = b.ms / a.ms;
    double nlogn_ratio = (b.pending * std::log2(b.pending)) / (a.pending * std::log2(a.pending));
    std::printf("| %d × %d | %d × %d | %.1f | %.1f | %.2f |\n", a.gpus, a.pending, b.gpus,
                b.pending, time_ratio, nlogn_ratio, time_ratio / nlogn_ratio);
  }
  gpuherd::sched::PrintDeep();
  return 0;
}
