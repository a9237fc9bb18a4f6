#include "gpu/sim/sim_driver.h"

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/json.h"

namespace gpuherd::gpu::sim {
namespace {

using ::testing::HasSubstr;

constexpr TimeMs kT0 = 1'700'000'000'000;  // an arbitrary wall-clock start

std::unique_ptr<SimDriver> Open(SimOptions options) {
  auto driver = OpenSimDriver(options);
  EXPECT_TRUE(driver.ok()) << driver.status().ToString();
  return driver.ok() ? std::move(driver).value() : nullptr;
}

std::unique_ptr<SimDriver> OpenScenario(const std::string& text, uint64_t seed = 1) {
  SimOptions options;
  options.scenario_text = text;
  options.seed = seed;
  return Open(options);
}

GpuSample MustSample(SimDriver& d, int index, TimeMs now) {
  auto s = d.Sample(index, now);
  EXPECT_TRUE(s.ok()) << "GPU " << index << " at +" << (now - kT0) << " ms: "
                      << s.status().ToString();
  return s.ok() ? std::move(s).value() : GpuSample{};
}

// Samples every GPU every `step` from kT0 to kT0 + `length` and returns the
// JSON of every reading (or error), in order.
std::vector<std::string> SampleAll(SimDriver& d, DurationMs length, DurationMs step) {
  std::vector<std::string> out;
  for (TimeMs t = kT0; t <= kT0 + length; t += step) {
    for (int i = 0; i < d.size(); ++i) {
      auto s = d.Sample(i, t);
      out.push_back(s.ok() ? nlohmann::json(*s).dump() : s.status().ToString());
    }
  }
  return out;
}

Load Busy(double util, uint64_t mem_bytes = 0) {
  Load load;
  load.util = util;
  load.mem_bytes = mem_bytes;
  return load;
}

int CountXid(const GpuSample& s, int xid) {
  int n = 0;
  for (const XidEvent& e : s.xids) n += e.xid == xid;
  return n;
}

TEST(SimDriverTest, DiscoverFillsEveryField) {
  auto d = Open({});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->name(), "sim");
  EXPECT_TRUE(d->simulated());
  auto fleet = d->Discover();
  ASSERT_TRUE(fleet.ok());
  EXPECT_TRUE(fleet->simulated);
  EXPECT_EQ(fleet->driver_name, "sim");
  ASSERT_EQ(fleet->gpus.size(), 8u);
  const std::regex uuid_re("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
  const std::regex bus_re("[0-9A-F]{8}:[0-9A-F]{2}:00\\.0");
  std::set<std::string> uuids, buses;
  for (const GpuInfo& g : fleet->gpus) {
    SCOPED_TRACE(g.index);
    EXPECT_TRUE(std::regex_match(g.uuid, uuid_re)) << g.uuid;
    EXPECT_TRUE(std::regex_match(g.pci_bus_id, bus_re)) << g.pci_bus_id;
    uuids.insert(g.uuid);
    buses.insert(g.pci_bus_id);
    EXPECT_TRUE(g.simulated);
    EXPECT_EQ(g.driver_version, "550.54.15");
    EXPECT_EQ(g.cuda_version, "12.4");
    EXPECT_GT(g.memory_total_bytes, 0u);
    EXPECT_TRUE(g.max_pcie_gen && g.max_pcie_width && g.power_limit_default_w);
    EXPECT_TRUE(g.temp_slowdown_c && g.temp_shutdown_c);
    EXPECT_EQ(g.numa_node, g.index < 4 ? 0 : 1);
    EXPECT_EQ(g.cpu_affinity, g.index < 4 ? "0-31,64-95" : "32-63,96-127");
  }
  EXPECT_EQ(uuids.size(), 8u);
  EXPECT_EQ(buses.size(), 8u);
  // The default mix: datacenter SXM parts first, GeForce cards after.
  EXPECT_EQ(fleet->gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(fleet->gpus[0].cc_major, 9);
  EXPECT_EQ(fleet->gpus[0].ecc_enabled, true);
  EXPECT_FALSE(fleet->gpus[0].serial.empty());
  EXPECT_EQ(fleet->gpus[7].name, "NVIDIA GeForce RTX 3090");
  EXPECT_FALSE(fleet->gpus[7].ecc_enabled.has_value());  // GeForce: not supported
  EXPECT_TRUE(fleet->gpus[7].serial.empty());
}

TEST(SimDriverTest, TopologyFollowsTheBoards) {
  auto d = Open({});
  auto fleet = d->Discover();
  ASSERT_TRUE(fleet.ok());
  const auto& t = fleet->topology;
  ASSERT_EQ(t.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t[i][i], Link::kSelf);
    for (int j = 0; j < 8; ++j) EXPECT_EQ(t[i][j], t[j][i]);
  }
  EXPECT_EQ(t[0][3], Link::kNvLink);       // SXM parts: fully NVLinked
  EXPECT_EQ(t[4][5], Link::kPcieSwitch);   // PCIe cards in pairs
  EXPECT_EQ(t[4][6], Link::kNumaNode);     // same socket, other switch
  EXPECT_EQ(t[3][4], Link::kCrossSocket);  // across the halves
}

TEST(SimDriverTest, NvLinkDomainsHoldEightGpus) {
  SimOptions options;
  options.count = 16;
  options.models = {"h200"};
  auto d = Open(options);
  auto fleet = d->Discover();
  ASSERT_TRUE(fleet.ok());
  EXPECT_EQ(fleet->topology[0][7], Link::kNvLink);
  EXPECT_EQ(fleet->topology[8][15], Link::kNvLink);
  EXPECT_EQ(fleet->topology[7][8], Link::kCrossSocket);
}

TEST(SimDriverTest, ModelsAreCycled) {
  SimOptions options;
  options.count = 5;
  options.models = {"gtx1070ti", "A100-40GB"};
  auto d = Open(options);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->size(), 5);
  EXPECT_EQ(d->model(0).key, "gtx1070ti");
  EXPECT_EQ(d->model(1).key, "a100-40gb");
  EXPECT_EQ(d->model(4).key, "gtx1070ti");
  EXPECT_EQ(d->description(), "5 simulated GPUs: 1x gtx1070ti, 1x a100-40gb, 1x gtx1070ti, "
                              "1x a100-40gb, 1x gtx1070ti");
}

TEST(SimDriverTest, BadOptionsFail) {
  SimOptions options;
  options.models = {"quadro9000"};
  auto d = OpenSimDriver(options);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("quadro9000"));

