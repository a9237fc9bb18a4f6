// The fleet as the scheduler sees it: one GpuState per GPU (static facts, the
// latest reading, operator and health verdicts, and what running jobs hold)
// plus how the GPUs are connected. Built by the daemon from its own state; the
// scheduler only reads it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"
#include "sched/job.h"

namespace gpuherd::sched {

struct GpuState {
  int index = 0;                 // the GPU's index as the driver enumerates it
  std::string uuid;
  std::string name;              // "NVIDIA H200"
  int cc = 0;                    // compute capability ×10 (8.6 → 86)
  uint64_t memory_total_bytes = 0;
  uint64_t memory_used_bytes = 0;  // latest reading, every process included
  std::optional<double> temp_c;
  std::optional<double> slowdown_temp_c;  // the card's own threshold, where known
  bool thermal_throttling = false;        // a thermal throttle reason is active
  bool lost = false;                      // fell off the bus or stopped answering
  bool drained = false;                   // an operator or an alert took it out of service
  bool healthy = true;                    // the health verdict (burn-in, alerts)
  std::optional<int> health_score;        // 0..100 where known; higher is preferred
  // Self-healing watches it (the same XID under several jobs): still in
  // service, but new long jobs go elsewhere while other GPUs are free
  // (scheduler rule 12).
  bool suspect = false;
  std::optional<int> numa_node;
  // Topology groups (-1 = none): GPUs with the same id are joined by NVLink,
  // sit behind the same PCIe switch, or share a host bridge. Filled from the
  // matrix by DeriveTopologyGroups, or set directly for a fleet without one.
  int nvlink_island = -1;
  int pcie_switch = -1;
  int host_bridge = -1;
  // What running jobs hold: 10 for a whole-GPU job, the sum of the fractions
  // otherwise, and the GPU memory promised to fractional jobs.
  int twentieths_in_use = 0;
  uint64_t fraction_mem_reserved_bytes = 0;
};

struct FleetState {
  std::vector<GpuState> gpus;
  // topology[i][j] for gpus[i] and gpus[j] (positions, not GpuState::index).
  // May be empty; the groups above then stand in for it.
  std::vector<std::vector<gpu::Link>> topology;
  // The machine's CPUs and memory, against which running jobs' spec.cpus and
  // spec.mem_bytes are counted; 0 = unknown, no check.
  int host_cpus = 0;
  uint64_t host_mem_bytes = 0;

  // How gpus[a] reaches gpus[b]: from the matrix where there is one, else
  // from the groups and NUMA nodes.
  gpu::Link LinkBetween(size_t a, size_t b) const;
};

// The static part of a FleetState from discovery: names, memory, compute
// capability, slowdown temperature, NUMA node, the matrix and its groups.
// Readings, verdicts and occupancy are left at their defaults for the caller.
FleetState FleetStateFromFleet(const gpu::Fleet& fleet);

// Sets nvlink_island, pcie_switch and host_bridge from the matrix: connected
// components of the pairs joined at that level or better.
void DeriveTopologyGroups(FleetState* fleet);

// A job that holds GPUs now (running, or stopping after a signal).
struct RunningJob {
  JobId id = 0;
  JobSpec spec;
  TimeMs started = 0;
  std::vector<int> gpus;          // GpuState::index values
  bool stopping = false;          // signalled; its GPUs free up by stop_deadline
  TimeMs stop_deadline = 0;
  // Set by the daemon on every victim it signalled for preemptor P: P's id;
  // 0 = not being stopped for a preemptor.
  JobId stopping_for = 0;

  // When its GPUs are expected back: the time limit, or the stop deadline;
  // std::nullopt when it has no time limit.
  std::optional<TimeMs> ExpectedEnd() const;
};

// Resets twentieths_in_use and fraction_mem_reserved_bytes from the running jobs.
// Jobs naming a GPU the fleet does not have are ignored.
void AccountRunningJobs(const std::vector<RunningJob>& running, FleetState* fleet);

}  // namespace gpuherd::sched
