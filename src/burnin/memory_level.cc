// Level 2's device work: the memory test with every pattern, host<->device
// and device-to-device copies, memory bandwidth and a checked GEMM.
#include <algorithm>

#include <fmt/format.h>

#include "burnin/device_run.h"
#include "burnin/pcie.h"
#include "gpu/catalog.h"

namespace gpuherd::burnin {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kCopyBytes = 256 * kMiB;
constexpr int kCopyRepeats = 8;
constexpr uint64_t kBandwidthBytes = 1024 * kMiB;
constexpr int kBandwidthRepeats = 10;
constexpr int kGemmN = 512;
// Shares of the catalogue's memory bandwidth below which a check warns. A
// read-write kernel reaches 80-90 % of the data sheet; a device-to-device
// copy moves each byte twice, so about 40 %.
constexpr double kMinMemoryShare = 0.5;
constexpr double kMinD2dShare = 0.3;

Check Measured(const std::string& name, double gbs) {
  Check check;
  check.name = name;
  check.level = 2;
  check.values["gbs"] = gbs;
  return check;
}

}  // namespace

Status DeviceRun::Level2() {
  GPUHERD_RETURN_IF_ERROR(MemoryTest());
  GPUHERD_RETURN_IF_ERROR(Copies());
  GPUHERD_RETURN_IF_ERROR(MemoryBandwidth());
  return Gemm();
}

std::optional<double> DeviceRun::NominalMemoryGbs() const {
  const gpu::GpuModel* model = gpu::FindModel(gpu_.name);
  if (!model) return std::nullopt;
  return model->mem_bandwidth_gbs;
}

Status DeviceRun::MemoryTest() {
  auto memory = device_.Memory();
  if (!memory.ok()) return Failed("memtest", 2, memory.status());
  free_bytes_ = memory->free_bytes;
  const uint64_t bytes =
      static_cast<uint64_t>(static_cast<double>(free_bytes_) * options_.memtest_fraction) / kMiB * kMiB;
  double traffic = 0, seconds = 0;
  for (gpu::MemPattern pattern : gpu::AllMemPatterns()) {
    const std::string name = std::string("memtest.") + gpu::MemPatternName(pattern);
    Publish(name);
    auto pass = device_.MemTest(pattern, bytes, options_.seed, options_.max_memory_error_samples, stop_);
    if (!pass.ok()) {
      GPUHERD_RETURN_IF_ERROR(Failed(name, 2, pass.status()));
      Done(1);
      continue;
    }
    traffic += pass->bandwidth_gbs * pass->seconds;
    seconds += pass->seconds;
    Check check = Measured(name, pass->bandwidth_gbs);
    check.values["bytes"] = static_cast<double>(pass->bytes_tested);
    check.values["free_fraction"] = static_cast<double>(pass->bytes_tested) / free_bytes_;
    check.values["errors"] = static_cast<double>(pass->error_count);
    if (pass->error_count > 0) {
      check.outcome = CheckOutcome::kFail;
      check.reason = "memory_mismatch";
      const gpu::MemError* first = pass->errors.empty() ? nullptr : &pass->errors.front();
      check.message = fmt::format("{} read{} of memory came back wrong", pass->error_count,
                                  pass->error_count == 1 ? "" : "s");
      if (first) {
        check.message += fmt::format(
            "; first at 0x{:x} (offset 0x{:x}): expected 0x{:08x}, read 0x{:08x}, bits 0x{:08x}",
            first->address, first->offset, first->expected, first->read, first->xor_bits());
      }
      check.message += ": the card's memory is faulty; keep work off it";
      result_->memory_errors += pass->error_count;
      for (const gpu::MemError& e : pass->errors) {
        if (result_->memory_error_samples.size() >= options_.max_memory_error_samples) break;
        result_->memory_error_samples.push_back(
            {gpu::MemPatternName(pattern), e.address, e.offset, e.expected, e.read, e.xor_bits()});
      }
    }
    Add(std::move(check));
    Done(1);
  }
  if (seconds > 0) result_->rates.memtest_gbs = traffic / seconds;
  return Status::Ok();
}

