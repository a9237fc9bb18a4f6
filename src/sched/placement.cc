#include "sched/placement.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace gpuherd::sched {
namespace {

constexpr int kTempBandC = 5;
// How many equally good idle GPUs a one-GPU job looks at for best fit.
constexpr int kBestFitWindow = 64;
// How many NVLink islands a multi-GPU job compares at most.
constexpr size_t kIslandWindow = 64;

std::string Lower(const std::string& s) {
  std::string out = s;
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool Contains(std::span<const size_t> sorted, size_t position) {
  return std::binary_search(sorted.begin(), sorted.end(), position);
}

int GroupAt(const GpuState& g, int level) {
  switch (level) {
    case 0: return g.nvlink_island;
    case 1: return g.pcie_switch;
    case 2: return g.host_bridge;
    default: return g.numa_node ? *g.numa_node : -1;
  }
}

struct SetScore {
  int worst = 0;
  int sum = 0;
  size_t group_size = 0;
  size_t rank_sum = 0;
  auto tie() const { return std::tie(worst, sum, group_size, rank_sum); }
};

// `ranks` are positions in the candidate list (lower = preferred).
SetScore Score(const FleetState& fleet, std::span<const size_t> set,
               std::span<const size_t> ranks, size_t group_size) {
  SetScore s;
  s.group_size = group_size;
  for (size_t i = 0; i < set.size(); ++i) {
    s.rank_sum += ranks[i];
    for (size_t j = i + 1; j < set.size(); ++j) {
      int link = static_cast<int>(fleet.LinkBetween(set[i], set[j]));
      s.worst = std::max(s.worst, link);
      s.sum += link;
    }
  }
  return s;
}

}  // namespace

std::optional<double> TemperatureLimit(const GpuState& gpu, const PlacementOptions& options) {
  std::optional<double> limit = gpu.slowdown_temp_c;
  if (options.max_temp_c && (!limit || *options.max_temp_c < *limit)) limit = options.max_temp_c;
  return limit;
}

GpuBlock CheckGpu(const GpuState& gpu, const PlacementOptions& options) {
  if (gpu.lost) return GpuBlock::kLost;
  if (gpu.drained) return GpuBlock::kDrained;
  if (!gpu.healthy) return GpuBlock::kUnhealthy;
  std::optional<double> limit = TemperatureLimit(gpu, options);
  if (limit && gpu.temp_c && *gpu.temp_c >= *limit) return GpuBlock::kTooHot;
  if (gpu.thermal_throttling) return GpuBlock::kThrottling;
  return GpuBlock::kNone;
}

bool MatchesJob(const GpuState& gpu, const JobSpec& spec) {
  if (!spec.model.empty() && Lower(gpu.name).find(Lower(spec.model)) == std::string::npos) {
    return false;
  }
  if (spec.min_cc && gpu.cc < *spec.min_cc) return false;
  return gpu.memory_total_bytes >= spec.gpu_mem_bytes;
}

std::string DescribeCounts(const MatchCounts& c) {
  std::string out = fmt::format("{} free", c.free);
  auto add = [&out](int n, const std::string& what) {
    if (n > 0) out += fmt::format(", {} {}", n, what);
  };
  add(c.busy, "busy");
  add(c.shared, "shared by fractions");
  add(c.lost, "lost");
  add(c.drained, "drained");
  add(c.unhealthy, "unhealthy");
  if (c.too_hot > 0) {
    out += fmt::format(", {} too hot ({:.0f} °C ≥ {:.0f} °C)", c.too_hot, c.hottest_c,
                       c.hottest_limit_c);
  }
  add(c.throttling, "throttling for heat");
  return out;
}

std::vector<size_t> ChooseConnectedSet(const FleetState& fleet,
                                       std::span<const size_t> candidates, int k) {
  if (k <= 0 || candidates.size() < static_cast<size_t>(k)) return {};
  if (k == 1) return {candidates[0]};
  // Best level first: a group at a level has all its pairs at that level or
  // better, so the first level where some group holds k GPUs wins.
  for (int level = 0; level < 4; ++level) {
    std::map<int, std::vector<size_t>> groups;  // group id → ranks, in preference order
    for (size_t rank = 0; rank < candidates.size(); ++rank) {
      int group = GroupAt(fleet.gpus[candidates[rank]], level);
      if (group >= 0) groups[group].push_back(rank);
    }
    std::optional<SetScore> best;
    std::vector<size_t> best_set;
    for (const auto& [group, ranks] : groups) {
      if (ranks.size() < static_cast<size_t>(k)) continue;
      std::vector<size_t> set, set_ranks(ranks.begin(), ranks.begin() + k);
      for (size_t r : set_ranks) set.push_back(candidates[r]);
      SetScore score = Score(fleet, set, set_ranks, ranks.size());
      if (!best || score.tie() < best->tie()) {
        best = score;
        best_set = std::move(set);
      }
    }
    if (best) return best_set;
  }
  // Across sockets: fill from the NUMA nodes with the most candidates first,
  // so that as few pairs as possible cross.
  std::map<int, std::vector<size_t>> nodes;
  for (size_t rank = 0; rank < candidates.size(); ++rank) {
    nodes[GroupAt(fleet.gpus[candidates[rank]], 3)].push_back(rank);
  }
  std::vector<const std::vector<size_t>*> order;
  for (const auto& [node, ranks] : nodes) order.push_back(&ranks);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->size() > b->size(); });
  std::vector<size_t> set;
  for (const auto* ranks : order) {
    for (size_t r : *ranks) {
      if (set.size() == static_cast<size_t>(k)) return set;
      set.push_back(candidates[r]);
    }
  }
  return set;
}