  options.models.clear();
  options.count = -2;
  EXPECT_FALSE(OpenSimDriver(options).ok());
}

TEST(SimDriverTest, SampleOutsideTheFleetFails) {
  auto d = Open({});
  auto s = d->Sample(8, kT0);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("no GPU 8"));
}

TEST(SimDriverTest, SameSeedSameReadingsOtherSeedOthers) {
  auto run = [](uint64_t seed) {
    SimOptions options;
    options.seed = seed;
    auto d = Open(options);
    for (int i = 0; i < d->size(); ++i) d->SetLoad(i, Busy(0.1 * i, 1ull << 30));
    auto readings = SampleAll(*d, 2 * kMinuteMs, 5 * kSecondMs);
    readings.push_back(nlohmann::json(d->Discover()->gpus).dump());
    return readings;
  };
  const auto a = run(7), b = run(7), c = run(8);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), c.size());
  int differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != c[i];
  EXPECT_GT(differ, static_cast<int>(a.size()) / 2);
}

TEST(SimDriverTest, IdleCardIdles) {
  auto d = OpenScenario("gpus: [{model: rtx3090}]");
  const GpuModel& m = d->model(0);
  GpuSample s = MustSample(*d, 0, kT0);
  EXPECT_EQ(s.gpu_util_pct, 0);
  EXPECT_NEAR(*s.power_w, m.idle_power_w, m.idle_power_w * 0.011);
  EXPECT_EQ(s.sm_clock_mhz, m.idle_sm_clock_mhz);
  EXPECT_EQ(*s.throttle_reasons, throttle::kGpuIdle);
  EXPECT_EQ(s.fan_pct, 30.0);
  EXPECT_EQ(s.pcie_width, 16);
  EXPECT_EQ(s.pcie_gen, 4);
  EXPECT_FALSE(s.ecc_sbe_volatile.has_value());  // GeForce: no ECC counters
  EXPECT_FALSE(s.remapped_rows_pending.has_value());
  EXPECT_EQ(s.mem_total_bytes, m.memory_bytes);
  EXPECT_GT(*s.mem_used_bytes, 0u);
  EXPECT_LT(*s.mem_used_bytes, 1ull << 30);  // only the driver's reserve
}

