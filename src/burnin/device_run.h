// The compute side of one GPU's burn-in, run on a thread of its own: opens
// the device and does each level's device work (level 1: a host<->device
// round trip; level 2: the memory test, copies, memory bandwidth and a checked
// GEMM; level 3: sustained, verified stress), publishing its progress for the
// sampling thread. Private to the burn-in.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "burnin/result.h"
#include "burnin/runner.h"
#include "gpu/compute.h"
#include "host/clock.h"

namespace gpuherd::burnin {

// What the sampling thread may read while the device works.
struct DeviceStatus {
  std::mutex mu;
  std::string phase = "starting";
  double fraction = 0;
  std::optional<double> rate;
  std::string rate_unit;
  uint64_t errors = 0;     // memory + compute errors so far
  bool loaded = false;     // level 2 or 3 work has begun: the link runs at full speed
  bool done = false;
};

// What the device work found; read only after its thread has ended.
struct DeviceResult {
  std::string open_error;     // set when no device could be opened
  bool aborted = false;
  std::string aborted_phase;
  std::string lost;           // a device call found the GPU gone
  std::vector<Check> checks;
  uint64_t memory_errors = 0, compute_errors = 0, nan_count = 0;
  std::vector<MemErrorRecord> memory_error_samples;
  Rates rates;
  std::optional<TimeMs> stress_begin, stress_end;
  // The square wave and the steady load of the peer checks (level 2).
  std::optional<TimeMs> transients_begin, transients_end;
  std::optional<TimeMs> steady_begin, steady_end;
};

// Runs on the GPU's own thread. Never throws: every outcome lands in
// `result`, and `status->done` is set last.
void RunDeviceWork(gpu::ComputeBackend& backend, const gpu::GpuInfo& gpu,
                   const BurnInOptions& options, host::Clock& clock, std::stop_token stop,
                   DeviceStatus* status, DeviceResult* result);

// The levels' device work; the functions are spread over device_run.cc
// (level 1 and the plumbing), memory_level.cc and stress_level.cc.
class DeviceRun {
 public:
  DeviceRun(gpu::ComputeDevice& device, const gpu::GpuInfo& gpu, const BurnInOptions& options,
            host::Clock& clock, std::stop_token stop, DeviceStatus* status, DeviceResult* result);

  // Each returns kAborted when stopped and kUnavailable when the GPU is gone;
  // a check that merely fails lets the work go on.
  Status Level1();
  Status Level2();
  Status Level3();
  // Level 2 and up, after the last level's work (so that level 3's stress
  // meets a compute fault first): the load swings and the steady load of the
  // peer checks (transient_level.cc).
  Status Requalification();

 private:
  // Progress units: level 1 one, level 2 one per memory pattern and one per
  // other measurement, level 3 nine times the rest, spread over its time.
  static constexpr double kLevel1Units = 1, kLevel2Units = 15;
  static constexpr double kStressShareOfUnits = 9;

  void Publish(const std::string& phase, double partial_units = 0,
               std::optional<double> rate = std::nullopt, const std::string& unit = "");
  void Done(double units) { units_done_ += units; }
  void Add(Check check) { result_->checks.push_back(std::move(check)); }
  // A failed device call: kError check (work goes on, returns Ok) or, when
  // aborted or the GPU is gone, the status that ends the work.
  Status Failed(const std::string& check, int level, const Status& status);

  // level 2 parts (memory_level.cc)
  Status MemoryTest();
  Status Copies();
  Status MemoryBandwidth();
  Status Gemm();
  std::optional<double> NominalMemoryGbs() const;

  // the load swings and steady load (transient_level.cc)
  Status PowerTransients();
  Status PeerLoad();
  // Runs fp32 stress batches of about `batch_ms` each until `until`; a
  // wrong or NaN result fails the check `name`.
  Status LoadUntil(TimeMs until, DurationMs batch_ms, const char* name);

  // level 3 parts (stress_level.cc)
  Status StressPrecision(gpu::Precision precision, TimeMs until, double units);

  gpu::ComputeDevice& device_;
  const gpu::GpuInfo& gpu_;
  const BurnInOptions& options_;
  host::Clock& clock_;
  std::stop_token stop_;
  DeviceStatus* status_;
  DeviceResult* result_;
  double units_total_ = 0, units_done_ = 0;
  uint64_t free_bytes_ = 0;
};

}  // namespace gpuherd::burnin