PlacementIndex::PlacementIndex(const FleetState& fleet, const PlacementOptions& options)
    : fleet_(fleet) {
  const size_t n = fleet.gpus.size();
  block_.resize(n);
  kind_of_.resize(n);
  twentieths_.assign(n, 0);
  mem_free_.assign(n, 0);
  std::map<std::tuple<std::string, int, uint64_t>, int> kind_ids;
  std::map<std::string, int> model_ids;
  for (size_t i = 0; i < n; ++i) {
    const GpuState& g = fleet.gpus[i];
    auto [it, added] = kind_ids.try_emplace({g.name, g.cc, g.memory_total_bytes},
                                            static_cast<int>(kinds_.size()));
    if (added) {
      int model = model_ids.try_emplace(g.name, static_cast<int>(model_ids.size())).first->second;
      kinds_.push_back({g.name, Lower(g.name), model, g.cc, g.memory_total_bytes, {}});
      models_ = static_cast<int>(model_ids.size());
    }
    kind_of_[i] = it->second;
    Kind& kind = kinds_[it->second];
    ++kind.counts.matching;
    block_[i] = CheckGpu(g, options);
    switch (block_[i]) {
      case GpuBlock::kNone: break;
      case GpuBlock::kLost: ++kind.counts.lost; break;
      case GpuBlock::kDrained: ++kind.counts.drained; break;
      case GpuBlock::kUnhealthy: ++kind.counts.unhealthy; break;
      case GpuBlock::kThrottling: ++kind.counts.throttling; break;
      case GpuBlock::kTooHot:
        ++kind.counts.too_hot;
        if (*g.temp_c > kind.counts.hottest_c) {
          kind.counts.hottest_c = *g.temp_c;
          kind.counts.hottest_limit_c = *TemperatureLimit(g, options);
        }
        break;
    }
    if (g.nvlink_island >= 0) island_members_[g.nvlink_island].push_back(i);
    uint64_t held = std::max(g.memory_used_bytes, g.fraction_mem_reserved_bytes);
    mem_free_[i] = g.memory_total_bytes > held ? g.memory_total_bytes - held : 0;
    if (block_[i] != GpuBlock::kNone) continue;
    // Start from "busy" so SetTwentieths files the GPU where it belongs.
    twentieths_[i] = kTwentiethsPerGpu;
    ++kind.counts.busy;
    SetTwentieths(i, std::clamp(g.twentieths_in_use, 0, kTwentiethsPerGpu));
  }
}