// At full load the readings' noise straddles the limit; a reading above it
// never comes out (no card's power controller lets its average past it).
TEST(SimDriverTest, PowerNeverReadsAboveTheCardsLimit) {
  auto d = OpenScenario("gpus: [{model: h100-sxm, count: 2}, {model: rtx3090, count: 2}]");
  for (int i = 0; i < d->size(); ++i) d->SetLoad(i, Busy(1.0));
  int at_limit = 0;
  for (TimeMs t = kT0; t < kT0 + 600 * kSecondMs; t += kSecondMs) {
    for (int i = 0; i < d->size(); ++i) {
      GpuSample s = MustSample(*d, i, t);
      ASSERT_LE(*s.power_w, *s.power_limit_w) << "GPU " << i << " at +" << (t - kT0) << " ms";
      at_limit += *s.power_w == *s.power_limit_w;
    }
  }
  EXPECT_GT(at_limit, 0) << "the test never reached the limit, so it checks nothing";
}

TEST(SimDriverTest, PowerFollowsUtilAndTemperatureFollowsPowerWithItsTimeConstant) {
  auto d = OpenScenario("ambient: 30\ngpus: [{model: h100-sxm}]");
  const GpuModel& m = d->model(0);
  const double r = m.thermal_resistance_c_per_w, tau_s = m.thermal_time_constant_s;
  GpuSample idle = MustSample(*d, 0, kT0);
  const double idle_c = 30 + m.idle_power_w * r;
  EXPECT_NEAR(*idle.temp_c, idle_c, 1e-9);

  d->SetLoad(0, Busy(0.5));
  GpuSample half = MustSample(*d, 0, kT0 + 1000);
  const double half_w = m.idle_power_w + 0.5 * (m.power_limit_w - m.idle_power_w);
  EXPECT_NEAR(*half.power_w, half_w, half_w * 0.011);
  EXPECT_EQ(half.sm_clock_mhz, m.max_sm_clock_mhz);  // cool and under the cap: full boost
  EXPECT_EQ(*half.throttle_reasons, 0u);
  EXPECT_EQ(half.gpu_util_pct, 50);
  EXPECT_GT(*half.mem_util_pct, 0);

  // Full load from the idle steady state: after one time constant the
  // temperature has covered 1 - 1/e of the way to its steady state.
  auto full = OpenScenario("ambient: 30\ngpus: [{model: h100-sxm}]");
  MustSample(*full, 0, kT0);
  full->SetLoad(0, Busy(1.0));
  const TimeMs tau_ms = static_cast<TimeMs>(tau_s * 1000);
  GpuSample after_tau = MustSample(*full, 0, kT0 + tau_ms);
  const double steady_c = 30 + m.power_limit_w * r;
  EXPECT_NEAR(*after_tau.temp_c, steady_c + (idle_c - steady_c) * std::exp(-1.0), 1e-6);
  EXPECT_NEAR(*after_tau.power_w, m.power_limit_w, m.power_limit_w * 0.011);
  GpuSample settled = MustSample(*full, 0, kT0 + 10 * tau_ms);
  EXPECT_NEAR(*settled.temp_c, steady_c, 0.01);
  // At the power limit the card is capped: clocks between base and boost.
  EXPECT_TRUE(*settled.throttle_reasons & throttle::kSwPowerCap);
  EXPECT_LT(*settled.sm_clock_mhz, m.max_sm_clock_mhz);
  EXPECT_GE(*settled.sm_clock_mhz, m.base_sm_clock_mhz);
  EXPECT_FALSE(*settled.throttle_reasons & throttle::kThermalMask);
  // The energy counter integrates the power drawn.
  const double expected_j = m.idle_power_w * 0 + m.power_limit_w * 10 * tau_s;
  EXPECT_NEAR(static_cast<double>(*settled.energy_mj) / 1000, expected_j, 1);
}

