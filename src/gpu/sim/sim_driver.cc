#include "gpu/sim/sim_driver.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "gpu/sim/card.h"

namespace gpuherd::gpu::sim {
namespace {

constexpr int kDefaultCount = 8;
constexpr int kMaxCount = 65536;
constexpr double kDefaultAmbientC = 30;
// HGX boards join up to 8 SXM GPUs through NVSwitch.
constexpr int kNvLinkDomainSize = 8;
constexpr const char* kDriverVersion = "550.54.15";
constexpr const char* kCudaVersion = "12.4";
// A two-socket host with 32 cores (64 threads) per socket.
constexpr const char* kNodeCpus[] = {"0-31,64-95", "32-63,96-127"};
// Root-port buses per socket, as on an HGX host; more GPUs take more domains.
constexpr int kNodeBuses[2][4] = {{0x18, 0x2A, 0x3A, 0x5D}, {0x9A, 0xAB, 0xBA, 0xDB}};

// Independent streams for each GPU and purpose, from one seed.
enum Stream : uint64_t { kUuidStream = 1, kSerialStream = 2, kNoiseStream = 3 };
SplitMix64 StreamFor(uint64_t seed, int index, Stream stream) {
  SplitMix64 mixer(seed ^ (static_cast<uint64_t>(index) * 0xD1B54A32D192ED03ull) ^
                   (static_cast<uint64_t>(stream) << 56));
  return SplitMix64(mixer.Next());
}

std::string MakeUuid(uint64_t seed, int index) {
  SplitMix64 rng = StreamFor(seed, index, kUuidStream);
  const uint64_t a = rng.Next(), b = rng.Next();
  char buf[48];
  std::snprintf(buf, sizeof(buf), "GPU-%08x-%04x-%04x-%04x-%012llx",
                static_cast<unsigned>(a >> 32), static_cast<unsigned>((a >> 16) & 0xFFFF),
                static_cast<unsigned>(a & 0xFFFF), static_cast<unsigned>(b >> 48),
                static_cast<unsigned long long>(b & 0xFFFFFFFFFFFFull));
  return buf;
}

// Datacenter boards carry a 13-digit serial; GeForce boards report none.
std::string MakeSerial(uint64_t seed, int index, const GpuModel& model) {
  if (!model.ecc) return "";
  SplitMix64 rng = StreamFor(seed, index, kSerialStream);
  char buf[24];
  std::snprintf(buf, sizeof(buf), "1%012llu",
                static_cast<unsigned long long>(rng.Next() % 1000000000000ull));
  return buf;
}

struct Slot {
  const GpuModel* model;
  double thermal_scale;
};

Result<std::vector<Slot>> PlanFleet(const SimOptions& options, const Scenario& scenario) {
  std::vector<Slot> slots;
  if (!scenario.gpus.empty()) {
    for (const GpuGroup& group : scenario.gpus) {
      const GpuModel* model = FindModel(group.model);  // checked by the parser
      for (int i = 0; i < group.count; ++i) slots.push_back({model, group.thermal_scale});
    }
    return slots;
  }
  const int count = options.count == 0 ? kDefaultCount : options.count;
  if (count < 0 || count > kMaxCount) {
    return InvalidArgument("a simulated fleet has 1 to " + std::to_string(kMaxCount) +
                           " GPUs, not " + std::to_string(count));
  }
  std::vector<const GpuModel*> cycle;
  for (const std::string& key : options.models) {
    auto model = LookupModel(key);
    if (!model.ok()) return InvalidArgument(model.status().message());
    cycle.push_back(*model);
  }
  for (int i = 0; i < count; ++i) {
    const GpuModel* model;
    if (!cycle.empty()) {
      model = cycle[i % cycle.size()];
    } else {
      model = FindModel(i < (count + 1) / 2 ? "h100-sxm" : "rtx3090");
    }
    slots.push_back({model, 1.0});
  }
  return slots;
}

// SXM parts of one model, side by side, share an NVLink domain of up to 8;
// other pairs share a PCIe switch two by two within a socket, else the socket,
// else cross the CPU interconnect.
std::vector<std::vector<Link>> Topology(const std::vector<Slot>& slots,
                                        const std::vector<GpuInfo>& gpus) {
  const int n = static_cast<int>(slots.size());
  std::vector<int> domain(n, -1);
  int next_domain = 0, domain_size = 0;
  for (int i = 0; i < n; ++i) {
    if (slots[i].model->nvlinks == 0) continue;
    const bool joins = i > 0 && domain[i - 1] >= 0 && slots[i - 1].model == slots[i].model &&
                       domain_size < kNvLinkDomainSize;
    if (joins) {
      domain[i] = domain[i - 1];
      ++domain_size;
    } else {
      domain[i] = next_domain++;
      domain_size = 1;
    }
  }
  std::vector<std::vector<Link>> links(n, std::vector<Link>(n, Link::kUnknown));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const bool same_node = gpus[i].numa_node == gpus[j].numa_node;
      if (i == j) links[i][j] = Link::kSelf;
      else if (domain[i] >= 0 && domain[i] == domain[j]) links[i][j] = Link::kNvLink;
      else if (same_node && i / 2 == j / 2) links[i][j] = Link::kPcieSwitch;
      else if (same_node) links[i][j] = Link::kNumaNode;
      else links[i][j] = Link::kCrossSocket;
    }
  }
  return links;
}

std::string Describe(const std::vector<Slot>& slots, const Scenario& scenario, bool has_scenario) {
  std::string out = std::to_string(slots.size()) + " simulated GPUs:";
  for (size_t i = 0; i < slots.size();) {
    size_t j = i;
    while (j < slots.size() && slots[j].model == slots[i].model) ++j;
    out += (i == 0 ? " " : ", ") + std::to_string(j - i) + "x " + std::string(slots[i].model->key);
    i = j;
  }
  if (has_scenario) out += " (scenario " + scenario.source + ")";
  return out;
}

}  // namespace

