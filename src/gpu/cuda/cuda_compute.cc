#include "gpu/cuda/cuda_compute.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "gpu/cuda/kernel_images.h"
#include "gpu/cuda/memtest_plan.h"
#include "gpu/cuda/memtest_words.h"

namespace gpuherd::gpu::cuda {
namespace {

constexpr unsigned kBlockThreads = 256;
// Grid-stride kernels get this many blocks per SM: enough resident warps to
// saturate memory on every generation, without a cuOccupancy query.
constexpr unsigned kBlocksPerSm = 8;
constexpr int kGemmTile = 128;
constexpr int kMaxCheckedGemmN = 1024;
constexpr int kMaxStressN = 32768;
constexpr size_t kMaxErrorRecords = 1 << 16;
// compare_words' kinds.
constexpr uint32_t kCompareFp32 = 0;
constexpr uint32_t kCompareFp16 = 1;

std::string Lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

int RoundUp(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// The values CheckedGemm multiplies, in [-1, 1), the same on every run.
float HostUniform(uint64_t index, uint32_t seed) {
  const uint32_t bits = memtest::RandomSequenceWord(index, 0, seed, 0);
  return static_cast<float>(bits >> 8) * (1.0f / 8388608.0f) - 1.0f;
}

}  // namespace

// Makes the device's context current for one call and restores the caller's.
class CudaComputeDevice::ContextScope {
 public:
  explicit ContextScope(const CudaComputeDevice& device) : device_(device) {
    status_ = device.Check(device.api_.ctx_push_current(device.context_), "cuCtxPushCurrent");
  }
  ~ContextScope() {
    if (!status_.ok()) return;
    CUcontext popped = nullptr;
    device_.api_.ctx_pop_current(&popped);
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;
  const Status& status() const { return status_; }

 private:
  const CudaComputeDevice& device_;
  Status status_;
};

// Device memory freed when it goes out of scope; it must die while its
// context is current (declare it after the ContextScope).
class CudaComputeDevice::DeviceBuffer {
 public:
  DeviceBuffer(const CudaApi* api, CUdeviceptr pointer, uint64_t bytes)
      : api_(api), pointer_(pointer), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : api_(other.api_), pointer_(std::exchange(other.pointer_, 0)), bytes_(other.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer() {
    if (pointer_ != 0) api_->mem_free(pointer_);
  }
  CUdeviceptr get() const { return pointer_; }
  uint64_t bytes() const { return bytes_; }

 private:
  const CudaApi* api_;
  CUdeviceptr pointer_;
  uint64_t bytes_;
};

namespace {

// Pinned host memory, freed with its owner.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(const CudaApi& api) : api_(api) {}
  ~PinnedBuffer() {
    if (pointer_ != nullptr) api_.mem_free_host(pointer_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  CUresult Allocate(size_t bytes) { return api_.mem_alloc_host(&pointer_, bytes); }
  void* get() const { return pointer_; }

 private:
  const CudaApi& api_;
  void* pointer_ = nullptr;
};

// A pair of events around work on the default stream.
class EventTimer {
 public:
  explicit EventTimer(const CudaApi& api) : api_(api) {}
  ~EventTimer() {
    if (start_ != nullptr) api_.event_destroy(start_);
    if (end_ != nullptr) api_.event_destroy(end_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  CUresult Create() {
    CUresult result = api_.event_create(&start_, CU_EVENT_DEFAULT);
    return result != CUDA_SUCCESS ? result : api_.event_create(&end_, CU_EVENT_DEFAULT);
  }
  CUresult Start() { return api_.event_record(start_, nullptr); }
  CUresult Stop() { return api_.event_record(end_, nullptr); }
  // Waits for the end event; `seconds` is the device time between the two.
  CUresult Seconds(double* seconds) {
    CUresult result = api_.event_synchronize(end_);
    if (result != CUDA_SUCCESS) return result;
    float milliseconds = 0;
    result = api_.event_elapsed_time(&milliseconds, start_, end_);
    *seconds = milliseconds / 1000.0;
    return result;
  }

 private:
  const CudaApi& api_;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
};

}  // namespace

struct CudaComputeDevice::StressState {
  Precision precision = Precision::kFp32;
  DeviceBuffer a, b, reference, work, counters;
};

CudaComputeDevice::CudaComputeDevice(std::shared_ptr<const CudaLibrary> library,
                                     const GpuInfo& gpu)
    : library_(std::move(library)),
      api_(library_->api()),
      label_("GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ")") {}

CudaComputeDevice::~CudaComputeDevice() {
  if (context_ == nullptr) return;
  if (stress_ != nullptr || module_ != nullptr) {
    ContextScope scope(*this);
    if (scope.status().ok()) {
      stress_.reset();
      if (module_ != nullptr) api_.module_unload(module_);
    }
  }
  // Destroying the context frees whatever a failed scope left behind.
  api_.ctx_destroy(context_);
}

Status CudaComputeDevice::Check(CUresult result, const std::string& what) const {
  return library_->Check(result, label_ + ": " + what);
}

Status CudaComputeDevice::Load(CUdevice device) {
  GPUHERD_RETURN_IF_ERROR(
      Check(api_.ctx_create(&context_, CU_CTX_SCHED_BLOCKING_SYNC, device), "cuCtxCreate"));
  // cuCtxCreate made it current on this thread; every call pushes it itself.
  CUcontext popped = nullptr;
  GPUHERD_RETURN_IF_ERROR(Check(api_.ctx_pop_current(&popped), "cuCtxPopCurrent"));
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());

  GPUHERD_RETURN_IF_ERROR(Check(api_.device_get_attribute(
                                    &sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
                                "cuDeviceGetAttribute(multiprocessor count)"));
  GPUHERD_RETURN_IF_ERROR(Check(api_.device_get_attribute(
                                    &cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
                                "cuDeviceGetAttribute(compute capability)"));
  GPUHERD_RETURN_IF_ERROR(Check(api_.device_get_attribute(
                                    &cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
                                "cuDeviceGetAttribute(compute capability)"));
  sm_count_ = std::max(sm_count_, 1);

  // Native code first; the driver refuses it (CUDA_ERROR_NO_BINARY_FOR_GPU)
  // on a GPU it has no code for, Pascal among them, and then the PTX serves.
  std::string fatbin_error;
  const auto fatbin = KernelFatbin();
  if (!fatbin.empty()) {
    CUresult result = api_.module_load_data(&module_, fatbin.data());
    if (result == CUDA_SUCCESS) {
      module_image_ = "fatbin";
    } else {
      module_ = nullptr;
      fatbin_error = "; the fatbin was refused first: " + library_->ErrorText(result);
    }
  }
  if (module_ == nullptr) {
    CUresult result = api_.module_load_data(&module_, KernelPtx().data());
    if (result != CUDA_SUCCESS) {
      module_ = nullptr;
      return Check(result, "cuModuleLoadData(PTX for sm_60" + fatbin_error + ")");
    }
    module_image_ = "ptx sm_60";
  }
  for (const char* name : KernelEntryNames()) {
    CUfunction function = nullptr;
    GPUHERD_RETURN_IF_ERROR(Check(api_.module_get_function(&function, module_, name),
                                  std::string("cuModuleGetFunction(") + name + ") in the " +
                                      module_image_));
    functions_[name] = function;
  }
  return Status::Ok();
}

Result<CUfunction> CudaComputeDevice::Function(const std::string& name) const {
  auto it = functions_.find(name);
  if (it == functions_.end()) return Internal("no kernel named " + name + " was loaded");
  return it->second;
}

unsigned CudaComputeDevice::GridFor(uint64_t items) const {
  const uint64_t needed = (items + kBlockThreads - 1) / kBlockThreads;
  const uint64_t most = static_cast<uint64_t>(sm_count_) * kBlocksPerSm;
  return static_cast<unsigned>(std::clamp<uint64_t>(needed, 1, most));
}

Status CudaComputeDevice::Launch(const std::string& name, unsigned grid_x, unsigned grid_y,
                                 unsigned block_x, unsigned block_y, void** params) {
  auto function = Function(name);
  if (!function.ok()) return function.status();
  return Check(api_.launch_kernel(*function, grid_x, grid_y, 1, block_x, block_y, 1, 0, nullptr,
                                  params, nullptr),
               "cuLaunchKernel(" + name + ")");
}

Result<CudaComputeDevice::DeviceBuffer> CudaComputeDevice::Allocate(uint64_t bytes,
                                                                    const char* what) {
  CUdeviceptr pointer = 0;
  GPUHERD_RETURN_IF_ERROR(Check(api_.mem_alloc(&pointer, bytes),
                                "cuMemAlloc(" + std::to_string(bytes) + " bytes for " + what +
                                    ")"));
  return DeviceBuffer(&api_, pointer, bytes);
}

bool CudaComputeDevice::Supports(Precision precision) const {
  switch (precision) {
    case Precision::kFp32: return true;
    // fma.rn.f16x2 needs sm_53; the module's oldest target is sm_60.
    case Precision::kFp16: return cc_major_ >= 6;
    // BF16 WMMA needs sm_80, and only nvcc's code has it: the sm_60 PTX holds
    // a stub (kernels.cu), so a build without nvcc stresses no BF16.
    case Precision::kBf16: return cc_major_ >= 8 && module_image_ == "fatbin";
    case Precision::kFp64: return false;
  }
  return false;
}

Result<MemoryInfo> CudaComputeDevice::Memory() {
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  GPUHERD_RETURN_IF_ERROR(Check(api_.mem_get_info(&free_bytes, &total_bytes), "cuMemGetInfo"));
  return MemoryInfo{free_bytes, total_bytes};
}

Result<uint64_t> CudaComputeDevice::RoundTrip(uint64_t bytes) {
  if (bytes == 0) return InvalidArgument("round trip of 0 bytes: give a positive size");
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  std::vector<uint8_t> sent(bytes);
  for (uint64_t i = 0; i < bytes; ++i) {
    sent[i] = static_cast<uint8_t>(memtest::Mix32(static_cast<uint32_t>(i >> 2)) >> (8 * (i & 3)));
  }
  auto buffer = Allocate(bytes, "the round trip");
  if (!buffer.ok()) return buffer.status();
  GPUHERD_RETURN_IF_ERROR(
      Check(api_.memcpy_htod(buffer->get(), sent.data(), bytes), "cuMemcpyHtoD (round trip)"));
  std::vector<uint8_t> received(bytes);
  GPUHERD_RETURN_IF_ERROR(
      Check(api_.memcpy_dtoh(received.data(), buffer->get(), bytes), "cuMemcpyDtoH (round trip)"));
  uint64_t mismatches = 0;
  for (uint64_t i = 0; i < bytes; ++i) mismatches += sent[i] != received[i];
  return mismatches;
}

Result<MemTestPass> CudaComputeDevice::MemTest(MemPattern pattern, uint64_t bytes, uint64_t seed,
                                               size_t max_errors, std::stop_token stop) {
  const uint64_t tested = bytes / 16 * 16;
  if (tested == 0) {
    return InvalidArgument("memory test of " + std::to_string(bytes) +
                           " bytes: give at least 16 bytes");
  }
  const size_t records = std::min(max_errors, kMaxErrorRecords);
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  auto region = Allocate(tested, "the memory test");
  if (!region.ok()) return region.status();
  auto counter = Allocate(sizeof(unsigned long long), "the error counter");
  if (!counter.ok()) return counter.status();
  auto record_buffer =
      Allocate(std::max<size_t>(records, 1) * sizeof(memtest::MemErrorRecord), "error records");
  if (!record_buffer.ok()) return record_buffer.status();
  GPUHERD_RETURN_IF_ERROR(
      Check(api_.memset_d8(counter->get(), 0, sizeof(unsigned long long)), "cuMemsetD8"));

  const MemTestPlan plan = PlanMemTest(pattern, seed);
  const std::string function = WordFunctionName(plan.function);
  const std::string write_kernel = "memtest_write_" + function;
  const std::string check_kernel = "memtest_check_" + function;
  uint64_t base = region->get();
  uint64_t chunks = tested / 16;
  uint64_t counter_pointer = counter->get();
  uint64_t records_pointer = record_buffer->get();
  uint32_t max_records = static_cast<uint32_t>(records);
  const unsigned grid = GridFor(chunks);

  EventTimer timer(api_);
  GPUHERD_RETURN_IF_ERROR(Check(timer.Create(), "cuEventCreate"));
  GPUHERD_RETURN_IF_ERROR(Check(timer.Start(), "cuEventRecord"));
  for (const MemTestStep& step : plan.steps) {
    // One step at a time, so a stop request or a fault is seen within one pass
    // over the region.
    if (stop.stop_requested()) {
      return Aborted(label_ + ": memory test " + MemPatternName(pattern) + " stopped on request");
    }
    uint32_t a = step.a;
    uint32_t b = step.b;
    uint32_t flip = step.flip;
    uint32_t invert = step.invert ? 1 : 0;
    uint32_t descending = step.descending ? 1 : 0;
    if (step.kind == MemTestStep::Kind::kWrite) {
      void* params[] = {&base, &chunks, &a, &b, &flip};
      GPUHERD_RETURN_IF_ERROR(Launch(write_kernel, grid, 1, kBlockThreads, 1, params));
    } else {
      void* params[] = {&base,   &chunks,     &a,
                        &b,      &flip,       &invert,
                        &descending, &counter_pointer, &records_pointer,
                        &max_records};
      GPUHERD_RETURN_IF_ERROR(Launch(check_kernel, grid, 1, kBlockThreads, 1, params));
    }
    GPUHERD_RETURN_IF_ERROR(Check(api_.ctx_synchronize(),
                                  std::string("memory test ") + MemPatternName(pattern)));
  }
  GPUHERD_RETURN_IF_ERROR(Check(timer.Stop(), "cuEventRecord"));
  MemTestPass pass;
  pass.pattern = pattern;
  pass.bytes_tested = tested;
  GPUHERD_RETURN_IF_ERROR(Check(timer.Seconds(&pass.seconds), "cuEventElapsedTime"));

  unsigned long long error_count = 0;
  GPUHERD_RETURN_IF_ERROR(Check(api_.memcpy_dtoh(&error_count, counter->get(), sizeof(error_count)),
                                "cuMemcpyDtoH (error count)"));
  pass.error_count = error_count;
  const size_t stored = static_cast<size_t>(std::min<uint64_t>(error_count, records));
  if (stored > 0) {
    std::vector<memtest::MemErrorRecord> rows(stored);
    GPUHERD_RETURN_IF_ERROR(Check(
        api_.memcpy_dtoh(rows.data(), record_buffer->get(), stored * sizeof(rows[0])),
        "cuMemcpyDtoH (error records)"));
    for (const auto& row : rows) {
      pass.errors.push_back({row.address, row.address - base, row.expected, row.read});
    }
  }
  if (pass.seconds > 0) {
    pass.bandwidth_gbs =
        static_cast<double>(tested) * static_cast<double>(plan.TrafficFactor()) / pass.seconds / 1e9;
  }
  return pass;
}

Result<double> CudaComputeDevice::CopyBandwidth(CopyKind kind, uint64_t bytes, int repeats) {
  if (bytes == 0 || repeats < 1) {
    return InvalidArgument("copy bandwidth needs bytes > 0 and repeats >= 1");
  }
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  auto device = Allocate(bytes, "the copy test");
  if (!device.ok()) return device.status();
  PinnedBuffer host(api_);
  std::optional<DeviceBuffer> second;
  if (kind == CopyKind::kDeviceToDevice) {
    auto buffer = Allocate(bytes, "the copy test");
    if (!buffer.ok()) return buffer.status();
    second.emplace(std::move(buffer).value());
  } else {
    GPUHERD_RETURN_IF_ERROR(
        Check(host.Allocate(bytes), "cuMemAllocHost(" + std::to_string(bytes) + " bytes)"));
    std::memset(host.get(), 0x5a, bytes);
  }
  const std::string what = std::string("copy ") + CopyKindName(kind);
  auto copy = [&]() -> CUresult {
    switch (kind) {
      case CopyKind::kHostToDevice: return api_.memcpy_htod(device->get(), host.get(), bytes);
      case CopyKind::kDeviceToHost: return api_.memcpy_dtoh(host.get(), device->get(), bytes);
      case CopyKind::kDeviceToDevice: return api_.memcpy_dtod(second->get(), device->get(), bytes);
    }
    return CUDA_ERROR_INVALID_VALUE;
  };
  GPUHERD_RETURN_IF_ERROR(Check(copy(), what + " (warm-up)"));
  EventTimer timer(api_);
  GPUHERD_RETURN_IF_ERROR(Check(timer.Create(), "cuEventCreate"));
  GPUHERD_RETURN_IF_ERROR(Check(timer.Start(), "cuEventRecord"));
  for (int i = 0; i < repeats; ++i) GPUHERD_RETURN_IF_ERROR(Check(copy(), what));
  GPUHERD_RETURN_IF_ERROR(Check(timer.Stop(), "cuEventRecord"));
  double seconds = 0;
  GPUHERD_RETURN_IF_ERROR(Check(timer.Seconds(&seconds), "cuEventElapsedTime"));
  if (seconds <= 0) return Internal(label_ + ": " + what + " took no measurable time");
  const double moved = static_cast<double>(bytes) * repeats *
                       (kind == CopyKind::kDeviceToDevice ? 2.0 : 1.0);
  return moved / seconds / 1e9;
}

Result<double> CudaComputeDevice::MemoryBandwidth(uint64_t bytes, int repeats) {
  const uint64_t half = bytes / 2 / 16 * 16;
  if (half == 0 || repeats < 1) {
    return InvalidArgument("memory bandwidth needs bytes >= 32 and repeats >= 1");
  }
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  auto source = Allocate(half, "the bandwidth source");
  if (!source.ok()) return source.status();
  auto destination = Allocate(half, "the bandwidth destination");
  if (!destination.ok()) return destination.status();
  GPUHERD_RETURN_IF_ERROR(Check(api_.memset_d8(source->get(), 0x3c, half), "cuMemsetD8"));
  uint64_t from = source->get();
  uint64_t to = destination->get();
  uint64_t vectors = half / 16;
  void* params[] = {&from, &to, &vectors};
  const unsigned grid = GridFor(vectors);
  GPUHERD_RETURN_IF_ERROR(Launch("copy_f4", grid, 1, kBlockThreads, 1, params));  // warm-up
  EventTimer timer(api_);
  GPUHERD_RETURN_IF_ERROR(Check(timer.Create(), "cuEventCreate"));
  GPUHERD_RETURN_IF_ERROR(Check(timer.Start(), "cuEventRecord"));
  for (int i = 0; i < repeats; ++i) {
    GPUHERD_RETURN_IF_ERROR(Launch("copy_f4", grid, 1, kBlockThreads, 1, params));
  }
  GPUHERD_RETURN_IF_ERROR(Check(timer.Stop(), "cuEventRecord"));
  double seconds = 0;
  GPUHERD_RETURN_IF_ERROR(Check(timer.Seconds(&seconds), "memory bandwidth copy"));
  if (seconds <= 0) return Internal(label_ + ": the bandwidth copy took no measurable time");
  return 2.0 * static_cast<double>(half) * repeats / seconds / 1e9;
}

Result<GemmCheck> CudaComputeDevice::CheckedGemm(int n) {
  if (n < 1 || n > kMaxCheckedGemmN) {
    return InvalidArgument("checked GEMM size " + std::to_string(n) + ": give 1.." +
                           std::to_string(kMaxCheckedGemmN) +
                           " (the CPU reference is cubic in n)");
  }
  const int padded = RoundUp(n, kGemmTile);
  const size_t elements = static_cast<size_t>(padded) * padded;
  std::vector<float> a(elements, 0.0f);
  std::vector<float> b(elements, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      a[static_cast<size_t>(i) * padded + j] = HostUniform(static_cast<uint64_t>(i) * n + j, 1);
      b[static_cast<size_t>(i) * padded + j] = HostUniform(static_cast<uint64_t>(i) * n + j, 2);
    }
  }
  std::vector<float> c(elements, 0.0f);
  {
    ContextScope scope(*this);
    GPUHERD_RETURN_IF_ERROR(scope.status());
    const uint64_t bytes = elements * sizeof(float);
    auto da = Allocate(bytes, "the checked GEMM");
    if (!da.ok()) return da.status();
    auto db = Allocate(bytes, "the checked GEMM");
    if (!db.ok()) return db.status();
    auto dc = Allocate(bytes, "the checked GEMM");
    if (!dc.ok()) return dc.status();
    GPUHERD_RETURN_IF_ERROR(Check(api_.memcpy_htod(da->get(), a.data(), bytes), "cuMemcpyHtoD"));
    GPUHERD_RETURN_IF_ERROR(Check(api_.memcpy_htod(db->get(), b.data(), bytes), "cuMemcpyHtoD"));
    uint64_t pa = da->get();
    uint64_t pb = db->get();
    uint64_t pc = dc->get();
    int size = padded;
    void* params[] = {&pa, &pb, &pc, &size};
    const unsigned tiles = static_cast<unsigned>(padded / kGemmTile);
    GPUHERD_RETURN_IF_ERROR(Launch("sgemm_128x128x8", tiles, tiles, kBlockThreads, 1, params));
    GPUHERD_RETURN_IF_ERROR(Check(api_.ctx_synchronize(), "checked GEMM"));
    GPUHERD_RETURN_IF_ERROR(Check(api_.memcpy_dtoh(c.data(), dc->get(), bytes), "cuMemcpyDtoH"));
  }
  GemmCheck check;
  check.n = n;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      double exact = 0;
      double magnitude = 0;
      for (int k = 0; k < n; ++k) {
        const double product = static_cast<double>(a[static_cast<size_t>(i) * padded + k]) *
                               b[static_cast<size_t>(k) * padded + j];
        exact += product;
        magnitude += std::fabs(product);
      }
      const float got = c[static_cast<size_t>(i) * padded + j];
      if (!std::isfinite(got)) {
        ++check.nans;
        continue;
      }
      const double relative = magnitude > 0 ? std::fabs(got - exact) / magnitude
                                            : std::fabs(static_cast<double>(got));
      check.max_rel_error = std::max(check.max_rel_error, relative);
      if (relative > 1e-4) ++check.mismatches;
    }
  }
  return check;
}

Status CudaComputeDevice::LaunchStressProduct(uint64_t c) {
  uint64_t a = stress_->a.get();
  uint64_t b = stress_->b.get();
  void* params[] = {&a, &b, &c, &stress_n_};
  const unsigned tiles = static_cast<unsigned>(stress_n_ / kGemmTile);
  switch (stress_->precision) {
    case Precision::kFp32:
      return Launch("sgemm_128x128x8", tiles, tiles, kBlockThreads, 1, params);
    case Precision::kBf16:
      return Launch("bgemm_bf16_wmma", tiles, tiles, kBlockThreads, 1, params);
    case Precision::kFp16:
      return Launch("hgemm_f16x2", static_cast<unsigned>(stress_n_ / 32),
                    static_cast<unsigned>(stress_n_ / 16), 16, 16, params);
    case Precision::kFp64: break;
  }
  return Internal(std::string("no stress kernel for ") + PrecisionName(stress_->precision));
}

Status CudaComputeDevice::PrepareStress(Precision precision, int n) {
  if (!Supports(precision)) {
    std::string why;
    if (precision == Precision::kBf16) {
      why = "; BF16 needs compute capability 8.0 or newer (this GPU has " +
            std::to_string(cc_major_) + "." + std::to_string(cc_minor_) +
            ") and kernels built with nvcc (loaded: " + module_image_ + ")";
    }
    return InvalidArgument(std::string("this GPU's stress kernels do not support ") +
                           PrecisionName(precision) + why + " (fp32 always works)");
  }
  if (n < 1 || n > kMaxStressN) {
    return InvalidArgument("stress size " + std::to_string(n) + ": give 1.." +
                           std::to_string(kMaxStressN));
  }
  const int size = RoundUp(n, kGemmTile);
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  stress_.reset();
  stress_n_ = 0;
  const uint64_t elements = static_cast<uint64_t>(size) * size;
  // BF16 products accumulate and land in FP32.
  const uint64_t bytes = elements * (precision == Precision::kFp32 ? 4 : 2);
  const uint64_t result_bytes = elements * (precision == Precision::kFp16 ? 2 : 4);
  auto a = Allocate(bytes, "stress matrix A");
  if (!a.ok()) return a.status();
  auto b = Allocate(bytes, "stress matrix B");
  if (!b.ok()) return b.status();
  auto reference = Allocate(result_bytes, "the stress reference result");
  if (!reference.ok()) return reference.status();
  auto work = Allocate(result_bytes, "the stress result");
  if (!work.ok()) return work.status();
  auto counters = Allocate(2 * sizeof(unsigned long long), "stress counters");
  if (!counters.ok()) return counters.status();
  auto state = std::make_unique<StressState>(StressState{
      precision, std::move(a).value(), std::move(b).value(), std::move(reference).value(),
      std::move(work).value(), std::move(counters).value()});

  // Inputs are made on the device; B is scaled so FP16 sums stay far from
  // overflow (BF16 sums in FP32 and has FP32's range).
  const bool fp32 = precision == Precision::kFp32;
  const bool fp16 = precision == Precision::kFp16;
  const char* fill = fp32   ? "fill_uniform_f32"
                     : fp16 ? "fill_uniform_f16x2"
                            : "fill_uniform_bf16x2";
  uint64_t count = fp32 ? elements : elements / 2;
  for (uint32_t seed : {1u, 2u}) {
    uint64_t pointer = seed == 1 ? state->a.get() : state->b.get();
    float scale = (fp16 && seed == 2) ? 1.0f / 16.0f : 1.0f;
    uint32_t seed_value = seed;
    void* params[] = {&pointer, &count, &seed_value, &scale};
    GPUHERD_RETURN_IF_ERROR(Launch(fill, GridFor(count), 1, kBlockThreads, 1, params));
  }
  stress_ = std::move(state);
  stress_n_ = size;
  Status status = LaunchStressProduct(stress_->reference.get());
  if (status.ok()) status = Check(api_.ctx_synchronize(), "stress reference product");
  if (!status.ok()) {
    stress_.reset();
    stress_n_ = 0;
  }
  return status;
}

Result<StressBatch> CudaComputeDevice::Stress(Precision precision, int iterations,
                                              std::stop_token stop) {
  if (stress_ == nullptr || stress_->precision != precision) {
    return FailedPrecondition(std::string("call PrepareStress(") + PrecisionName(precision) +
                              ", n) before Stress");
  }
  if (iterations < 1) return InvalidArgument("stress needs iterations >= 1");
  ContextScope scope(*this);
  GPUHERD_RETURN_IF_ERROR(scope.status());
  GPUHERD_RETURN_IF_ERROR(Check(
      api_.memset_d8(stress_->counters.get(), 0, 2 * sizeof(unsigned long long)), "cuMemsetD8"));
  // FP32 and BF16 results are FP32 words; FP16 results are half2 words.
  const bool fp16 = precision == Precision::kFp16;
  const uint64_t elements = static_cast<uint64_t>(stress_n_) * stress_n_;
  uint64_t pwork = stress_->work.get();
  uint64_t preference = stress_->reference.get();
  uint64_t pcounters = stress_->counters.get();
  uint64_t words = fp16 ? elements / 2 : elements;
  uint32_t kind = fp16 ? kCompareFp16 : kCompareFp32;
  void* compare_params[] = {&pwork, &preference, &words, &kind, &pcounters};

  EventTimer timer(api_);
  GPUHERD_RETURN_IF_ERROR(Check(timer.Create(), "cuEventCreate"));
  GPUHERD_RETURN_IF_ERROR(Check(timer.Start(), "cuEventRecord"));
  for (int i = 0; i < iterations; ++i) {
    if (stop.stop_requested()) return Aborted(label_ + ": stress stopped on request");
    GPUHERD_RETURN_IF_ERROR(LaunchStressProduct(pwork));
    GPUHERD_RETURN_IF_ERROR(
        Launch("compare_words", GridFor(words), 1, kBlockThreads, 1, compare_params));
    GPUHERD_RETURN_IF_ERROR(Check(api_.ctx_synchronize(), "stress batch"));
  }
  GPUHERD_RETURN_IF_ERROR(Check(timer.Stop(), "cuEventRecord"));
  StressBatch batch;
  batch.precision = precision;
  batch.iterations = iterations;
  batch.flops = 2.0 * stress_n_ * static_cast<double>(stress_n_) * stress_n_ * iterations;
  GPUHERD_RETURN_IF_ERROR(Check(timer.Seconds(&batch.seconds), "cuEventElapsedTime"));
  unsigned long long counters[2] = {0, 0};
  GPUHERD_RETURN_IF_ERROR(Check(api_.memcpy_dtoh(counters, pcounters, sizeof(counters)),
                                "cuMemcpyDtoH (stress counters)"));
  batch.mismatches = counters[0];
  batch.nans = counters[1];
  return batch;
}

Result<std::unique_ptr<ComputeDevice>> CudaComputeBackend::Open(const GpuInfo& gpu) {
  const CudaApi& api = library_->api();
  const std::string label = "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ")";
  int count = 0;
  GPUHERD_RETURN_IF_ERROR(library_->Check(api.device_get_count(&count), label + ": cuDeviceGetCount"));
  std::string seen;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    GPUHERD_RETURN_IF_ERROR(library_->Check(api.device_get(&device, ordinal),
                                            label + ": cuDeviceGet(" + std::to_string(ordinal) + ")"));
    CUuuid uuid{};
    GPUHERD_RETURN_IF_ERROR(library_->Check(api.device_get_uuid(&uuid, device),
                                            label + ": cuDeviceGetUuid"));
    const std::string text = FormatGpuUuid(uuid);
    if (Lowercase(text) != Lowercase(gpu.uuid)) {
      seen += (seen.empty() ? "" : ", ") + text;
      continue;
    }
    std::unique_ptr<CudaComputeDevice> opened(new CudaComputeDevice(library_, gpu));
    GPUHERD_RETURN_IF_ERROR(opened->Load(device));
    return std::unique_ptr<ComputeDevice>(std::move(opened));
  }
  return Unavailable(label + " is not among the " + std::to_string(count) +
                     " GPUs CUDA sees (" + (seen.empty() ? "none" : seen) +
                     "); CUDA_VISIBLE_DEVICES may hide it");
}

Result<std::unique_ptr<gpu::ComputeBackend>> OpenCudaComputeBackend() {
  auto library = CudaLibrary::Open(ResolveCudaLibraryPath(""));
  if (!library.ok()) return library.status();
  std::shared_ptr<const CudaLibrary> shared(std::move(library).value());
  GPUHERD_RETURN_IF_ERROR(shared->Check(shared->api().init(0), "cuInit"));
  if (!KernelsBuilt()) {
    return Unavailable(
        "the burn-in kernels were not built: clang++ was not found when gpuherd was "
        "configured; install clang and build again");
  }
  return std::unique_ptr<gpu::ComputeBackend>(new CudaComputeBackend(std::move(shared)));
}

}  // namespace gpuherd::gpu::cuda
