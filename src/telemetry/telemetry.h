// The live state of every GPU, fed one sampling round at a time: the recent
// readings, per-minute rollups and the events that mark a change of health.
//
// Owned by one thread (the daemon's loop); not thread-safe. Pure apart from
// its inputs: time comes from the rounds, nothing is read or written.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/time.h"
#include "gpu/types.h"
#include "store/records.h"
#include "telemetry/ring.h"
#include "telemetry/rollup.h"
#include "telemetry/sampler.h"

namespace gpuherd::telemetry {

enum class GpuState { kOk, kLost };
const char* GpuStateName(GpuState state);  // "ok", "lost"

struct TelemetryOptions {
  size_t ring_capacity = 720;  // readings kept per GPU: 1 h at 5 s
};

// What one round produced for the store.
struct IngestResult {
  std::vector<store::EventRecord> events;
  std::vector<store::RollupRecord> rollups;  // minutes that closed
};

// Event kinds (EventRecord::kind).
inline constexpr char kEventGpuLost[] = "gpu.lost";
inline constexpr char kEventGpuFound[] = "gpu.found";
inline constexpr char kEventGpuXid[] = "gpu.xid";
inline constexpr char kEventGpuEcc[] = "gpu.ecc";
inline constexpr char kEventGpuPcie[] = "gpu.pcie";
inline constexpr char kEventGpuPcieReplay[] = "gpu.pcie_replay";
inline constexpr char kEventGpuThermal[] = "gpu.thermal";
inline constexpr char kEventGpuFan[] = "gpu.fan";
inline constexpr char kEventGpuRetired[] = "gpu.retired";

// A fan at 0% above this temperature has stopped.
constexpr double kFanStoppedAboveC = 60.0;
// Below this GPU utilisation a card is idle and may down-train its PCIe link.
constexpr double kIdleUtilPct = 5.0;
// A thermal episode ends this far below the slowdown threshold, so that a card
// hovering at the threshold does not raise an event per reading.
constexpr double kThermalHysteresisC = 3.0;
// At most one event of a rate-limited kind (SBE, PCIe replay) per GPU per this.
constexpr DurationMs kCounterEventInterval = kMinuteMs;

class Telemetry {
 public:
  explicit Telemetry(TelemetryOptions options = {});

  // Sets the GPUs to track, keyed by UUID so that a GPU keeps its history and
  // state when re-enumeration changes its index. The open minute of a GPU that
  // left the fleet is returned by the next Ingest or Flush.
  void SetFleet(const gpu::Fleet& fleet);

  // Takes one round. Readings of indices not in the fleet are ignored (a round
  // taken before a re-enumeration). A reading whose sample.time is 0 is
  // stamped with the round's time.
  IngestResult Ingest(const SampleRound& round);

  // The newest reading of GPU `index`; nullptr when there is none. Valid until
  // the next Ingest or SetFleet.
  const gpu::GpuSample* Latest(int index) const;
  // The newest n readings, oldest first.
  std::vector<gpu::GpuSample> Recent(int index, size_t n) const;
  // kLost from a failed reading until the GPU answers again; kOk otherwise,
  // also for an index not in the fleet.
  GpuState State(int index) const;
  // The driver's error from the failed reading of a lost GPU; empty otherwise.
  std::string LostReason(int index) const;

  // Closes every open minute (daemon shutdown).
  std::vector<store::RollupRecord> Flush();

 private:
  struct Gpu {
    Gpu(const gpu::GpuInfo& info, size_t ring_capacity)
        : info(info), ring(ring_capacity), rollup(info.uuid) {}

    gpu::GpuInfo info;
    Ring<gpu::GpuSample> ring;
    Rollup rollup;
    GpuState state = GpuState::kOk;
    std::string lost_reason;
    TimeMs lost_since = 0;
    // The health conditions, remembered so that events fire on their edges.
    std::optional<uint64_t> ecc_sbe, ecc_dbe, pcie_replay;  // last counter values
    std::optional<TimeMs> last_sbe_event, last_replay_event;
    bool pcie_width_low = false, pcie_gen_low = false;
    bool hot = false;
    bool fan_stopped = false;
    bool retirement_pending = false;
  };

  Gpu* Find(int index);
  const Gpu* Find(int index) const;
  void TakeSample(Gpu& g, gpu::GpuSample sample, IngestResult& out);
  void TakeFailure(Gpu& g, TimeMs time, const Status& error, IngestResult& out);
  void CheckCounters(Gpu& g, const gpu::GpuSample& s, IngestResult& out);
  void CheckPcie(Gpu& g, const gpu::GpuSample& s, IngestResult& out);
  void CheckThermal(Gpu& g, const gpu::GpuSample& s, IngestResult& out);
  void CheckFan(Gpu& g, const gpu::GpuSample& s, IngestResult& out);
  void CheckRetirement(Gpu& g, const gpu::GpuSample& s, IngestResult& out);

  TelemetryOptions options_;
  std::map<std::string, Gpu> gpus_;        // by UUID
  std::map<int, std::string> uuid_by_index_;
  std::vector<store::RollupRecord> orphaned_rollups_;  // of GPUs that left the fleet
};

}  // namespace gpuherd::telemetry
