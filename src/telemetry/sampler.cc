#include "telemetry/sampler.h"

#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

namespace gpuherd::telemetry {

Result<std::unique_ptr<Sampler>> Sampler::Create(gpu::Driver* driver, host::Clock* clock,
                                                 const gpu::Fleet& fleet,
                                                 SamplerOptions options) {
  if (driver == nullptr || clock == nullptr) {
    return InvalidArgument("sampler needs a GPU driver and a clock");
  }
  if (options.interval < kMinSampleInterval) {
    return InvalidArgument("sampling interval " + std::to_string(options.interval) +
                           "ms is too short; use at least " +
                           std::to_string(kMinSampleInterval) + "ms");
  }
  std::vector<int> indices;
  indices.reserve(fleet.gpus.size());
  for (const gpu::GpuInfo& info : fleet.gpus) indices.push_back(info.index);
  return std::unique_ptr<Sampler>(
      new Sampler(driver, clock, std::move(indices), options.interval));
}

Sampler::Sampler(gpu::Driver* driver, host::Clock* clock, std::vector<int> indices,
                 DurationMs interval)
    : driver_(driver), clock_(clock), indices_(std::move(indices)), interval_(interval) {}

Sampler::~Sampler() { Stop(); }

Status Sampler::Start(Callback callback) {
  if (running()) return FailedPrecondition("the sampler is already running");
  if (!callback) return InvalidArgument("the sampler needs a callback for its rounds");
  stop_ = false;
  std::promise<void> exited;
  exited_ = exited.get_future();
  thread_ = std::thread([this, callback = std::move(callback), exited = std::move(exited)]() mutable {
    Run(std::move(callback));
    exited.set_value();
  });
  return Status::Ok();
}

void Sampler::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  // Clock::Wake reaches only a thread already asleep: one that checked stop_
  // just before it was set and is about to sleep would miss a single Wake and
  // sleep a whole interval (forever on a FakeClock). So wake until it exits.
  do {
    clock_->Wake();
  } while (exited_.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready);
  thread_.join();
}

Result<SampleRound> Sampler::SampleOnce(TimeMs now) {
  if (running()) {
    return FailedPrecondition("cannot sample on demand while the sampler thread owns the driver");
  }
  return ReadAll(now);
}

SampleRound Sampler::ReadAll(TimeMs now) {
  SampleRound round;
  round.time = now;
  round.readings.reserve(indices_.size());
  TimeMs began = clock_->Now();
  for (int index : indices_) {
    GpuReading reading{index, Unavailable("not sampled")};
    try {
      reading.sample = driver_->Sample(index, now);
    } catch (const std::exception& e) {
      reading.sample = Internal(std::string("driver failed: ") + e.what());
    } catch (...) {
      reading.sample = Internal("driver failed with an unknown exception");
    }
    round.readings.push_back(std::move(reading));
  }
  round.took = clock_->Now() - began;
  return round;
}

void Sampler::Run(Callback callback) {
  TimeMs start = clock_->Now();
  int64_t tick = 0;
  uint64_t skipped = 0;
  while (!stop_) {
    TimeMs due = start + tick * interval_;
    if (!clock_->SleepUntil(due)) continue;  // woken early: re-check stop_
    if (stop_) break;

    SampleRound round = ReadAll(clock_->Now());
    round.skipped_ticks = skipped;
    try {
      callback(std::move(round));
    } catch (const std::exception& e) {
      spdlog::error("sampler: the round callback failed: {}", e.what());
    } catch (...) {
      spdlog::error("sampler: the round callback failed with an unknown exception");
    }

    TimeMs end = clock_->Now();
    if (end < due - interval_) {
      // The wall clock stepped back by more than a tick: waiting for the old
      // grid would stall sampling, so the grid restarts at now.
      start = end;
      tick = 0;
      skipped = 0;
      continue;
    }
    int64_t next = tick + 1;
    int64_t first_ahead = (end - start + interval_ - 1) / interval_;  // ceil
    if (first_ahead > next) {
      skipped = static_cast<uint64_t>(first_ahead - next);
      next = first_ahead;
    } else {
      skipped = 0;
    }
    tick = next;
  }
}

}  // namespace gpuherd::telemetry