PlacementIndex::Key PlacementIndex::KeyOf(size_t position) const {
  const GpuState& g = fleet_.gpus[position];
  int band = g.temp_c ? static_cast<int>(std::floor(*g.temp_c / kTempBandC)) : 0;
  return {-g.health_score.value_or(100), band, position};
}

int PlacementIndex::PackScore(size_t position) const {
  const GpuState& g = fleet_.gpus[position];
  auto count = [](const std::unordered_map<int, int>& m, int group) {
    auto it = m.find(group);
    return group < 0 || it == m.end() ? 0 : it->second;
  };
  return count(island_free_, g.nvlink_island) * 1024 + count(switch_free_, g.pcie_switch);
}

void PlacementIndex::SetTwentieths(size_t position, int twentieths) {
  const int old = twentieths_[position];
  if (old == twentieths) return;
  const GpuState& g = fleet_.gpus[position];
  MatchCounts& counts = kinds_[kind_of_[position]].counts;
  auto bucket = [&counts](int t) -> int& {
    return t == 0 ? counts.free : (t >= kTwentiethsPerGpu ? counts.busy : counts.shared);
  };
  --bucket(old);
  ++bucket(twentieths);
  const Key key = KeyOf(position);
  if (old == 0) {
    free_.erase(std::lower_bound(free_.begin(), free_.end(), key));
    if (g.nvlink_island >= 0) --island_free_[g.nvlink_island];
    if (g.pcie_switch >= 0) --switch_free_[g.pcie_switch];
  }
  if (twentieths == 0) {
    free_.insert(std::lower_bound(free_.begin(), free_.end(), key), key);
    if (g.nvlink_island >= 0) ++island_free_[g.nvlink_island];
    if (g.pcie_switch >= 0) ++switch_free_[g.pcie_switch];
  }
  bool was_shared = old > 0 && old < kTwentiethsPerGpu;
  bool is_shared = twentieths > 0 && twentieths < kTwentiethsPerGpu;
  if (was_shared && !is_shared) std::erase(shared_, position);
  if (!was_shared && is_shared) shared_.push_back(position);
  twentieths_[position] = twentieths;
}

std::vector<bool> PlacementIndex::MatchingKinds(const JobSpec& spec) const {
  std::vector<bool> match(kinds_.size());
  const std::string model = Lower(spec.model);
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const Kind& kind = kinds_[k];
    match[k] = (model.empty() || kind.name_lower.find(model) != std::string::npos) &&
               (!spec.min_cc || kind.cc >= *spec.min_cc) &&
               kind.memory_total >= spec.gpu_mem_bytes;
  }
  return match;
}

MatchCounts PlacementIndex::Count(const JobSpec& spec) const {
  std::vector<bool> match = MatchingKinds(spec);
  MatchCounts total;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    if (!match[k]) continue;
    const MatchCounts& c = kinds_[k].counts;
    total.matching += c.matching;
    total.free += c.free;
    total.shared += c.shared;
    total.busy += c.busy;
    total.lost += c.lost;
    total.drained += c.drained;
    total.unhealthy += c.unhealthy;
    total.throttling += c.throttling;
    total.too_hot += c.too_hot;
    if (c.too_hot > 0 && c.hottest_c > total.hottest_c) {
      total.hottest_c = c.hottest_c;
      total.hottest_limit_c = c.hottest_limit_c;
    }
  }
  return total;
}

int PlacementIndex::FreeMatching(const JobSpec& spec, std::span<const size_t> avoid) const {
  std::vector<bool> match = MatchingKinds(spec);
  auto free_of = [&](int model) {  // model < 0: every model
    int free = 0;
    for (size_t k = 0; k < kinds_.size(); ++k) {
      if (match[k] && (model < 0 || kinds_[k].model == model)) free += kinds_[k].counts.free;
    }
    for (size_t p : avoid) {
      free -= twentieths_[p] == 0 && block_[p] == GpuBlock::kNone && match[kind_of_[p]] &&
              (model < 0 || kinds_[kind_of_[p]].model == model);
    }
    return free;
  };
  if (!spec.one_model() || models_ <= 1) return free_of(-1);
  int most = 0;
  for (int model = 0; model < models_; ++model) most = std::max(most, free_of(model));
  return most;
}