TEST(SimDriverTest, StepLengthDoesNotChangeTheCurve) {
  auto fine = OpenScenario("gpus: [{model: rtx3090}, {model: a100-40gb}]", 3);
  auto coarse = OpenScenario("gpus: [{model: rtx3090}, {model: a100-40gb}]", 3);
  for (auto* d : {fine.get(), coarse.get()}) {
    d->SetLoad(0, Busy(0.7));
    d->SetLoad(1, Busy(0.3));
  }
  for (TimeMs t = kT0; t <= kT0 + 5 * kMinuteMs; t += 100) {
    GpuSample f0 = MustSample(*fine, 0, t), f1 = MustSample(*fine, 1, t);
    if ((t - kT0) % (5 * kSecondMs) != 0) continue;
    GpuSample c0 = MustSample(*coarse, 0, t), c1 = MustSample(*coarse, 1, t);
    ASSERT_NEAR(*f0.temp_c, *c0.temp_c, 1e-9);
    ASSERT_NEAR(*f1.temp_c, *c1.temp_c, 1e-9);
    ASSERT_NEAR(static_cast<double>(*f0.energy_mj), static_cast<double>(*c0.energy_mj), 1);
    ASSERT_EQ(f0.sm_clock_mhz, c0.sm_clock_mhz);
  }
  GpuSample end = MustSample(*coarse, 0, kT0 + 5 * kMinuteMs + 1);
  EXPECT_GT(*end.temp_c, 50);  // it did heat up
}

TEST(SimDriverTest, HotCardThrottlesAndHoldsBelowShutdown) {
  // A hot room and a card with worn paste: full load would settle over the
  // slowdown limit, so the card throttles and hovers near it instead.
  auto d = OpenScenario("ambient: 50\ngpus: [{model: h100-sxm, thermal_scale: 1.5}]");
  const GpuModel& m = d->model(0);
  d->SetLoad(0, Busy(1.0));
  bool saw_thermal = false, saw_slow_clock = false;
  double hottest = 0;
  for (TimeMs t = kT0; t <= kT0 + 20 * kMinuteMs; t += 5 * kSecondMs) {
    GpuSample s = MustSample(*d, 0, t);
    hottest = std::max(hottest, *s.temp_c);
    if (*s.throttle_reasons & throttle::kSwThermalSlowdown) {
      saw_thermal = true;
      saw_slow_clock = saw_slow_clock || *s.sm_clock_mhz < m.base_sm_clock_mhz;
      EXPECT_LT(*s.power_w, m.power_limit_w);
    }
  }
  EXPECT_TRUE(saw_thermal);
  EXPECT_TRUE(saw_slow_clock);
  EXPECT_GE(hottest, m.temp_slowdown_c - 5);
  EXPECT_LT(hottest, m.temp_shutdown_c);
}

TEST(SimDriverTest, LoadMemoryAndProcessesShowUp) {
  auto d = OpenScenario("gpus: [{model: a100-40gb}]");
  GpuSample idle = MustSample(*d, 0, kT0);
  Load load = Busy(0.9);
  load.processes = {{4242, 3ull << 30, "python"}, {4243, 1ull << 30, "train"}};
  d->SetLoad(0, load);
  GpuSample busy = MustSample(*d, 0, kT0 + 5000);
  EXPECT_EQ(*busy.mem_used_bytes, *idle.mem_used_bytes + (4ull << 30));
  ASSERT_EQ(busy.processes.size(), 2u);
  EXPECT_EQ(busy.processes[0].pid, 4242);
  EXPECT_EQ(busy.processes[1].name, "train");
  EXPECT_GT(*busy.pcie_rx_kbps, *idle.pcie_rx_kbps * 20);
  EXPECT_GT(*busy.pcie_tx_kbps, *idle.pcie_tx_kbps * 20);
  EXPECT_EQ(busy.mem_clock_mhz, d->model(0).max_mem_clock_mhz);
  EXPECT_EQ(*busy.remapped_rows_uncorrectable, 0u);  // Ampere: row remapping
  EXPECT_FALSE(busy.retired_pages_dbe.has_value());

  d->SetLoad(0, Busy(0.9, 10ull << 30));
  GpuSample explicit_mem = MustSample(*d, 0, kT0 + 10000);
  EXPECT_EQ(*explicit_mem.mem_used_bytes, *idle.mem_used_bytes + (10ull << 30));
}

TEST(SimDriverTest, ExplicitStartAnchorsFaults) {
  SimOptions options;
  options.scenario_text = "gpus: [{model: t4}]\nfaults: [{at: 1m, gpu: 0, kind: xid, xid: 13}]";
  options.start = kT0;
  auto d = Open(options);
  EXPECT_TRUE(MustSample(*d, 0, kT0 + 59 * kSecondMs).xids.empty());
  GpuSample s = MustSample(*d, 0, kT0 + 60 * kSecondMs);
  ASSERT_EQ(s.xids.size(), 1u);
  EXPECT_EQ(s.xids[0].time, kT0 + kMinuteMs);
  EXPECT_EQ(d->start(), kT0);
}

