// Fleets and jobs for the scheduler's tests.
#pragma once

#include <string>
#include <vector>

#include "sched/fleet_state.h"
#include "sched/job.h"

namespace gpuherd::sched::testing {

constexpr uint64_t kGiB = 1ull << 30;

// `n` idle, healthy 80 GiB GPUs (cc 9.0, 40 °C, slowdown 87 °C) on one NUMA
// node with no topology matrix.
inline FleetState MakeFleet(int n) {
  FleetState fleet;
  for (int i = 0; i < n; ++i) {
    GpuState g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.cc = 90;
    g.memory_total_bytes = 80 * kGiB;
    g.temp_c = 40;
    g.slowdown_temp_c = 87;
    g.numa_node = 0;
    fleet.gpus.push_back(g);
  }
  return fleet;
}

// Fills the matrix with `link` between every pair; the caller changes pairs.
inline void SetAllLinks(FleetState* fleet, gpu::Link link) {
  size_t n = fleet->gpus.size();
  fleet->topology.assign(n, std::vector<gpu::Link>(n, link));
  for (size_t i = 0; i < n; ++i) fleet->topology[i][i] = gpu::Link::kSelf;
}

inline void SetLink(FleetState* fleet, size_t a, size_t b, gpu::Link link) {
  fleet->topology[a][b] = link;
  fleet->topology[b][a] = link;
}

// The simulated 8-GPU server: GPUs 0-3 joined by NVLink on NUMA node 0,
// GPUs 4-7 in PCIe switch pairs (4-5, 6-7) on NUMA node 1; 4 and 6 are
// joined only by the NUMA node. All one model unless the caller renames.
inline FleetState MakeServer8() {
  FleetState fleet = MakeFleet(8);
  SetAllLinks(&fleet, gpu::Link::kCrossSocket);
  for (size_t i = 0; i < 8; ++i) {
    fleet.gpus[i].numa_node = i < 4 ? 0 : 1;
    for (size_t j = 0; j < 8; ++j) {
      if (i == j || (i < 4) != (j < 4)) continue;
      if (i < 4) {
        SetLink(&fleet, i, j, gpu::Link::kNvLink);
      } else {
        SetLink(&fleet, i, j, i / 2 == j / 2 ? gpu::Link::kPcieSwitch : gpu::Link::kNumaNode);
      }
    }
  }
  DeriveTopologyGroups(&fleet);
  return fleet;
}

// The tests were written in tenths of a GPU (10 = one GPU); Gpus() takes
// those and stores twentieths. Twentieths() takes twentieths as they are.
inline JobSpec Twentieths(int twentieths, DurationMs time_limit = 0) {
  JobSpec spec;
  spec.argv = {"train"};
  spec.gpu_twentieths = twentieths;
  spec.time_limit = time_limit;
  spec.user = "alice";
  if (spec.fractional()) spec.gpu_mem_bytes = 8 * kGiB;
  return spec;
}

inline JobSpec Gpus(int tenths, DurationMs time_limit = 0) { return Twentieths(2 * tenths, time_limit); }

}  // namespace gpuherd::sched::testing