PlacementIndex::ModelCounts PlacementIndex::LargestModel(const JobSpec& spec) const {
  std::vector<bool> match = MatchingKinds(spec);
  std::vector<int> all(models_), usable(models_);
  ModelCounts out;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    if (!match[k]) continue;
    const Kind& kind = kinds_[k];
    const MatchCounts& c = kind.counts;
    if ((all[kind.model] += c.matching) > out.most) {
      out.most = all[kind.model];
      out.name = kind.name;
    }
    if ((usable[kind.model] += c.free + c.busy + c.shared) > out.most_usable) {
      out.most_usable = usable[kind.model];
      out.usable_name = kind.name;
    }
  }
  return out;
}

bool PlacementIndex::AnyRoomFor(int twentieths) const {
  if (!free_.empty()) return true;
  for (size_t p : shared_) {
    if (twentieths_[p] + twentieths <= kTwentiethsPerGpu) return true;
  }
  return false;
}

std::optional<size_t> PlacementIndex::FindSingle(const std::vector<bool>& kinds,
                                                 std::span<const size_t> avoid) const {
  std::optional<size_t> best;
  int best_pack = 0;
  int seen = 0;
  for (const Key& key : free_) {
    size_t p = std::get<2>(key);
    if (!kinds[kind_of_[p]] || Contains(avoid, p)) continue;
    if (!best) {
      best = p;
      best_pack = PackScore(p);
    } else {
      const Key& first = KeyOf(*best);
      // Only equally healthy and cool GPUs compete on packing.
      if (std::get<0>(key) != std::get<0>(first) || std::get<1>(key) != std::get<1>(first)) break;
      int pack = PackScore(p);
      if (pack < best_pack) {
        best = p;
        best_pack = pack;
      }
    }
    if (++seen >= kBestFitWindow) break;
  }
  return best;
}

std::optional<size_t> PlacementIndex::FindShared(const JobSpec& spec,
                                                 const std::vector<bool>& kinds,
                                                 std::span<const size_t> avoid) const {
  std::optional<size_t> best;
  for (size_t p : shared_) {
    if (!kinds[kind_of_[p]] || Contains(avoid, p)) continue;
    if (twentieths_[p] + spec.gpu_twentieths > kTwentiethsPerGpu || mem_free_[p] < spec.gpu_mem_bytes) {
      continue;
    }
    // Best fit: the fullest GPU, then the least memory left, then preference.
    if (!best || std::make_tuple(-twentieths_[p], mem_free_[p], KeyOf(p)) <
                     std::make_tuple(-twentieths_[*best], mem_free_[*best], KeyOf(*best))) {
      best = p;
    }
  }
  return best;
}

std::optional<std::vector<size_t>> PlacementIndex::Find(const JobSpec& spec,
                                                        std::span<const size_t> avoid) const {
  if (spec.gpu_twentieths <= 0) return std::vector<size_t>{};
  std::vector<bool> kinds = MatchingKinds(spec);
  if (spec.fractional()) {
    if (std::optional<size_t> p = FindShared(spec, kinds, avoid)) return std::vector<size_t>{*p};
    // A free GPU whose memory is not taken by processes outside gpuherd.
    for (const Key& key : free_) {
      size_t p = std::get<2>(key);
      if (kinds[kind_of_[p]] && !Contains(avoid, p) && mem_free_[p] >= spec.gpu_mem_bytes) {
        return std::vector<size_t>{p};
      }
    }
    return std::nullopt;
  }
  const int k = spec.whole_gpus();
  if (k == 1) {
    if (std::optional<size_t> p = FindSingle(kinds, avoid)) return std::vector<size_t>{*p};
    return std::nullopt;
  }
  return FindGang(kinds, k, spec.one_model() && models_ > 1, avoid);
}