// One fault on GPU 0 of a single-GPU fleet, compared against a twin without it.
class FaultTest : public ::testing::Test {
 protected:
  void Open(const std::string& model, const std::string& fault, double util = 0) {
    const std::string gpus = "gpus: [{model: " + model + "}]\n";
    faulty_ = OpenScenario(gpus + "faults:\n  - " + fault + "\n");
    healthy_ = OpenScenario(gpus);
    ASSERT_TRUE(faulty_ && healthy_);
    faulty_->SetLoad(0, Busy(util));
    healthy_->SetLoad(0, Busy(util));
    At(0);  // the first Sample starts the fleet's clock
  }
  // Samples both at kT0 + `offset`.
  std::pair<GpuSample, GpuSample> At(DurationMs offset) {
    return {MustSample(*faulty_, 0, kT0 + offset), MustSample(*healthy_, 0, kT0 + offset)};
  }

  std::unique_ptr<SimDriver> faulty_, healthy_;
};

TEST_F(FaultTest, OverheatForcesTemperatureAndThrottles) {
  Open("h100-sxm", "{at: 1m, gpu: 0, kind: overheat, duration: 2m}", 0.8);
  auto [before, twin] = At(59 * kSecondMs);
  EXPECT_EQ(*before.temp_c, *twin.temp_c);
  EXPECT_FALSE(*before.throttle_reasons & throttle::kThermalMask);
  auto [hot, twin_hot] = At(kMinuteMs);
  EXPECT_GE(*hot.temp_c, 90);  // the H100's slowdown limit
  EXPECT_TRUE(*hot.throttle_reasons & throttle::kHwThermalSlowdown);
  EXPECT_TRUE(*hot.throttle_reasons & throttle::kSwThermalSlowdown);
  EXPECT_LT(*hot.sm_clock_mhz, *twin_hot.sm_clock_mhz);
  EXPECT_LT(*hot.power_w, *twin_hot.power_w);
  // When it ends the card cools with its time constant.
  auto [cooling, twin_cooling] = At(3 * kMinuteMs + 30 * kSecondMs);
  EXPECT_LT(*cooling.temp_c, 90);
  EXPECT_GT(*cooling.temp_c, *twin_cooling.temp_c);
}

TEST_F(FaultTest, OverheatPastShutdownTakesTheCardOff) {
  Open("rtx3090", "{at: 30s, gpu: 0, kind: overheat, temp: 99}");
  GpuSample last = At(30 * kSecondMs).first;
  EXPECT_EQ(CountXid(last, 79), 1);
  auto after = faulty_->Sample(0, kT0 + 35 * kSecondMs);
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), Code::kUnavailable);
  EXPECT_THAT(after.status().message(), HasSubstr("shutdown temperature"));
}

TEST_F(FaultTest, TempSlopeRisesAtItsRate) {
  Open("a100-40gb", "{at: 1m, gpu: 0, kind: temp_slope, rate: 3/min, duration: 4m}");
  auto [before, twin] = At(kMinuteMs - 1);
  EXPECT_EQ(*before.temp_c, *twin.temp_c);
  auto [two_min, twin2] = At(3 * kMinuteMs);
  EXPECT_NEAR(*two_min.temp_c - *twin2.temp_c, 6.0, 1e-9);
  auto [peak, twin_peak] = At(5 * kMinuteMs);
  EXPECT_NEAR(*peak.temp_c - *twin_peak.temp_c, 12.0, 1e-9);
  auto [fading, twin_fading] = At(8 * kMinuteMs);
  const double extra = *fading.temp_c - *twin_fading.temp_c;
  EXPECT_GT(extra, 0);
  EXPECT_LT(extra, 12.0 * std::exp(-1.0));  // 3 min > one 100 s time constant
}

TEST_F(FaultTest, EccSbeCount) {
  Open("h100-sxm", "{at: 90s, gpu: 0, kind: ecc_sbe, count: 7}");
  EXPECT_EQ(*At(89 * kSecondMs).first.ecc_sbe_volatile, 0u);
  EXPECT_EQ(*At(90 * kSecondMs).first.ecc_sbe_volatile, 7u);
  EXPECT_EQ(*At(10 * kMinuteMs).first.ecc_sbe_volatile, 7u);
  EXPECT_EQ(*At(11 * kMinuteMs).first.ecc_dbe_volatile, 0u);
}