Status DeviceRun::Copies() {
  const uint64_t bytes = std::min(kCopyBytes, free_bytes_ / 4);
  // 0 when the driver does not say what the link should be.
  const double link = gpu_.max_pcie_gen && gpu_.max_pcie_width
                          ? PcieLinkGbs(*gpu_.max_pcie_gen, *gpu_.max_pcie_width)
                          : 0;
  for (gpu::CopyKind kind : {gpu::CopyKind::kHostToDevice, gpu::CopyKind::kDeviceToHost,
                             gpu::CopyKind::kDeviceToDevice}) {
    const std::string name = std::string("copy.") + gpu::CopyKindName(kind);
    Publish(name);
    auto rate = device_.CopyBandwidth(kind, bytes, kCopyRepeats);
    if (!rate.ok()) {
      GPUHERD_RETURN_IF_ERROR(Failed(name, 2, rate.status()));
      Done(1);
      continue;
    }
    Check check = Measured(name, *rate);
    if (kind == gpu::CopyKind::kDeviceToDevice) {
      result_->rates.d2d_gbs = *rate;
      if (auto nominal = NominalMemoryGbs()) {
        check.values["expected_min_gbs"] = kMinD2dShare * *nominal;
        if (*rate < kMinD2dShare * *nominal) {
          check.outcome = CheckOutcome::kWarn;
          check.reason = "d2d_bandwidth_low";
          check.message = fmt::format("device-to-device copies at {:.0f} GB/s, under {:.0f} GB/s "
                                      "for a {} ({:.0f} GB/s memory)", *rate,
                                      kMinD2dShare * *nominal, gpu_.name, *nominal);
        }
      }
    } else {
      (kind == gpu::CopyKind::kHostToDevice ? result_->rates.h2d_gbs : result_->rates.d2h_gbs) = *rate;
      if (link > 0) {
        check.values["link_gbs"] = link;
        check.values["expected_min_gbs"] = kMinCopyShareOfLink * link;
        if (*rate < kMinCopyShareOfLink * link) {
          check.outcome = CheckOutcome::kWarn;
          check.reason = "copy_bandwidth_low";
          check.message = fmt::format(
              "{:.1f} GB/s, under {:.0f} % of the {:.1f} GB/s a gen {} x{} link carries: the link "
              "runs narrower or slower than it should, or the host's memory or IOMMU holds it back",
              *rate, 100 * kMinCopyShareOfLink, link, *gpu_.max_pcie_gen, *gpu_.max_pcie_width);
        }
      }
    }
    Add(std::move(check));
    Done(1);
  }
  return Status::Ok();
}

Status DeviceRun::MemoryBandwidth() {
  Publish("membw");
  auto rate = device_.MemoryBandwidth(std::min(kBandwidthBytes, free_bytes_ / 4), kBandwidthRepeats);
  if (!rate.ok()) {
    Done(1);
    return Failed("membw", 2, rate.status());
  }
  result_->rates.mem_bandwidth_gbs = *rate;
  Check check = Measured("membw", *rate);
  if (auto nominal = NominalMemoryGbs()) {
    check.values["nominal_gbs"] = *nominal;
    if (*rate < kMinMemoryShare * *nominal) {
      check.outcome = CheckOutcome::kWarn;
      check.reason = "memory_bandwidth_low";
      check.message = fmt::format("{:.0f} GB/s, under half the {:.0f} GB/s of a {}", *rate,
                                  *nominal, gpu_.name);
    }
  }
  Add(std::move(check));
  Done(1);
  return Status::Ok();
}

Status DeviceRun::Gemm() {
  Publish("gemm");
  auto gemm = device_.CheckedGemm(kGemmN);
  Done(1);
  if (!gemm.ok()) return Failed("gemm", 2, gemm.status());
  Check check;
  check.name = "gemm";
  check.level = 2;
  check.values["n"] = gemm->n;
  check.values["mismatches"] = static_cast<double>(gemm->mismatches);
  check.values["nans"] = static_cast<double>(gemm->nans);
  check.values["max_rel_error"] = gemm->max_rel_error;
  if (gemm->mismatches > 0) {
    check.outcome = CheckOutcome::kFail;
    check.reason = "compute_mismatch";
    check.message = fmt::format("{} of {} elements of a {}x{} product differ from the CPU's "
                                "(largest relative error {:.2g})", gemm->mismatches,
                                gemm->n * gemm->n, gemm->n, gemm->n, gemm->max_rel_error);
  } else if (gemm->nans > 0) {
    check.outcome = CheckOutcome::kFail;
    check.reason = "nan";
    check.message = fmt::format("{} NaN or Inf elements in a {}x{} product of finite inputs",
                                gemm->nans, gemm->n, gemm->n);
  }
  result_->compute_errors += gemm->mismatches;
  result_->nan_count += gemm->nans;
  Add(std::move(check));
  return Status::Ok();
}

}  // namespace gpuherd::burnin
