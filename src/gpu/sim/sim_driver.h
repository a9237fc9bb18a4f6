// The simulated fleet: a gpu::Driver whose GPUs are models of real cards
// (catalog.h) whose readings follow the load that jobs put on them, with
// faults injected from a scenario (scenario.h). Tests, the demo, benchmarks and
// what-if runs use it; docs/simulated-fleet.md describes the model.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "gpu/driver.h"
#include "gpu/catalog.h"
#include "gpu/sim/scenario.h"

namespace gpuherd::gpu::sim {

struct SimOptions {
  // Fleet size when no scenario lists gpus; 0 = 8. A scenario's gpus list
  // decides the fleet on its own.
  int count = 8;
  // Catalogue keys, cycled over the fleet; empty = the scenario's list, or a
  // default mix (first half h100-sxm, second half rtx3090).
  std::vector<std::string> models;
  uint64_t seed = 1;               // a scenario's seed: wins over this one
  std::string scenario_path;       // YAML; empty = none
  std::string scenario_text;       // alternative to a path, for tests
  // The time faults are counted from; 0 = the `now` of the first Sample.
  TimeMs start = 0;
};

// What jobs put on one GPU.
struct Load {
  double util = 0;            // 0..1
  uint64_t mem_bytes = 0;     // 0: the sum of the processes' memory
  std::vector<GpuProcess> processes;
};

class Card;  // one simulated GPU's state (card.h, private)

// Thread-safe: SetLoad may be called from another thread than Sample.
class SimDriver : public Driver {
 public:
  ~SimDriver() override;
  SimDriver(const SimDriver&) = delete;
  SimDriver& operator=(const SimDriver&) = delete;

  std::string name() const override { return "sim"; }
  bool simulated() const override { return true; }
  // The same fleet every call. A GPU that fell off the bus stays listed (its
  // Sample fails), so indices never shift.
  Result<Fleet> Discover() override;
  // Advances GPU `index` from its previous Sample (or the start) to `now` and
  // reads it. kUnavailable while the GPU does not answer (an unresponsive
  // fault, or for good after XID 79 or a thermal shutdown).
  Result<GpuSample> Sample(int index, TimeMs now) override;

  // What jobs put on GPU `index`; takes effect from the next Sample (which
  // integrates its whole step under the new load). Out-of-range indices are
  // ignored.
  void SetLoad(int index, const Load& load);

  int size() const;
  const GpuModel& model(int index) const;  // index must be in range
  // The time faults are counted from; 0 until the first Sample when not given.
  TimeMs start() const;
  // "scenario examples/x.yaml" or "8 GPUs: 4x h100-sxm, 4x rtx3090".
  const std::string& description() const { return description_; }

 private:
  friend Result<std::unique_ptr<SimDriver>> OpenSimDriver(const SimOptions& options);
  SimDriver(Fleet fleet, std::vector<const GpuModel*> models, std::vector<Card> cards,
            TimeMs start, std::string description);

  mutable std::mutex mu_;
  const Fleet fleet_;
  const std::vector<const GpuModel*> models_;
  std::vector<Card> cards_;
  TimeMs start_;
  bool started_;
  const std::string description_;
};

// Builds the fleet: reads and checks the scenario first, so a bad file fails
// here with its line, before anything runs.
Result<std::unique_ptr<SimDriver>> OpenSimDriver(const SimOptions& options);

}  // namespace gpuherd::gpu::sim