TEST_F(FaultTest, EccSbeRate) {
  Open("t4", "{at: 1m, gpu: 0, kind: ecc_sbe, rate: 2/min, duration: 3m}");
  EXPECT_EQ(*At(59 * kSecondMs).first.ecc_sbe_volatile, 0u);
  EXPECT_EQ(*At(kMinuteMs).first.ecc_sbe_volatile, 1u);
  EXPECT_EQ(*At(2 * kMinuteMs).first.ecc_sbe_volatile, 3u);
  EXPECT_EQ(*At(4 * kMinuteMs).first.ecc_sbe_volatile, 7u);
  EXPECT_EQ(*At(9 * kMinuteMs).first.ecc_sbe_volatile, 7u);  // ended
}

TEST_F(FaultTest, EccDbeOnAmpereRemapsARow) {
  Open("a100-40gb", "{at: 2m, gpu: 0, kind: ecc_dbe}");
  GpuSample before = At(2 * kMinuteMs - 1).first;
  EXPECT_EQ(*before.ecc_dbe_volatile, 0u);
  EXPECT_EQ(*before.remapped_rows_pending, false);
  EXPECT_TRUE(before.xids.empty());
  GpuSample hit = At(2 * kMinuteMs + 3000).first;
  EXPECT_EQ(*hit.ecc_dbe_volatile, 1u);
  EXPECT_EQ(*hit.remapped_rows_uncorrectable, 1u);
  EXPECT_EQ(*hit.remapped_rows_pending, true);
  ASSERT_EQ(hit.xids.size(), 1u);
  EXPECT_EQ(hit.xids[0].xid, 48);
  EXPECT_EQ(hit.xids[0].time, kT0 + 2 * kMinuteMs);
  EXPECT_FALSE(hit.xids[0].description.empty());
  GpuSample later = At(3 * kMinuteMs).first;
  EXPECT_TRUE(later.xids.empty());  // reported once
  EXPECT_EQ(*later.ecc_dbe_volatile, 1u);
}

TEST_F(FaultTest, EccDbeOnVoltaRetiresAPage) {
  Open("v100-sxm2", "{at: 2m, gpu: 0, kind: ecc_dbe}");
  GpuSample hit = At(2 * kMinuteMs).first;
  EXPECT_EQ(*hit.retired_pages_dbe, 1u);
  EXPECT_EQ(*hit.retired_pages_pending, true);
  EXPECT_FALSE(hit.remapped_rows_pending.has_value());
  EXPECT_EQ(CountXid(hit, 48), 1);
}

TEST_F(FaultTest, PcieDownTrainLastsItsDuration) {
  Open("rtx3090", "{at: 30s, gpu: 0, kind: pcie_downtrain, width: 8, duration: 1m}", 0.5);
  auto [before, twin] = At(29 * kSecondMs);
  EXPECT_EQ(before.pcie_width, 16);
  auto [narrow, twin_narrow] = At(30 * kSecondMs);
  EXPECT_EQ(narrow.pcie_width, 8);
  EXPECT_EQ(narrow.pcie_gen, 4);
  EXPECT_LT(*narrow.pcie_rx_kbps, *twin_narrow.pcie_rx_kbps * 0.6);
  EXPECT_EQ(At(90 * kSecondMs).first.pcie_width, 16);
}

TEST_F(FaultTest, PcieReplaysGrow) {
  Open("h200", "{at: 1m, gpu: 0, kind: pcie_replay, rate: 10/min}");
  EXPECT_EQ(*At(59 * kSecondMs).first.pcie_replay_count, 0u);
  EXPECT_EQ(*At(kMinuteMs).first.pcie_replay_count, 1u);
  EXPECT_EQ(*At(2 * kMinuteMs).first.pcie_replay_count, 11u);
}

TEST_F(FaultTest, XidIsReportedOnce) {
  Open("gtx1070ti", "{at: 45s, gpu: 0, kind: xid, xid: 13}");
  EXPECT_TRUE(At(40 * kSecondMs).first.xids.empty());
  GpuSample hit = At(50 * kSecondMs).first;
  ASSERT_EQ(hit.xids.size(), 1u);
  EXPECT_EQ(hit.xids[0].xid, 13);
  EXPECT_EQ(hit.xids[0].time, kT0 + 45 * kSecondMs);
  EXPECT_TRUE(At(55 * kSecondMs).first.xids.empty());
  EXPECT_TRUE(faulty_->Sample(0, kT0 + kHourMs).ok());  // 13 is not fatal to the card
}