SimDriver::SimDriver(Fleet fleet, std::vector<const GpuModel*> models, std::vector<Card> cards,
                     TimeMs start, std::string description)
    : fleet_(std::move(fleet)),
      models_(std::move(models)),
      cards_(std::move(cards)),
      start_(start),
      started_(false),
      description_(std::move(description)) {}

SimDriver::~SimDriver() = default;

Result<Fleet> SimDriver::Discover() { return fleet_; }

Result<GpuSample> SimDriver::Sample(int index, TimeMs now) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index < 0 || index >= static_cast<int>(cards_.size())) {
    return InvalidArgument("no GPU " + std::to_string(index) + ": the simulated fleet has " +
                           std::to_string(cards_.size()) + " GPUs");
  }
  if (!started_) {
    if (start_ == 0) start_ = now;
    for (Card& card : cards_) card.Start(start_);
    started_ = true;
  }
  return cards_[index].Sample(now);
}

void SimDriver::SetLoad(int index, const Load& load) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index < 0 || index >= static_cast<int>(cards_.size())) return;
  cards_[index].SetLoad(load);
}

int SimDriver::size() const { return static_cast<int>(fleet_.gpus.size()); }

const GpuModel& SimDriver::model(int index) const {
  return *models_.at(index);
}

TimeMs SimDriver::start() const {
  std::lock_guard<std::mutex> lock(mu_);
  return start_;
}

Result<std::unique_ptr<SimDriver>> OpenSimDriver(const SimOptions& options) {
  Scenario scenario;
  const bool has_scenario = !options.scenario_path.empty() || !options.scenario_text.empty();
  if (!options.scenario_path.empty()) {
    auto loaded = LoadScenario(options.scenario_path);
    if (!loaded.ok()) return loaded.status();
    scenario = std::move(loaded).value();
  } else if (!options.scenario_text.empty()) {
    auto parsed = ParseScenario(options.scenario_text, "scenario");
    if (!parsed.ok()) return parsed.status();
    scenario = std::move(parsed).value();
  }
  auto planned = PlanFleet(options, scenario);
  if (!planned.ok()) return planned.status();
  const std::vector<Slot>& slots = *planned;
  std::vector<const GpuModel*> models;
  for (const Slot& slot : slots) models.push_back(slot.model);
  GPUHERD_RETURN_IF_ERROR(CheckFaultsFitFleet(scenario, models));

  const uint64_t seed = scenario.seed.value_or(options.seed);
  const int n = static_cast<int>(slots.size());
  const int node0_size = (n + 1) / 2;
  Fleet fleet;
  fleet.simulated = true;
  fleet.driver_name = "sim";
  for (int i = 0; i < n; ++i) {
    const GpuModel& model = *slots[i].model;
    const int node = i < node0_size ? 0 : 1;
    const int position = node == 0 ? i : i - node0_size;
    char bus_id[32];
    std::snprintf(bus_id, sizeof(bus_id), "%08X:%02X:00.0", position / 4,
                  kNodeBuses[node][position % 4]);
    GpuInfo info;
    info.index = i;
    info.uuid = MakeUuid(seed, i);
    info.name = std::string(model.name);
    info.serial = MakeSerial(seed, i, model);
    info.pci_bus_id = bus_id;
    info.memory_total_bytes = model.memory_bytes;
    info.driver_version = kDriverVersion;
    info.cuda_version = kCudaVersion;
    info.cc_major = model.cc_major;
    info.cc_minor = model.cc_minor;
    info.max_pcie_gen = model.max_pcie_gen;
    info.max_pcie_width = model.max_pcie_width;
    info.numa_node = node;
    info.cpu_affinity = kNodeCpus[node];
    info.power_limit_default_w = model.power_limit_w;
    info.temp_slowdown_c = model.temp_slowdown_c;
    info.temp_shutdown_c = model.temp_shutdown_c;
    if (model.ecc) info.ecc_enabled = true;  // GeForce: not supported
    info.simulated = true;
    fleet.gpus.push_back(std::move(info));
  }
  fleet.topology = Topology(slots, fleet.gpus);
  // Pairs of one NVLink domain reach each other over all their links (an NVSwitch).
  fleet.nvlinks.assign(n, std::vector<int>(n, 0));
  fleet.pcie_multiple.assign(n, std::vector<bool>(n, false));
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (fleet.topology[i][j] == Link::kNvLink) {
        fleet.nvlinks[i][j] = std::min(slots[i].model->nvlinks, slots[j].model->nvlinks);
      }
    }
  }

  std::vector<Card> cards;
  cards.reserve(n);
  for (int i = 0; i < n; ++i) {
    CardSetup setup;
    setup.model = slots[i].model;
    setup.label = "GPU " + std::to_string(i) + " (" + fleet.gpus[i].uuid + ")";
    setup.ambient_c = scenario.ambient_c.value_or(kDefaultAmbientC);
    setup.thermal_scale = slots[i].thermal_scale;
    setup.noise_seed = StreamFor(seed, i, kNoiseStream).Next();
    for (const Fault& fault : scenario.faults) {
      if (fault.gpu == i) setup.faults.push_back(fault);
    }
    cards.emplace_back(std::move(setup));
  }
  std::string description = Describe(slots, scenario, has_scenario);
  return std::unique_ptr<SimDriver>(
      new SimDriver(std::move(fleet), std::move(models), std::move(cards), options.start,
                    std::move(description)));
}

}  // namespace gpuherd::gpu::sim
