#include "burnin/device_run.h"

#include <exception>

#include <fmt/format.h>

namespace gpuherd::burnin {
namespace {

constexpr uint64_t kRoundTripBytes = 64ull << 20;

}  // namespace

DeviceRun::DeviceRun(gpu::ComputeDevice& device, const gpu::GpuInfo& gpu,
                     const BurnInOptions& options, host::Clock& clock, std::stop_token stop,
                     DeviceStatus* status, DeviceResult* result)
    : device_(device),
      gpu_(gpu),
      options_(options),
      clock_(clock),
      stop_(std::move(stop)),
      status_(status),
      result_(result) {
  units_total_ = kLevel1Units;
  if (options.level >= 2) units_total_ += kLevel2Units;
  if (options.level >= 3) units_total_ += kStressShareOfUnits * (kLevel1Units + kLevel2Units);
}

void DeviceRun::Publish(const std::string& phase, double partial_units, std::optional<double> rate,
                        const std::string& unit) {
  std::lock_guard lock(status_->mu);
  status_->phase = phase;
  status_->fraction = std::min(1.0, (units_done_ + partial_units) / units_total_);
  status_->rate = rate;
  status_->rate_unit = unit;
  status_->errors = result_->memory_errors + result_->compute_errors + result_->nan_count;
  if (phase != "level1") status_->loaded = true;
}

Status DeviceRun::Failed(const std::string& check, int level, const Status& status) {
  if (status.code() == Code::kAborted) return status;
  Check c;
  c.name = check;
  c.level = level;
  if (status.code() == Code::kUnavailable) {
    c.outcome = CheckOutcome::kFail;
    c.reason = "gpu_lost";
    c.message = "the GPU stopped answering: " + status.message();
    result_->lost = status.message();
    Add(std::move(c));
    return status;
  }
  c.outcome = CheckOutcome::kError;
  c.reason = "device_error";
  c.message = "could not run: " + status.ToString();
  Add(std::move(c));
  return Status::Ok();
}

Status DeviceRun::Level1() {
  Publish("level1");
  auto memory = device_.Memory();
  if (!memory.ok()) return Failed("roundtrip", 1, memory.status());
  free_bytes_ = memory->free_bytes;
  const uint64_t bytes = std::min(kRoundTripBytes, free_bytes_ / 2);
  auto bad = device_.RoundTrip(bytes);
  if (!bad.ok()) return Failed("roundtrip", 1, bad.status());
  Check check;
  check.name = "roundtrip";
  check.level = 1;
  check.values["bytes"] = static_cast<double>(bytes);
  check.values["mismatched_bytes"] = static_cast<double>(*bad);
  if (*bad > 0) {
    check.outcome = CheckOutcome::kFail;
    check.reason = "memory_mismatch";
    check.message = fmt::format("{} of {} bytes came back different after a host -> device -> "
                                "host copy: device memory or the link corrupts data", *bad, bytes);
    result_->memory_errors += *bad;
  }
  Add(std::move(check));
  Done(kLevel1Units);
  return Status::Ok();
}

Status DeviceRun::Level3() {
  std::vector<gpu::Precision> extra;
  for (gpu::Precision p : {gpu::Precision::kFp16, gpu::Precision::kBf16}) {
    if (device_.Supports(p)) extra.push_back(p);
  }
  // FP32 is what the throughput reference compares; the tensor-core
  // precisions get a share where the card has them.
  constexpr double kExtraShare = 0.15;
  const double fp32_share = extra.empty() ? 1.0 : 1.0 - kExtraShare * extra.size();
  const double units = kStressShareOfUnits * (kLevel1Units + kLevel2Units);
  const TimeMs begin = clock_.Now();
  result_->stress_begin = begin;
  TimeMs until = begin + static_cast<DurationMs>(options_.stress_duration * fp32_share);
  Status status = StressPrecision(gpu::Precision::kFp32, until, units * fp32_share);
  for (size_t i = 0; i < extra.size() && status.ok(); ++i) {
    until = i + 1 == extra.size()
                ? begin + options_.stress_duration
                : until + static_cast<DurationMs>(options_.stress_duration * kExtraShare);
    status = StressPrecision(extra[i], until, units * kExtraShare);
  }
  result_->stress_end = clock_.Now();
  return status;
}

void RunDeviceWork(gpu::ComputeBackend& backend, const gpu::GpuInfo& gpu,
                   const BurnInOptions& options, host::Clock& clock, std::stop_token stop,
                   DeviceStatus* status, DeviceResult* result) {
  try {
    auto device = backend.Open(gpu);
    if (!device.ok()) {
      result->open_error = device.status().message();
    } else {
      DeviceRun run(**device, gpu, options, clock, stop, status, result);
      Status done;
      for (int level = 1; level <= options.level && done.ok(); ++level) {
        if (stop.stop_requested()) {
          done = Aborted("stopped on request");
          break;
        }
        done = level == 1 ? run.Level1() : level == 2 ? run.Level2() : run.Level3();
      }
      if (done.ok() && options.level >= 2) done = run.Requalification();
      if (done.code() == Code::kAborted) {
        result->aborted = true;
        std::lock_guard lock(status->mu);
        result->aborted_phase = status->phase;
      }
    }
  } catch (const std::exception& e) {
    result->open_error = std::string("internal error: ") + e.what();
  } catch (...) {
    result->open_error = "internal error";
  }
  std::lock_guard lock(status->mu);
  status->phase = result->aborted ? "aborted" : "done";
  status->fraction = result->aborted || !result->open_error.empty() ? status->fraction : 1.0;
  status->done = true;
}

}  // namespace gpuherd::burnin