TEST_F(FaultTest, Xid79FallsOffTheBus) {
  Open("h100-sxm", "{at: 1m, gpu: 0, kind: xid, xid: 79}");
  GpuSample last = At(kMinuteMs).first;
  EXPECT_EQ(CountXid(last, 79), 1);
  for (DurationMs later : {kMinuteMs + 5000, kHourMs}) {
    auto s = faulty_->Sample(0, kT0 + later);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), Code::kUnavailable);
    EXPECT_THAT(s.status().message(), HasSubstr("GPU 0 (GPU-"));
    EXPECT_THAT(s.status().message(), HasSubstr("fallen off the bus"));
  }
  EXPECT_EQ(faulty_->Discover()->gpus.size(), 1u);  // still listed
}

TEST_F(FaultTest, FanFailureStopsTheFanAndHeatsTheCard) {
  Open("rtx3090", "{at: 2m, gpu: 0, kind: fan_failure}", 0.6);
  auto [before, twin] = At(2 * kMinuteMs - 1);
  EXPECT_GT(*before.fan_pct, 30);
  auto [stuck, twin_stuck] = At(2 * kMinuteMs);
  EXPECT_EQ(*stuck.fan_pct, 0);
  auto [hot, twin_hot] = At(5 * kMinuteMs);
  EXPECT_GT(*hot.temp_c, *twin_hot.temp_c + 15);
}

TEST_F(FaultTest, FanFailureOnAPassiveCardReportsNoFan) {
  Open("l40s", "{at: 10s, gpu: 0, kind: fan_failure}", 0.6);
  auto [hot, twin] = At(3 * kMinuteMs);
  EXPECT_FALSE(hot.fan_pct.has_value());
  EXPECT_GT(*hot.temp_c, *twin.temp_c + 10);
}

TEST_F(FaultTest, ForcedThrottleReason) {
  Open("a100-40gb", "{at: 1m, gpu: 0, kind: throttle, reason: hw_slowdown, duration: 1m}", 0.5);
  auto [before, twin] = At(59 * kSecondMs);
  EXPECT_EQ(*before.throttle_reasons, 0u);
  auto [slow, twin_slow] = At(kMinuteMs);
  EXPECT_EQ(*slow.throttle_reasons, throttle::kHwSlowdown);
  EXPECT_LT(*slow.sm_clock_mhz, *twin_slow.sm_clock_mhz);
  EXPECT_EQ(*At(2 * kMinuteMs).first.throttle_reasons, 0u);
}

TEST_F(FaultTest, UnresponsiveForAWhile) {
  Open("h100-sxm", "{at: 1m, gpu: 0, kind: unresponsive, duration: 30s}");
  EXPECT_TRUE(faulty_->Sample(0, kT0 + 59 * kSecondMs).ok());
  auto gone = faulty_->Sample(0, kT0 + kMinuteMs);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kUnavailable);
  EXPECT_THAT(gone.status().message(), HasSubstr("GPU 0"));
  EXPECT_FALSE(faulty_->Sample(0, kT0 + 89 * kSecondMs).ok());
  auto back = faulty_->Sample(0, kT0 + 90 * kSecondMs);
  ASSERT_TRUE(back.ok());
  // The card kept running meanwhile: its state matches a card never lost.
  EXPECT_NEAR(*back->temp_c, *MustSample(*healthy_, 0, kT0 + 90 * kSecondMs).temp_c, 1e-9);
}

TEST(SimDriverFaultTest, XidsDuringAnOutageArriveAfterIt) {
  auto d = OpenScenario(R"(gpus: [{model: h200}]
faults:
  - {at: 10s, gpu: 0, kind: unresponsive, duration: 20s}
  - {at: 15s, gpu: 0, kind: xid, xid: 43}
)");
  MustSample(*d, 0, kT0);
  EXPECT_FALSE(d->Sample(0, kT0 + 20 * kSecondMs).ok());
  GpuSample back = MustSample(*d, 0, kT0 + 30 * kSecondMs);
  EXPECT_EQ(CountXid(back, 43), 1);
  EXPECT_TRUE(MustSample(*d, 0, kT0 + 35 * kSecondMs).xids.empty());
}

TEST(SimDriverFaultTest, FaultsHitOnlyTheirGpu) {
  auto d = OpenScenario(R"(gpus: [{model: h100-sxm, count: 4}]
faults:
  - {at: 0s, gpu: 2, kind: ecc_sbe, count: 5}
)");
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(*MustSample(*d, i, kT0).ecc_sbe_volatile, i == 2 ? 5u : 0u) << i;
  }
}

