// Where a job goes. Rules:
//  - never on a GPU that is lost, drained, unhealthy, throttling for heat, or
//    at/above its slowdown temperature or the configured limit;
//  - only GPUs whose name contains the job's model, whose compute capability
//    is at least min_cc and whose memory holds gpu_mem;
//  - one GPU: the healthiest, then coolest (5 °C bands), then the one whose
//    NVLink island / PCIe switch has the fewest free GPUs, so whole islands
//    stay free for multi-GPU jobs;
//  - several GPUs: all of one model (GPU name) unless the job sets
//    mixed_models; the best-connected set (NVLink > PCIe switch > host bridge
//    > NUMA node > across sockets), scored by its worst pair, then the sum of
//    its pairs. Candidates are grouped by island, then switch, bridge and NUMA
//    node; no combinations are enumerated, so 10,000 GPUs stay fast;
//  - a fraction packs onto the fullest shared GPU that still has the twentieths
//    and the memory (best fit), and takes a free GPU only when none has; a
//    whole-GPU job never shares a GPU with fractions.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sched/fleet_state.h"
#include "sched/job.h"

namespace gpuherd::sched {

struct PlacementOptions {
  // Refuse GPUs at or above this temperature even below their own slowdown
  // threshold (the config's temperature limit).
  std::optional<double> max_temp_c;
};

// Why a GPU takes no new work, whatever the job.
enum class GpuBlock { kNone, kLost, kDrained, kUnhealthy, kTooHot, kThrottling };
GpuBlock CheckGpu(const GpuState& gpu, const PlacementOptions& options);
// The temperature limit that applies to `gpu`: the lower of its slowdown
// threshold and the configured limit.
std::optional<double> TemperatureLimit(const GpuState& gpu, const PlacementOptions& options);

// Model, compute capability and memory size (not what is free now).
bool MatchesJob(const GpuState& gpu, const JobSpec& spec);

// How many GPUs that match a job are in which condition, for pending reasons.
struct MatchCounts {
  int matching = 0;     // match model/cc/memory
  int free = 0;         // usable and idle (whole)
  int shared = 0;       // usable, holding fractions
  int busy = 0;         // usable, held by whole-GPU jobs
  int lost = 0, drained = 0, unhealthy = 0, too_hot = 0, throttling = 0;
  double hottest_c = 0;       // among the too hot ones
  double hottest_limit_c = 0; // the limit it is at or above
};
// "2 free, 1 drained, 1 too hot (91 °C ≥ 87 °C)"; busy and shared included.
std::string DescribeCounts(const MatchCounts& counts);

// Picks `k` GPUs from `candidates` (positions in fleet.gpus, most preferred
// first) with the best interconnect; empty when there are fewer than k.
std::vector<size_t> ChooseConnectedSet(const FleetState& fleet,
                                       std::span<const size_t> candidates, int k);

// The usable GPUs of a fleet and what is free on them, updated as jobs are
// placed during one scheduling pass. Copies what it needs from the fleet,
// which must outlive it. Not thread-safe.
class PlacementIndex {
 public:
  PlacementIndex(const FleetState& fleet, const PlacementOptions& options);

  // GPU positions for the job, or std::nullopt when it does not fit now.
  // `avoid` (sorted positions) are kept out, e.g. a reservation's GPUs.
  std::optional<std::vector<size_t>> Find(const JobSpec& spec,
                                          std::span<const size_t> avoid = {}) const;
  // Marks the job's share of `positions` as used.
  void Take(const JobSpec& spec, const std::vector<size_t>& positions);
  // Undoes Take (a plan that was not kept).
  void Give(const JobSpec& spec, const std::vector<size_t>& positions);
  // Keeps every other job off `position` for the rest of the pass (claimed by
  // maintenance work).
  void Claim(size_t position);

  MatchCounts Count(const JobSpec& spec) const;
  // Idle GPUs that match, less those in `avoid`; for a job that keeps to one
  // model, the most of any one model. O(kinds + avoid).
  int FreeMatching(const JobSpec& spec, std::span<const size_t> avoid = {}) const;
  // Of the GPUs that match the job, the most of any one model (GPU name),
  // counting all of them and only usable ones; O(kinds).
  struct ModelCounts {
    int most = 0;              // matching GPUs of the largest model
    std::string name;          // that model
    int most_usable = 0;       // usable GPUs of the model with the most
    std::string usable_name;
  };
  ModelCounts LargestModel(const JobSpec& spec) const;
  // How many models (GPU names) the fleet has.
  int model_count() const { return models_; }
  // Whether any usable GPU has room for a fraction of `twentieths`.
  bool AnyRoomFor(int twentieths) const;
  int free_count() const { return static_cast<int>(free_.size()); }
  bool usable(size_t position) const { return block_[position] == GpuBlock::kNone; }
  int twentieths_in_use(size_t position) const { return twentieths_[position]; }

 private:
  // (−health, temperature band, position): most preferred first.
  using Key = std::tuple<int, int, size_t>;
  struct Kind {
    std::string name;
    std::string name_lower;
    int model = 0;  // kinds with the same name share it
    int cc = 0;
    uint64_t memory_total = 0;
    MatchCounts counts;  // matching = GPUs of this kind
  };
  Key KeyOf(size_t position) const;
  std::vector<bool> MatchingKinds(const JobSpec& spec) const;
  std::optional<size_t> FindSingle(const std::vector<bool>& kinds,
                                   std::span<const size_t> avoid) const;
  // `k` idle GPUs of `kinds`, all of one model if `one_model`.
  std::optional<std::vector<size_t>> FindGang(const std::vector<bool>& kinds, int k,
                                              bool one_model, std::span<const size_t> avoid) const;
  std::optional<size_t> FindShared(const JobSpec& spec, const std::vector<bool>& kinds,
                                   std::span<const size_t> avoid) const;
  int PackScore(size_t position) const;
  void SetTwentieths(size_t position, int twentieths);

  const FleetState& fleet_;
  std::vector<GpuBlock> block_;
  std::vector<int> kind_of_;
  std::vector<Kind> kinds_;
  int models_ = 0;
  std::vector<int> twentieths_;
  std::vector<uint64_t> mem_free_;  // for fractions: total − max(used, reserved)
  std::vector<Key> free_;           // sorted; idle usable GPUs
  std::vector<size_t> shared_;      // usable GPUs holding fractions with room left
  std::unordered_map<int, int> island_free_, switch_free_;  // idle GPUs per group
  std::unordered_map<int, std::vector<size_t>> island_members_;
};

// One-shot placement on a fleet: GPU indices (GpuState::index), or
// std::nullopt when the job does not fit now.
std::optional<std::vector<int>> Place(const FleetState& fleet, const JobSpec& spec,
                                      const PlacementOptions& options);

}  // namespace gpuherd::sched