std::optional<std::vector<size_t>> PlacementIndex::FindGang(const std::vector<bool>& kinds, int k,
                                                            bool one_model,
                                                            std::span<const size_t> avoid) const {
  auto candidate = [&](size_t p) {
    return twentieths_[p] == 0 && block_[p] == GpuBlock::kNone && kinds[kind_of_[p]] &&
           !Contains(avoid, p);
  };
  auto model = [&](size_t p) { return kinds_[kind_of_[p]].model; };
  // Fast path: a set inside one NVLink island is the best there is. On a
  // large fleet only the islands with the fewest idle GPUs (best fit) are
  // compared, so the cost does not grow with the fleet.
  std::vector<std::pair<int, int>> islands;  // (idle GPUs, island)
  for (const auto& [island, free] : island_free_) {
    if (free >= k) islands.push_back({free, island});
  }
  if (islands.size() > kIslandWindow) {
    std::nth_element(islands.begin(), islands.begin() + kIslandWindow, islands.end());
    islands.resize(kIslandWindow);
  }
  std::vector<Key> near;
  for (const auto& [free, island] : islands) {
    for (size_t p : island_members_.at(island)) {
      if (candidate(p)) near.push_back(KeyOf(p));
    }
  }
  if (near.size() >= static_cast<size_t>(k)) {
    std::sort(near.begin(), near.end());
    std::vector<size_t> positions;
    for (const Key& key : near) positions.push_back(std::get<2>(key));
    std::vector<size_t> set = ChooseConnectedSet(fleet_, positions, k);
    int island = fleet_.gpus[set[0]].nvlink_island;
    if (std::all_of(set.begin(), set.end(), [&](size_t p) {
          return fleet_.gpus[p].nvlink_island == island && (!one_model || model(p) == model(set[0]));
        })) {
      return set;
    }
  }
  // Candidates in preference order; for one model, one list per model, and
  // the best-connected set of any of them, then the most preferred.
  std::vector<std::vector<size_t>> lists(one_model ? models_ : 1);
  for (const Key& key : free_) {
    size_t p = std::get<2>(key);
    if (candidate(p)) lists[one_model ? model(p) : 0].push_back(p);
  }
  std::optional<std::vector<size_t>> best;
  std::tuple<int, int, Key> best_score;
  for (const std::vector<size_t>& list : lists) {
    std::vector<size_t> set = ChooseConnectedSet(fleet_, list, k);
    if (set.empty()) continue;
    if (lists.size() == 1) return set;
    std::vector<size_t> ranks(set.size());
    SetScore links = Score(fleet_, set, ranks, 0);
    std::tuple<int, int, Key> score{links.worst, links.sum, KeyOf(list[0])};
    if (!best || score < best_score) {
      best = std::move(set);
      best_score = score;
    }
  }
  return best;
}

void PlacementIndex::Take(const JobSpec& spec, const std::vector<size_t>& positions) {
  for (size_t p : positions) {
    if (spec.fractional()) {
      SetTwentieths(p, std::min(twentieths_[p] + spec.gpu_twentieths, kTwentiethsPerGpu));
      mem_free_[p] -= std::min(mem_free_[p], spec.gpu_mem_bytes);
    } else {
      SetTwentieths(p, kTwentiethsPerGpu);
    }
  }
}

void PlacementIndex::Give(const JobSpec& spec, const std::vector<size_t>& positions) {
  for (size_t p : positions) {
    if (spec.fractional()) {
      SetTwentieths(p, std::max(twentieths_[p] - spec.gpu_twentieths, 0));
      mem_free_[p] += spec.gpu_mem_bytes;
    } else {
      SetTwentieths(p, 0);
    }
  }
}

void PlacementIndex::Claim(size_t position) {
  if (block_[position] == GpuBlock::kNone) SetTwentieths(position, kTwentiethsPerGpu);
}

std::optional<std::vector<int>> Place(const FleetState& fleet, const JobSpec& spec,
                                      const PlacementOptions& options) {
  PlacementIndex index(fleet, options);
  std::optional<std::vector<size_t>> positions = index.Find(spec);
  if (!positions) return std::nullopt;
  std::vector<int> indices;
  for (size_t p : *positions) indices.push_back(fleet.gpus[p].index);
  return indices;
}

}  // namespace gpuherd::sched
