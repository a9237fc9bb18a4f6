// A 24-hour simulated lab trace replayed in simulated time (discrete events)
// through the real Schedule() on 8 NVLink GPUs, against a plain FIFO policy
// (strict order, no backfill, the first free GPUs) on the same trace.
// Submissions pause 01:00-07:00; three GPU faults kill the jobs on a GPU and
// take it away for an hour (the jobs start again from scratch).
//
// Usage: trace_replay [SEED]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpu/sim/sim_driver.h"
#include "sched/fleet_state.h"
#include "sched/scheduler.h"

namespace gpuherd::sched {
namespace {

constexpr int kGpus = 8;
constexpr uint64_t kGiB = 1ull << 30;
constexpr TimeMs kDay = 24 * kHourMs;
constexpr TimeMs kHorizon = 3 * kDay;  // let the queue drain after the day

struct TraceJob {
  JobId id = 0;
  JobSpec spec;
  TimeMs submitted = 0;
  DurationMs duration = 0;  // actual run time
};

struct Fault {
  TimeMs at = 0;
  int gpu = 0;
};

struct Trace {
  std::vector<TraceJob> jobs;
  std::vector<Fault> faults;
};

Trace MakeTrace(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  Trace trace;
  // Poisson arrivals, 8 an hour (about the fleet's capacity), none 01:00-07:00.
  TimeMs t = 0;
  JobId id = 1;
  std::exponential_distribution<double> gap(8.0 / kHourMs);
  while (true) {
    t += static_cast<TimeMs>(gap(rng));
    if (t >= kDay) break;
    if (t >= kHourMs && t < 7 * kHourMs) continue;
    TraceJob job;
    job.id = id++;
    job.submitted = t;
    job.spec.argv = {"train"};
    job.spec.user = "user" + std::to_string(static_cast<int>(unit(rng) * 6));
    double kind = unit(rng);
    double median_min;
    if (kind < 0.45) {
      job.spec.gpu_twentieths = kTwentiethsPerGpu;
      median_min = 25;
    } else if (kind < 0.65) {
      job.spec.gpu_twentieths = 20;
      median_min = 40;
    } else if (kind < 0.75) {
      job.spec.gpu_twentieths = 40;
      median_min = 60;
    } else {
      job.spec.gpu_twentieths = 2 + static_cast<int>(unit(rng) * 4);  // 0.2-0.5
      job.spec.gpu_mem_bytes = (8 + static_cast<int>(unit(rng) * 12)) * kGiB;
      median_min = 20;
    }
    std::lognormal_distribution<double> minutes(std::log(median_min), 0.9);
    job.duration = static_cast<DurationMs>(std::clamp(minutes(rng), 2.0, 600.0) * kMinuteMs);
    if (unit(rng) < 0.85) {
      // Users overestimate: 1.3-3× the run time, rounded up to 15 minutes.
      double limit = job.duration * (1.3 + 1.7 * unit(rng));
      job.spec.time_limit =
          static_cast<DurationMs>(std::ceil(limit / (15 * kMinuteMs))) * 15 * kMinuteMs;
    }
    job.spec.priority = unit(rng) < 0.15 ? 20 : 0;
    trace.jobs.push_back(std::move(job));
  }
  std::uniform_int_distribution<int> gpu(0, kGpus - 1);
  for (TimeMs at : {9 * kHourMs + 20 * kMinuteMs, 14 * kHourMs + 50 * kMinuteMs,
                    20 * kHourMs + 10 * kMinuteMs}) {
    trace.faults.push_back({at + static_cast<TimeMs>(unit(rng) * 30 * kMinuteMs), gpu(rng)});
  }
  return trace;
}

// The fleet as the daemon would see it: 8 simulated H100 SXM, discovered by
// the simulated driver (all pairs NVLinked, two NUMA nodes) and turned into
// scheduler state by the same code the daemon uses.
FleetState MakeFleet() {
  gpu::sim::SimOptions options;
  options.count = kGpus;
  options.models = {"h100-sxm"};
  auto driver = gpu::sim::OpenSimDriver(options);
  if (!driver.ok()) {
    std::fprintf(stderr, "trace_replay: %s\n", driver.status().ToString().c_str());
    std::exit(1);
  }
  auto fleet = (*driver)->Discover();
  if (!fleet.ok()) {
    std::fprintf(stderr, "trace_replay: %s\n", fleet.status().ToString().c_str());
    std::exit(1);
  }
  FleetState state = FleetStateFromFleet(*fleet);
  for (GpuState& g : state.gpus) g.temp_c = 45;  // idle and cool, all alike
  return state;
}

struct Result {
  double utilization = 0;  // of the 8 GPUs over the 24 h
  double mean_wait_min = 0, p95_wait_min = 0;
  int completed = 0;       // within the 24 h
  int completed_total = 0;
  double lost_gpu_hours = 0;
  int unfinished = 0;
};

enum class Policy { kGpuherd, kFifo };

// FIFO: the oldest job first; it takes the lowest-numbered free GPUs; when it
// does not fit, nobody behind it starts.
std::vector<StartDecision> Fifo(const FleetState& fleet, const std::vector<PendingJob>& pending) {
  std::vector<int> twentieths(kGpus);
  std::vector<uint64_t> mem(kGpus);
  for (int i = 0; i < kGpus; ++i) {
    twentieths[i] = fleet.gpus[i].lost ? kTwentiethsPerGpu : fleet.gpus[i].twentieths_in_use;
    mem[i] = fleet.gpus[i].fraction_mem_reserved_bytes;
  }
  std::vector<StartDecision> starts;
  for (const PendingJob& job : pending) {  // kept in submission order
    StartDecision start{job.id, {}};
    if (job.spec.fractional()) {
      for (int i = 0; i < kGpus && start.gpus.empty(); ++i) {
        if (twentieths[i] + job.spec.gpu_twentieths <= kTwentiethsPerGpu &&
            mem[i] + job.spec.gpu_mem_bytes <= fleet.gpus[i].memory_total_bytes) {
          start.gpus.push_back(i);
          twentieths[i] += job.spec.gpu_twentieths;
          mem[i] += job.spec.gpu_mem_bytes;
        }
      }
    } else {
      std::vector<int> free;
      for (int i = 0; i < kGpus; ++i) {
        if (twentieths[i] == 0) free.push_back(i);
      }
      if (static_cast<int>(free.size()) >= job.spec.whole_gpus()) {
        free.resize(job.spec.whole_gpus());
        for (int i : free) twentieths[i] = kTwentiethsPerGpu;
        start.gpus = free;
      }
    }
    if (start.gpus.empty()) break;
    starts.push_back(std::move(start));
  }
  return starts;
}

Result Replay(const Trace& trace, Policy policy) {
  const FleetState base = MakeFleet();
  std::map<JobId, const TraceJob*> by_id;
  for (const TraceJob& j : trace.jobs) by_id[j.id] = &j;
  std::vector<PendingJob> pending;
  std::vector<RunningJob> running;
  std::map<JobId, TimeMs> first_start;
  std::vector<TimeMs> lost_until(kGpus, 0);
  Result result;
  double busy_twentieth_ms = 0;
  size_t next_arrival = 0;
  SchedulerConfig config;
  TimeMs now = 0;
  auto busy_until = [&](TimeMs from, TimeMs to, const RunningJob& job) {
    TimeMs a = std::max<TimeMs>(from, 0), b = std::min(to, kDay);
    // gpu_twentieths covers all of a job's GPUs: 20 per whole GPU.
    if (b > a) busy_twentieth_ms += static_cast<double>(b - a) * job.spec.gpu_twentieths;
  };
  while (now < kHorizon) {
    // Next event: an arrival, a completion, a fault, a GPU coming back.
    TimeMs next = kHorizon;
    if (next_arrival < trace.jobs.size()) next = std::min(next, trace.jobs[next_arrival].submitted);
    for (const RunningJob& r : running) {
      next = std::min(next, r.started + by_id[r.id]->duration);
    }
    for (const Fault& f : trace.faults) {
      if (f.at > now) next = std::min(next, f.at);
      if (f.at + kHourMs > now) next = std::min(next, f.at + kHourMs);
    }
    if (next >= kHorizon && pending.empty() && running.empty()) break;
    now = next;
    // Completions.
    for (auto it = running.begin(); it != running.end();) {
      if (it->started + by_id[it->id]->duration <= now) {
        busy_until(it->started, now, *it);
        if (now <= kDay) ++result.completed;
        ++result.completed_total;
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    // Faults: the jobs on the GPU are killed and requeued from scratch.
    for (const Fault& f : trace.faults) {
      if (f.at != now) continue;
      lost_until[f.gpu] = now + kHourMs;
      for (auto it = running.begin(); it != running.end();) {
        if (std::find(it->gpus.begin(), it->gpus.end(), f.gpu) != it->gpus.end()) {
          busy_until(it->started, now, *it);
          result.lost_gpu_hours +=
              static_cast<double>(now - it->started) / kHourMs * it->spec.gpu_twentieths / 20.0;
          const TraceJob& tj = *by_id[it->id];
          pending.push_back(PendingJob{.id = tj.id, .spec = tj.spec, .submitted = tj.submitted});
          it = running.erase(it);
        } else {
          ++it;
        }
      }
    }
    while (next_arrival < trace.jobs.size() && trace.jobs[next_arrival].submitted <= now) {
      const TraceJob& tj = trace.jobs[next_arrival++];
      pending.push_back(PendingJob{.id = tj.id, .spec = tj.spec, .submitted = tj.submitted});
    }
    std::sort(pending.begin(), pending.end(), [](const PendingJob& a, const PendingJob& b) {
      return a.submitted != b.submitted ? a.submitted < b.submitted : a.id < b.id;
    });
    FleetState fleet = base;
    for (int i = 0; i < kGpus; ++i) fleet.gpus[i].lost = lost_until[i] > now;
    AccountRunningJobs(running, &fleet);
    std::vector<StartDecision> starts =
        policy == Policy::kFifo ? Fifo(fleet, pending)
                                : Schedule(fleet, pending, running, now, config).starts;
    for (const StartDecision& s : starts) {
      auto it = std::find_if(pending.begin(), pending.end(),
                             [&](const PendingJob& p) { return p.id == s.job; });
      RunningJob r{.id = it->id, .spec = it->spec, .started = now, .gpus = s.gpus};
      first_start.try_emplace(it->id, now);
      pending.erase(it);
      running.push_back(std::move(r));
    }
  }
  for (const RunningJob& r : running) busy_until(r.started, now, r);
  result.unfinished = static_cast<int>(pending.size() + running.size());
  result.utilization = busy_twentieth_ms / (static_cast<double>(kDay) * kGpus * kTwentiethsPerGpu);
  std::vector<double> waits;
  for (const TraceJob& j : trace.jobs) {
    auto it = first_start.find(j.id);
    TimeMs start = it == first_start.end() ? now : it->second;
    waits.push_back(static_cast<double>(start - j.submitted) / kMinuteMs);
  }
  std::sort(waits.begin(), waits.end());
  double sum = 0;
  for (double w : waits) sum += w;
  result.mean_wait_min = waits.empty() ? 0 : sum / waits.size();
  result.p95_wait_min = waits.empty() ? 0 : waits[static_cast<size_t>(waits.size() * 0.95)];
  return result;
}

}  // namespace
}  // namespace gpuherd::sched

int main(int argc, char** argv) {
  using namespace gpuherd::sched;
  uint64_t seed = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 42;
  Trace trace = MakeTrace(seed);
  double offered = 0;
  int counts[4] = {0, 0, 0, 0};
  for (const TraceJob& j : trace.jobs) {
    offered += static_cast<double>(j.duration) / gpuherd::kHourMs * j.spec.gpu_twentieths / 20.0;
    counts[j.spec.fractional() ? 3 : j.spec.whole_gpus() == 1 ? 0 : j.spec.whole_gpus() == 2 ? 1 : 2]++;
  }
  Result g = Replay(trace, Policy::kGpuherd);
  Result f = Replay(trace, Policy::kFifo);
  std::printf("## 24-hour lab trace on 8 NVLink GPUs (seed %llu)\n\n",
              static_cast<unsigned long long>(seed));
  std::printf("%zu jobs (%d 1-GPU, %d 2-GPU, %d 4-GPU, %d fractional), %.0f GPU-hours of work "
              "offered; no submissions 01:00-07:00; GPU faults at",
              trace.jobs.size(), counts[0], counts[1], counts[2], counts[3], offered);
  for (const Fault& fault : trace.faults) {
    std::printf(" %s (GPU %d)", gpuherd::FormatTimeUtc(fault.at).substr(11, 5).c_str(), fault.gpu);
  }
  std::printf(".\n\n");
  std::printf("| policy | GPU utilization (24 h) | mean wait | p95 wait | jobs completed in 24 h | "
              "GPU-hours lost to faults |\n|---|---:|---:|---:|---:|---:|\n");
  auto row = [](const char* name, const Result& r) {
    std::printf("| %s | %.1f%% | %.1f min | %.1f min | %d | %.2f |\n", name, 100 * r.utilization,
                r.mean_wait_min, r.p95_wait_min, r.completed, r.lost_gpu_hours);
  };
  row("gpuherd (priority, backfill, packing)", g);
  row("FIFO (strict order, first free GPUs)", f);
  std::printf("| ratio gpuherd / FIFO | %.2f× | %.2f× | %.2f× | %.2f× | %.2f× |\n",
              g.utilization / f.utilization, g.mean_wait_min / f.mean_wait_min,
              g.p95_wait_min / f.p95_wait_min, static_cast<double>(g.completed) / f.completed,
              f.lost_gpu_hours > 0 ? g.lost_gpu_hours / f.lost_gpu_hours : 0.0);
  return 0;
}
