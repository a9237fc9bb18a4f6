// One simulated GPU: its physical state (temperature, energy, error counters),
// how load and faults move it, and what a reading of it shows. Private to the
// simulated fleet; SimDriver owns one Card per GPU and serialises calls.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "gpu/catalog.h"
#include "gpu/sim/scenario.h"
#include "gpu/sim/sim_driver.h"
#include "gpu/types.h"

namespace gpuherd::gpu::sim {

// splitmix64: fixed arithmetic, so a seed gives the same numbers with every
// compiler and standard library (std distributions do not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  double Symmetric() { return static_cast<double>(Next() >> 11) * 0x1.0p-52 - 1.0; }

 private:
  uint64_t state_;
};

struct CardSetup {
  const GpuModel* model = nullptr;
  std::string label;          // "GPU 3 (GPU-1a2b...)", for errors
  double ambient_c = 30;
  double thermal_scale = 1;
  uint64_t noise_seed = 0;
  std::vector<Fault> faults;  // this GPU's only
};

class Card {
 public:
  explicit Card(CardSetup setup);

  // Puts the card at rest at `start`: idle, at its idle temperature.
  void Start(TimeMs start);
  // A swing between idle and full load counts towards a transient_drop fault,
  // timed by the card's latest reading.
  void SetLoad(const Load& load);
  // Integrates from the previous call (or the start) to `now` and reads the
  // card. Requires Start().
  Result<GpuSample> Sample(TimeMs now);

 private:
  struct ScheduledFault {
    Fault fault;
    TimeMs begin = 0;
    TimeMs end = 0;  // exclusive; the far future when the fault never ends
    bool fired = false;
  };
  // What the faults do at one instant.
  struct Effects {
    std::optional<double> overheat_c;
    double slope_extra_c = 0;
    uint64_t sbe = 0, replays = 0;
    std::optional<int> pcie_gen, pcie_width;
    bool fan_failed = false;
    uint64_t forced_reasons = 0;
    double forced_factor = 1;
    bool unresponsive = false;
    bool falls_off_bus = false;
    double fan_wear = 0;     // 0..1
    double clock_swing = 0;  // share of the clock
    double underclock = 1;   // share of the clock and power under load
  };

  Effects ApplyFaults(TimeMs now);
  // A precursor's strength (0..1): rises over its duration, then stays, or
  // with `fades` recedes over the same time.
  static double Envelope(const ScheduledFault& f, TimeMs now);
  void Post(TimeMs time, int xid);
  // Clock factor (1 = full boost) from heat, setting the thermal reason bits.
  double ThermalFactor(double temp_c, uint64_t* reasons) const;

  const GpuModel& model_;
  const std::string label_;
  const double ambient_c_;
  const double resistance_c_per_w_;
  SplitMix64 rng_;
  std::vector<ScheduledFault> faults_;

  Load load_;
  TimeMs last_ = 0;
  double temp_c_ = 0;           // the die, driven by power (no fault offsets)
  double reported_temp_c_ = 0;  // what the last reading showed
  double energy_j_ = 0;
  uint64_t dbe_ = 0;
  bool memory_repair_pending_ = false;
  std::vector<XidEvent> pending_xids_;  // not yet read by a Sample
  std::vector<TimeMs> swings_;          // recent full/idle load swings
  bool dropped_by_swings_ = false;
  bool lost_ = false;
  std::string lost_reason_;
};

}  // namespace gpuherd::gpu::sim
