// The sampler: a thread that reads every GPU of a Driver on a fixed grid of
// ticks and hands each round to a callback.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "gpu/driver.h"
#include "gpu/types.h"
#include "host/clock.h"

namespace gpuherd::telemetry {

constexpr DurationMs kDefaultSampleInterval = 5 * kSecondMs;
constexpr DurationMs kMinSampleInterval = 100;

// One GPU's answer in a round; an error means the GPU did not answer.
struct GpuReading {
  int index = 0;
  Result<gpu::GpuSample> sample = Unavailable("not sampled");
};

struct SampleRound {
  TimeMs time = 0;          // when the round started (a tick of the grid)
  std::vector<GpuReading> readings;
  DurationMs took = 0;      // time spent reading the driver, on the sampler's clock
  uint64_t skipped_ticks = 0;  // ticks missed since the previous round
};

struct SamplerOptions {
  DurationMs interval = kDefaultSampleInterval;  // at least kMinSampleInterval
};

// Tick k is due at start + k * interval, so the grid does not drift however
// long a round takes. A round that overruns one or more ticks makes the
// sampler wait for the next tick still ahead rather than run the missed ones
// back to back; SampleRound::skipped_ticks counts them.
//
// Threading: the Driver is used only on the sampler thread while it runs
// (Driver is not thread-safe), so the caller must not touch it between Start()
// and Stop(). The callback runs on the sampler thread and must be cheap (post
// the round to another thread); it must not call Start/Stop.
class Sampler {
 public:
  using Callback = std::function<void(SampleRound)>;

  // `driver` and `clock` must outlive the Sampler. Every GPU of `fleet` (as
  // returned by driver->Discover()) is read each round. Fails with
  // kInvalidArgument for an interval below kMinSampleInterval.
  static Result<std::unique_ptr<Sampler>> Create(gpu::Driver* driver, host::Clock* clock,
                                                 const gpu::Fleet& fleet,
                                                 SamplerOptions options = {});
  ~Sampler();  // Stops the thread.

  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Starts the thread; its first round is taken at once (tick 0 = now).
  // kFailedPrecondition when already running.
  Status Start(Callback callback);
  // Wakes the thread from its sleep and joins it; a round in progress is
  // finished first. Safe to call twice and when never started.
  void Stop();
  bool running() const { return thread_.joinable(); }

  // Reads every GPU once on the calling thread (the CLI without a daemon,
  // benchmarks). kFailedPrecondition while the thread runs.
  Result<SampleRound> SampleOnce(TimeMs now);

  DurationMs interval() const { return interval_; }

 private:
  Sampler(gpu::Driver* driver, host::Clock* clock, std::vector<int> indices, DurationMs interval);
  SampleRound ReadAll(TimeMs now);
  void Run(Callback callback);

  gpu::Driver* driver_;
  host::Clock* clock_;
  std::vector<int> indices_;
  DurationMs interval_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::future<void> exited_;  // ready once Run has returned
};

}  // namespace gpuherd::telemetry
