// Level 2's load swings and steady load, for the requalification of cards
// with a past (ex-mining): a full/idle square wave at a few hertz, which trips
// weak power supplies and VRMs where gpu-burn's steady load does not, then a
// few seconds of steady load whose clocks and power the runner holds against
// the card's peers (requalify_checks.h judges both from the readings).
#include <algorithm>

#include <fmt/format.h>

#include "burnin/device_run.h"

namespace gpuherd::burnin {
namespace {

// Small matrices: one batch must fit well inside half a period (125 ms at 4 Hz).
constexpr int kWaveN = 2048;
constexpr int kMinWaveN = 256;

}  // namespace

Status DeviceRun::Requalification() {
  GPUHERD_RETURN_IF_ERROR(PowerTransients());
  return PeerLoad();
}

Status DeviceRun::LoadUntil(TimeMs until, DurationMs batch_ms, const char* name) {
  int iterations = 1;
  uint64_t mismatches = 0, nans = 0;
  auto report = [&] {
    if (mismatches == 0 && nans == 0) return;
    Check c;
    c.name = std::string(name) + ".results";
    c.level = 2;
    c.outcome = CheckOutcome::kFail;
    c.reason = mismatches ? "compute_mismatch" : "nan";
    c.values["mismatches"] = static_cast<double>(mismatches);
    c.values["nans"] = static_cast<double>(nans);
    c.message = fmt::format("{} wrong and {} NaN/Inf result elements under this load", mismatches, nans);
    Add(std::move(c));
  };
  while (clock_.Now() < until) {
    auto batch = device_.Stress(gpu::Precision::kFp32, iterations, stop_);
    if (!batch.ok()) {
      report();
      return batch.status();
    }
    mismatches += batch->mismatches;
    nans += batch->nans;
    result_->compute_errors += batch->mismatches;
    result_->nan_count += batch->nans;
    if (batch->seconds <= 0) {
      iterations = std::min(iterations * 2, 1'000'000);  // too quick to time: a bigger batch
    } else {
      const double per_iteration_ms = batch->seconds * 1000 / batch->iterations;
      const double left_ms = static_cast<double>(until - clock_.Now());
      iterations = std::clamp(static_cast<int>(std::min<double>(batch_ms, left_ms) / per_iteration_ms), 1, 1'000'000);
    }
  }
  report();
  return Status::Ok();
}

Status DeviceRun::PowerTransients() {
  const std::vector<LoadPhase> phases = SquareWave(options_.transients);
  if (phases.empty()) {
    Done(1);
    return Status::Ok();
  }
  Publish("power_transients");
  Status prepared = InvalidArgument("");
  for (int n = kWaveN; n >= kMinWaveN && prepared.code() == Code::kInvalidArgument; n /= 2) {
    prepared = device_.PrepareStress(gpu::Precision::kFp32, n);
  }
  if (!prepared.ok()) {
    Done(1);
    return Failed("power_transients", 2, prepared);
  }
  const TimeMs begin = clock_.Now();
  result_->transients_begin = begin;
  const DurationMs half = static_cast<DurationMs>(500.0 / options_.transients.frequency_hz);
  Status status;
  for (size_t i = 0; i < phases.size() && status.ok(); ++i) {
    const TimeMs end = begin + (i + 1 < phases.size() ? phases[i + 1].start : options_.transients.duration);
    if (phases[i].full) {
      status = LoadUntil(end, std::max<DurationMs>(1, half / 4), "power_transients");
    } else {
      device_.Idle();
      while (status.ok() && clock_.Now() < end) {
        if (stop_.stop_requested()) status = Aborted("stopped on request");
        else clock_.SleepUntil(end);
      }
    }
    Publish("power_transients", static_cast<double>(i + 1) / phases.size());
  }
  device_.Idle();
  result_->transients_end = clock_.Now();
  Done(1);
  // A card lost under the swings is the runner's "power_transients" failure
  // (it judges the readings); no second check says the same.
  if (status.code() == Code::kUnavailable) {
    result_->lost = status.message();
    return status;
  }
  if (!status.ok()) return Failed("power_transients", 2, status);
  return Status::Ok();
}

Status DeviceRun::PeerLoad() {
  if (options_.peer_load <= 0) {
    Done(1);
    return Status::Ok();
  }
  Publish("peer_load");
  Status prepared = device_.PrepareStress(gpu::Precision::kFp32, kWaveN);
  if (!prepared.ok()) {
    Done(1);
    return Failed("peer_clock", 2, prepared);
  }
  const TimeMs begin = clock_.Now();
  result_->steady_begin = begin;
  Status status = LoadUntil(begin + options_.peer_load, 250, "peer_load");
  result_->steady_end = clock_.Now();
  device_.Idle();
  Done(1);
  if (!status.ok()) return Failed("peer_clock", 2, status);
  return Status::Ok();
}

}  // namespace gpuherd::burnin
