// Level 3's device work: sustained matrix work in one precision whose every
// batch is verified (identical products must agree bit for bit).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "burnin/device_run.h"

namespace gpuherd::burnin {
namespace {

constexpr int kStressN = 8192;
constexpr int kMinStressN = 1024;
// A batch lasts about a second, so progress stays live and a stop request is
// met within one batch whatever the device does between checks.
constexpr double kTargetBatchSeconds = 1.0;
constexpr int kMaxIterations = 1'000'000;

}  // namespace

Status DeviceRun::StressPrecision(gpu::Precision precision, TimeMs until, double units) {
  const std::string name = std::string("stress.") + gpu::PrecisionName(precision);
  Publish(name);
  Status prepared;
  int n = kStressN;
  // Smaller cards get smaller matrices.
  for (; n >= kMinStressN; n /= 2) {
    prepared = device_.PrepareStress(precision, n);
    if (prepared.code() != Code::kInvalidArgument) break;
  }
  if (!prepared.ok()) {
    Done(units);
    return Failed(name, 3, prepared);
  }

  const TimeMs begin = clock_.Now();
  const double span = static_cast<double>(std::max<DurationMs>(1, until - begin));
  double flops = 0, seconds = 0;
  uint64_t mismatches = 0, nans = 0, batches = 0;
  int iterations = 1;
  double seconds_per_iteration = 0;
  Status status;
  for (TimeMs now = begin; now < until; now = clock_.Now()) {
    if (seconds_per_iteration > 0) {
      const double left = static_cast<double>(until - now) / kSecondMs;
      const double target = std::min(kTargetBatchSeconds, left);
      iterations = std::clamp(static_cast<int>(std::lround(target / seconds_per_iteration)), 1,
                              kMaxIterations);
    }
    auto batch = device_.Stress(precision, iterations, stop_);
    if (!batch.ok()) {
      status = batch.status();
      break;
    }
    ++batches;
    flops += batch->flops;
    seconds += batch->seconds;
    mismatches += batch->mismatches;
    nans += batch->nans;
    result_->compute_errors += batch->mismatches;
    result_->nan_count += batch->nans;
    if (batch->seconds > 0) seconds_per_iteration = batch->seconds / batch->iterations;
    const double tflops = batch->seconds > 0 ? batch->flops / batch->seconds / 1e12 : 0;
    Publish(name, units * static_cast<double>(clock_.Now() - begin) / span, tflops, "TFLOPS");
  }
  Done(units);

  const std::optional<double> achieved =
      seconds > 0 ? std::optional<double>(flops / seconds / 1e12) : std::nullopt;
  switch (precision) {
    case gpu::Precision::kFp32: result_->rates.fp32_tflops = achieved; break;
    case gpu::Precision::kFp16: result_->rates.fp16_tflops = achieved; break;
    case gpu::Precision::kBf16: result_->rates.bf16_tflops = achieved; break;
    case gpu::Precision::kFp64: result_->rates.fp64_tflops = achieved; break;
  }
  // Work done before a stop or a loss still counts: its errors are real.
  if (batches > 0) {
    Check check;
    check.name = name;
    check.level = 3;
    if (achieved) check.values["tflops"] = *achieved;
    check.values["matrix_n"] = n;
    check.values["batches"] = static_cast<double>(batches);
    check.values["seconds"] = seconds;
    check.values["mismatches"] = static_cast<double>(mismatches);
    check.values["nans"] = static_cast<double>(nans);
    if (mismatches > 0) {
      check.outcome = CheckOutcome::kFail;
      check.reason = "compute_mismatch";
      check.message = fmt::format("{} result elements differed between identical products in {} "
                                  "batches{}: the card computes wrong under load", mismatches,
                                  batches, nans ? fmt::format(" (and {} NaN/Inf)", nans) : "");
    } else if (nans > 0) {
      check.outcome = CheckOutcome::kFail;
      check.reason = "nan";
      check.message = fmt::format("{} NaN or Inf result elements from finite inputs in {} batches",
                                  nans, batches);
    }
    if (status.ok() || status.code() == Code::kAborted || check.outcome == CheckOutcome::kFail) {
      Add(std::move(check));
    }
  }
  if (!status.ok()) return Failed(name, 3, status);
  return Status::Ok();
}

}  // namespace gpuherd::burnin
