// gpu::ComputeBackend on the CUDA driver API: libcuda opened with dlopen, the
// embedded kernels (kernel_images.h) loaded as a module into a context of
// each device's own. No CUDA toolkit is needed to build or run.
//
// Failure: every CUDA error becomes a Status naming the call, the CUDA error
// (CUDA_ERROR_...) and the GPU (index and UUID); nothing aborts or throws. A
// context that faulted (an illegal address, an uncorrectable ECC error) stays
// broken, so every later call on that device fails the same way; open the
// device again to retry.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "core/status.h"
#include "gpu/compute.h"
#include "gpu/cuda/cuda_library.h"

namespace gpuherd::gpu::cuda {

// kUnavailable with the reason when libcuda is absent ($GPUHERD_CUDA_LIBRARY
// names another), cuInit fails, or the kernels were not built.
Result<std::unique_ptr<gpu::ComputeBackend>> OpenCudaComputeBackend();

class CudaComputeBackend;

// One GPU's compute side. Owns its own context (created in Open, destroyed
// here) and pushes it around every call, so it may be used from any one
// thread at a time.
class CudaComputeDevice : public gpu::ComputeDevice {
 public:
  CudaComputeDevice(const CudaComputeDevice&) = delete;
  CudaComputeDevice& operator=(const CudaComputeDevice&) = delete;
  ~CudaComputeDevice() override;

  bool Supports(Precision precision) const override;
  Result<MemoryInfo> Memory() override;
  Result<uint64_t> RoundTrip(uint64_t bytes) override;
  // `bytes` is rounded down to a multiple of 16 (at least 16).
  Result<MemTestPass> MemTest(MemPattern pattern, uint64_t bytes, uint64_t seed,
                              size_t max_errors, std::stop_token stop) override;
  // Device to device counts each byte read and each byte written, as
  // MemoryBandwidth does.
  Result<double> CopyBandwidth(CopyKind kind, uint64_t bytes, int repeats) override;
  Result<double> MemoryBandwidth(uint64_t bytes, int repeats) override;
  // 1 <= n <= 1024; runs the stress kernel (zero-padded to a multiple of 128)
  // and compares with a double-precision CPU product: an element fails when
  // |gpu - cpu| > 1e-4 * sum_k |a_ik * b_kj|; max_rel_error uses that sum too.
  Result<GemmCheck> CheckedGemm(int n) override;
  // n is rounded up to a multiple of 128 (128..32768); four n x n matrices
  // stay allocated until the next PrepareStress or the device's end. BF16
  // (compute capability 8.0 and newer, with the nvcc-built module) multiplies
  // on the tensor cores and keeps its results in FP32.
  Status PrepareStress(Precision precision, int n) override;
  Result<StressBatch> Stress(Precision precision, int iterations, std::stop_token stop) override;

  // Which image the module came from: "fatbin" (native code) or "ptx sm_60"
  // (compiled by the driver at load time).
  const std::string& module_image() const { return module_image_; }
  int sm_count() const { return sm_count_; }
  // The stress size after rounding; 0 before PrepareStress.
  int stress_n() const { return stress_n_; }

 private:
  friend class CudaComputeBackend;
  class ContextScope;
  class DeviceBuffer;
  struct StressState;

  CudaComputeDevice(std::shared_ptr<const CudaLibrary> library, const GpuInfo& gpu);
  Status Load(CUdevice device);
  Status Check(CUresult result, const std::string& what) const;
  Result<CUfunction> Function(const std::string& name) const;
  // Grid for a grid-stride kernel over `items` work items of one thread each.
  unsigned GridFor(uint64_t items) const;
  Status Launch(const std::string& name, unsigned grid_x, unsigned grid_y, unsigned block_x,
                unsigned block_y, void** params);
  Result<DeviceBuffer> Allocate(uint64_t bytes, const char* what);
  // One stress product of the prepared precision into device memory at `c`.
  Status LaunchStressProduct(uint64_t c);

  std::shared_ptr<const CudaLibrary> library_;
  const CudaApi& api_;
  std::string label_;  // "GPU 0 (GPU-8c6b...)"
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
  std::string module_image_;
  std::map<std::string, CUfunction> functions_;
  int sm_count_ = 1;
  int cc_major_ = 0;
  int cc_minor_ = 0;
  int stress_n_ = 0;
  std::unique_ptr<StressState> stress_;
};

class CudaComputeBackend : public gpu::ComputeBackend {
 public:
  // `library` has been cuInit'ed.
  explicit CudaComputeBackend(std::shared_ptr<const CudaLibrary> library)
      : library_(std::move(library)) {}

  std::string name() const override { return "cuda"; }
  bool simulated() const override { return false; }
  // Matches gpu.uuid against cuDeviceGetUuid's (NVML's spelling, any case).
  Result<std::unique_ptr<ComputeDevice>> Open(const GpuInfo& gpu) override;

 private:
  std::shared_ptr<const CudaLibrary> library_;
};

}  // namespace gpuherd::gpu::cuda
