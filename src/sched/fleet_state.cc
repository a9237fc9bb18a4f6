#include "sched/fleet_state.h"

#include <numeric>

namespace gpuherd::sched {
namespace {

// Union-find over GPU positions.
class Components {
 public:
  explicit Components(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  size_t Find(size_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Join(size_t a, size_t b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<size_t> parent_;
};

}  // namespace

gpu::Link FleetState::LinkBetween(size_t a, size_t b) const {
  if (a == b) return gpu::Link::kSelf;
  if (topology.size() == gpus.size() && a < topology.size() && b < topology[a].size()) {
    return topology[a][b];
  }
  const GpuState& x = gpus[a];
  const GpuState& y = gpus[b];
  if (x.nvlink_island >= 0 && x.nvlink_island == y.nvlink_island) return gpu::Link::kNvLink;
  if (x.pcie_switch >= 0 && x.pcie_switch == y.pcie_switch) return gpu::Link::kPcieSwitch;
  if (x.host_bridge >= 0 && x.host_bridge == y.host_bridge) return gpu::Link::kHostBridge;
  if (x.numa_node && y.numa_node) {
    return *x.numa_node == *y.numa_node ? gpu::Link::kNumaNode : gpu::Link::kCrossSocket;
  }
  return gpu::Link::kUnknown;
}

void DeriveTopologyGroups(FleetState* fleet) {
  const size_t n = fleet->gpus.size();
  if (fleet->topology.size() != n) return;
  // Groups nest: a level's components join every pair at that level or better.
  const gpu::Link levels[] = {gpu::Link::kNvLink, gpu::Link::kPcieSwitch, gpu::Link::kHostBridge};
  int GpuState::*fields[] = {&GpuState::nvlink_island, &GpuState::pcie_switch,
                             &GpuState::host_bridge};
  for (int level = 0; level < 3; ++level) {
    Components components(n);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n && j < fleet->topology[i].size(); ++j) {
        gpu::Link link = fleet->topology[i][j];
        if (link != gpu::Link::kSelf && link <= levels[level]) components.Join(i, j);
      }
    }
    for (size_t i = 0; i < n; ++i) {
      fleet->gpus[i].*fields[level] = static_cast<int>(components.Find(i));
    }
  }
}

FleetState FleetStateFromFleet(const gpu::Fleet& fleet) {
  FleetState state;
  state.gpus.reserve(fleet.gpus.size());
  for (const gpu::GpuInfo& info : fleet.gpus) {
    GpuState g;
    g.index = info.index;
    g.uuid = info.uuid;
    g.name = info.name;
    g.cc = info.cc_major * 10 + info.cc_minor;
    g.memory_total_bytes = info.memory_total_bytes;
    g.slowdown_temp_c = info.temp_slowdown_c;
    g.numa_node = info.numa_node;
    state.gpus.push_back(std::move(g));
  }
  state.topology = fleet.topology;
  DeriveTopologyGroups(&state);
  return state;
}

std::optional<TimeMs> RunningJob::ExpectedEnd() const {
  if (stopping) return stop_deadline;
  if (spec.time_limit > 0) return started + spec.time_limit;
  return std::nullopt;
}

void AccountRunningJobs(const std::vector<RunningJob>& running, FleetState* fleet) {
  std::vector<int> position_of;
  for (size_t i = 0; i < fleet->gpus.size(); ++i) {
    GpuState& g = fleet->gpus[i];
    g.twentieths_in_use = 0;
    g.fraction_mem_reserved_bytes = 0;
    if (g.index >= 0) {
      if (static_cast<size_t>(g.index) >= position_of.size()) position_of.resize(g.index + 1, -1);
      position_of[g.index] = static_cast<int>(i);
    }
  }
  for (const RunningJob& job : running) {
    for (int index : job.gpus) {
      if (index < 0 || static_cast<size_t>(index) >= position_of.size()) continue;
      if (position_of[index] < 0) continue;
      GpuState& g = fleet->gpus[position_of[index]];
      if (job.spec.fractional()) {
        g.twentieths_in_use += job.spec.gpu_twentieths;
        g.fraction_mem_reserved_bytes += job.spec.gpu_mem_bytes;
      } else {
        g.twentieths_in_use = kTwentiethsPerGpu;
      }
    }
  }
}

}  // namespace gpuherd::sched