TEST(SimDriverFaultTest, ScenarioErrorsStopTheFleetBeforeItRuns) {
  SimOptions options;
  options.scenario_text = R"(gpus: [{model: gtx1070ti, count: 2}]
faults:
  - {at: 1m, gpu: 1, kind: ecc_sbe, count: 3}
)";
  auto d = OpenSimDriver(options);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("scenario:3: GPU 1 (gtx1070ti) has no ECC"));

  options.scenario_text = "faults: [{at: 1m, gpu: 8, kind: xid, xid: 79}]";
  d = OpenSimDriver(options);  // 8 GPUs from the options: index 8 is outside
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("scenario:1: gpu 8 is outside the fleet of 8"));

  options.scenario_text.clear();
  options.scenario_path = "/nonexistent/x.yaml";
  EXPECT_EQ(OpenSimDriver(options).status().code(), Code::kNotFound);
}

TEST(SimDriverFaultTest, ScenarioSeedWins) {
  SimOptions a, b;
  a.scenario_text = b.scenario_text = "seed: 42\ngpus: [{model: t4}]";
  a.seed = 1;
  b.seed = 2;
  EXPECT_EQ(Open(a)->Discover()->gpus[0].uuid, Open(b)->Discover()->gpus[0].uuid);
}

std::string Example(const std::string& name) {
  return std::string(GPUHERD_EXAMPLES_DIR) + "/" + name;
}

TEST(ExampleScenarioTest, PcieXid79) {
  SimOptions options;
  options.scenario_path = Example("pcie-xid79.yaml");
  options.count = 0;
  auto d = Open(options);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->size(), 8);
  int narrowed_at = -1, lost_gpu = -1, xid_seen = 0;
  TimeMs narrowed_time = 0, lost_time = 0;
  for (TimeMs t = kT0; t <= kT0 + 2 * kMinuteMs; t += 5 * kSecondMs) {
    for (int i = 0; i < 8; ++i) {
      auto s = d->Sample(i, t);
      if (!s.ok()) {
        if (lost_time == 0) lost_time = t;
        EXPECT_EQ(i, lost_gpu);
        continue;
      }
      if (*s->pcie_width == 8 && narrowed_at < 0) {
        narrowed_at = i;
        narrowed_time = t;
      }
      if (CountXid(*s, 79) > 0) {
        lost_gpu = i;
        ++xid_seen;
        EXPECT_EQ(t, kT0 + kMinuteMs);
      }
    }
  }
  EXPECT_GE(narrowed_at, 0);
  EXPECT_EQ(narrowed_time, kT0 + 30 * kSecondMs);
  EXPECT_NE(narrowed_at, lost_gpu);
  EXPECT_EQ(xid_seen, 1);
  EXPECT_EQ(lost_time, kT0 + kMinuteMs + 5 * kSecondMs);
}

TEST(ExampleScenarioTest, EveryExampleRunsAndTheTourHasEveryKind) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GPUHERD_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    ++files;
    SimOptions options;
    options.scenario_path = entry.path().string();
    options.count = 0;
    auto d = Open(options);
    ASSERT_TRUE(d);
    for (int i = 0; i < d->size(); ++i) d->SetLoad(i, Busy(0.8));
    SampleAll(*d, 30 * kMinuteMs, 5 * kSecondMs);
  }
  EXPECT_GE(files, 3);

  auto tour = LoadScenario(Example("faults-tour.yaml"));
  ASSERT_TRUE(tour.ok()) << tour.status().ToString();
  std::set<FaultKind> kinds;
  for (const Fault& f : tour->faults) kinds.insert(f.kind);
  EXPECT_EQ(kinds.size(), 10u);
}

TEST(ExampleScenarioTest, MiningCardsAreWornGtx1070Ti) {
  auto mining = LoadScenario(Example("mining-cards.yaml"));
  ASSERT_TRUE(mining.ok()) << mining.status().ToString();
  EXPECT_EQ(ScenarioGpuCount(*mining), 8);
  for (const GpuGroup& g : mining->gpus) EXPECT_EQ(FindModel(g.model)->key, "gtx1070ti");
  EXPECT_FALSE(mining->faults.empty());
}

}  // namespace
}  // namespace gpuherd::gpu::sim
