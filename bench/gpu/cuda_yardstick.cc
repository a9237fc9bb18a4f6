// The burn-in kernels measured against what the card can do: for each GPU,
// the memory test's bandwidth (one random-sequence pass) against a
// device-to-device copy (cuMemcpyDtoD) over the same bytes, and the FP32
// stress kernel's rate against cuBLAS SGEMM at the same n. Also runs the
// checked GEMM, the proof that the stress kernel computes the right product on
// this card. Needs a real GPU; prints a Markdown table (or JSON with --json).
//
//   cuda_yardstick [--json] [--n 8192] [--iterations 20] [--max-bytes 4GiB]
//
// cuBLAS is opened with dlopen (libcublas.so.13/.12/.11, also under
// /usr/local/cuda/lib64, or $GPUHERD_CUBLAS_LIBRARY); without it that column
// reads "n/a" with the reason. Exits 0 when every GPU was measured.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "gpu/compute.h"
#include "gpu/cuda/cuda_compute.h"
#include "gpu/cuda/cuda_library.h"

namespace gpuherd {
namespace {

using gpu::cuda::CudaApi;
using gpu::cuda::CudaLibrary;
using gpu::cuda::CUcontext;
using gpu::cuda::CUdevice;
using gpu::cuda::CUdeviceptr;
using gpu::cuda::CUevent;
using gpu::cuda::CUresult;

constexpr double kMemoryGoal = 0.80;
constexpr double kStressGoal = 0.90;

// cuBLAS's C ABI, the three entries used (cublas_api.h).
using cublasHandle_t = void*;
using CublasCreateFn = int (*)(cublasHandle_t*);
using CublasDestroyFn = int (*)(cublasHandle_t);
using CublasSgemmFn = int (*)(cublasHandle_t, int, int, int, int, int, const float*,
                              const float*, int, const float*, int, const float*, float*, int);
constexpr int kCublasOpN = 0;

struct Cublas {
  void* handle = nullptr;
  CublasCreateFn create = nullptr;
  CublasDestroyFn destroy = nullptr;
  CublasSgemmFn sgemm = nullptr;
  std::string path;
};

Result<Cublas> OpenCublas() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("GPUHERD_CUBLAS_LIBRARY"); env != nullptr && *env != '\0') {
    candidates.push_back(env);
  }
  for (const char* version : {"13", "12", "11"}) {
    candidates.push_back(std::string("libcublas.so.") + version);
    candidates.push_back(std::string("/usr/local/cuda/lib64/libcublas.so.") + version);
  }
  std::string last_error = "no candidates";
  for (const std::string& path : candidates) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* text = dlerror();
      last_error = text != nullptr ? text : path + ": dlopen failed";
      continue;
    }
    Cublas cublas;
    cublas.handle = handle;
    cublas.path = path;
    cublas.create = reinterpret_cast<CublasCreateFn>(dlsym(handle, "cublasCreate_v2"));
    cublas.destroy = reinterpret_cast<CublasDestroyFn>(dlsym(handle, "cublasDestroy_v2"));
    cublas.sgemm = reinterpret_cast<CublasSgemmFn>(dlsym(handle, "cublasSgemm_v2"));
    if (cublas.create == nullptr || cublas.destroy == nullptr || cublas.sgemm == nullptr) {
      dlclose(handle);
      last_error = path + " lacks cublasCreate_v2/cublasSgemm_v2";
      continue;
    }
    return cublas;
  }
  return Unavailable("cuBLAS not found (" + last_error + ")");
}

// cuBLAS SGEMM TFLOPS at n x n x n on `device`'s primary context (the one the
// CUDA runtime inside cuBLAS uses).
Result<double> CublasTflops(const CudaLibrary& library, const Cublas& cublas, CUdevice device,
                            int n, int iterations) {
  const CudaApi& api = library.api();
  CUcontext context = nullptr;
  GPUHERD_RETURN_IF_ERROR(library.Check(api.device_primary_ctx_retain(&context, device),
                                        "cuDevicePrimaryCtxRetain"));
  GPUHERD_RETURN_IF_ERROR(library.Check(api.ctx_push_current(context), "cuCtxPushCurrent"));
  const size_t bytes = static_cast<size_t>(n) * n * sizeof(float);
  CUdeviceptr buffers[3] = {0, 0, 0};
  CUevent events[2] = {nullptr, nullptr};
  cublasHandle_t handle = nullptr;
  auto run = [&]() -> Result<double> {
    for (CUdeviceptr& buffer : buffers) {
      GPUHERD_RETURN_IF_ERROR(library.Check(api.mem_alloc(&buffer, bytes), "cuMemAlloc"));
      GPUHERD_RETURN_IF_ERROR(library.Check(api.memset_d8(buffer, 0x3c, bytes), "cuMemsetD8"));
    }
    if (int status = cublas.create(&handle); status != 0) {
      return Unavailable("cublasCreate_v2 returned " + std::to_string(status));
    }
    const float alpha = 1.0f;
    const float beta = 0.0f;
    auto gemm = [&]() {
      return cublas.sgemm(handle, kCublasOpN, kCublasOpN, n, n, n, &alpha,
                          reinterpret_cast<const float*>(buffers[0]), n,
                          reinterpret_cast<const float*>(buffers[1]), n, &beta,
                          reinterpret_cast<float*>(buffers[2]), n);
    };
    for (int i = 0; i < 2; ++i) {
      if (int status = gemm(); status != 0) {
        return Unavailable("cublasSgemm_v2 returned " + std::to_string(status));
      }
    }
    GPUHERD_RETURN_IF_ERROR(library.Check(api.event_create(&events[0], 0), "cuEventCreate"));
    GPUHERD_RETURN_IF_ERROR(library.Check(api.event_create(&events[1], 0), "cuEventCreate"));
    GPUHERD_RETURN_IF_ERROR(library.Check(api.event_record(events[0], nullptr), "cuEventRecord"));
    for (int i = 0; i < iterations; ++i) gemm();
    GPUHERD_RETURN_IF_ERROR(library.Check(api.event_record(events[1], nullptr), "cuEventRecord"));
    GPUHERD_RETURN_IF_ERROR(library.Check(api.event_synchronize(events[1]), "cublasSgemm_v2"));
    float milliseconds = 0;
    GPUHERD_RETURN_IF_ERROR(library.Check(
        api.event_elapsed_time(&milliseconds, events[0], events[1]), "cuEventElapsedTime"));
    if (milliseconds <= 0) return Internal("cuBLAS took no measurable time");
    return 2.0 * n * static_cast<double>(n) * n * iterations / (milliseconds / 1e3) / 1e12;
  };
  Result<double> tflops = run();
  if (handle != nullptr) cublas.destroy(handle);
  for (CUevent event : events) {
    if (event != nullptr) api.event_destroy(event);
  }
  for (CUdeviceptr buffer : buffers) {
    if (buffer != 0) api.mem_free(buffer);
  }
  CUcontext popped = nullptr;
  api.ctx_pop_current(&popped);
  api.device_primary_ctx_release(device);
  return tflops;
}

struct Row {
  gpu::GpuInfo gpu;
  std::string image;
  uint64_t bytes = 0;
  std::optional<double> memtest_gbs, copy_gbs, stress_tflops, cublas_tflops;
  uint64_t memtest_errors = 0, stress_mismatches = 0, stress_nans = 0;
  std::optional<gpu::GemmCheck> checked;
  std::vector<std::string> notes;
};

std::string Number(const std::optional<double>& value, const char* format = "%.1f") {
  if (!value) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), format, *value);
  return text;
}

std::string Ratio(const std::optional<double>& a, const std::optional<double>& b, double goal) {
  if (!a || !b || *b <= 0) return "n/a";
  char text[48];
  std::snprintf(text, sizeof(text), "%.0f%% %s", 100.0 * *a / *b,
                *a / *b >= goal ? "(met)" : "(MISSED)");
  return text;
}

void MeasureDevice(gpu::ComputeBackend& backend, uint64_t max_bytes, int n, int iterations,
                   Row* row) {
  auto opened = backend.Open(row->gpu);
  if (!opened.ok()) {
    row->notes.push_back(opened.status().ToString());
    return;
  }
  gpu::ComputeDevice& device = **opened;
  if (auto* cuda = dynamic_cast<gpu::cuda::CudaComputeDevice*>(&device)) {
    row->image = cuda->module_image();
  }
  auto memory = device.Memory();
  if (!memory.ok()) {
    row->notes.push_back(memory.status().ToString());
    return;
  }
  // Two buffers of this size for the copy; leave room for the context.
  row->bytes = std::clamp<uint64_t>(memory->free_bytes / 4, uint64_t{64} << 20, max_bytes);
  row->bytes = row->bytes / (uint64_t{1} << 20) * (uint64_t{1} << 20);
  auto pass = device.MemTest(gpu::MemPattern::kRandomSequence, row->bytes, 0x5eed, 16, {});
  if (pass.ok()) {
    row->memtest_gbs = pass->bandwidth_gbs;
    row->memtest_errors = pass->error_count;
  } else {
    row->notes.push_back("memtest: " + pass.status().ToString());
  }
  auto copy = device.CopyBandwidth(gpu::CopyKind::kDeviceToDevice, row->bytes, 5);
  if (copy.ok()) {
    row->copy_gbs = *copy;
  } else {
    row->notes.push_back("d2d copy: " + copy.status().ToString());
  }
  auto checked = device.CheckedGemm(256);
  if (checked.ok()) {
    row->checked = *checked;
  } else {
    row->notes.push_back("checked GEMM: " + checked.status().ToString());
  }
  Status prepared = device.PrepareStress(gpu::Precision::kFp32, n);
  if (!prepared.ok()) {
    row->notes.push_back("stress: " + prepared.ToString());
    return;
  }
  auto warm = device.Stress(gpu::Precision::kFp32, 2, {});
  auto batch = device.Stress(gpu::Precision::kFp32, iterations, {});
  if (warm.ok() && batch.ok() && batch->seconds > 0) {
    row->stress_tflops = batch->flops / batch->seconds / 1e12;
    row->stress_mismatches = batch->mismatches + warm->mismatches;
    row->stress_nans = batch->nans + warm->nans;
  } else {
    row->notes.push_back("stress: " + (batch.ok() ? warm.status() : batch.status()).ToString());
  }
}

int Run(int argc, char** argv) {
  CLI::App app{"Burn-in kernels against the copy engine and cuBLAS"};
  bool json = false;
  int n = 8192;
  int iterations = 20;
  uint64_t max_bytes = uint64_t{4} << 30;
  app.add_flag("--json", json, "print JSON instead of Markdown");
  app.add_option("--n", n, "matrix size for the stress and cuBLAS")->check(CLI::Range(128, 32768));
  app.add_option("--iterations", iterations, "products per measurement")
      ->check(CLI::Range(1, 1000));
  app.add_option("--max-bytes", max_bytes, "most bytes of each memory measurement");
  CLI11_PARSE(app, argc, argv);

  auto library = CudaLibrary::Open(gpu::cuda::ResolveCudaLibraryPath(""));
  if (!library.ok()) {
    std::fprintf(stderr, "cuda_yardstick: %s\n", library.status().ToString().c_str());
    return 2;
  }
  const CudaApi& api = (*library)->api();
  if (Status init = (*library)->Check(api.init(0), "cuInit"); !init.ok()) {
    std::fprintf(stderr, "cuda_yardstick: %s\n", init.ToString().c_str());
    return 2;
  }
  auto backend = gpu::cuda::OpenCudaComputeBackend();
  if (!backend.ok()) {
    std::fprintf(stderr, "cuda_yardstick: %s\n", backend.status().ToString().c_str());
    return 2;
  }
  Result<Cublas> cublas = OpenCublas();

  int count = 0;
  if (Status status = (*library)->Check(api.device_get_count(&count), "cuDeviceGetCount");
      !status.ok()) {
    std::fprintf(stderr, "cuda_yardstick: %s\n", status.ToString().c_str());
    return 2;
  }
  std::vector<Row> rows;
  bool all_measured = true;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    Row row;
    CUdevice device = 0;
    gpu::cuda::CUuuid uuid{};
    char name[256] = {};
    if (!(*library)->Check(api.device_get(&device, ordinal), "cuDeviceGet").ok() ||
        !(*library)->Check(api.device_get_uuid(&uuid, device), "cuDeviceGetUuid").ok()) {
      all_measured = false;
      continue;
    }
    api.device_get_name(name, sizeof(name), device);
    row.gpu.index = ordinal;
    row.gpu.uuid = gpu::cuda::FormatGpuUuid(uuid);
    row.gpu.name = name;
    MeasureDevice(**backend, max_bytes, n, iterations, &row);
    if (cublas.ok()) {
      auto rate = CublasTflops(**library, *cublas, device, n, iterations);
      if (rate.ok()) {
        row.cublas_tflops = *rate;
      } else {
        row.notes.push_back("cuBLAS: " + rate.status().ToString());
      }
    } else {
      row.notes.push_back("cuBLAS n/a: " + cublas.status().message());
    }
    all_measured = all_measured && row.memtest_gbs && row.copy_gbs && row.stress_tflops;
    rows.push_back(std::move(row));
  }

  if (json) {
    nlohmann::json out = {{"n", n},
                          {"iterations", iterations},
                          {"goals", {{"memtest_vs_copy", kMemoryGoal}, {"stress_vs_cublas", kStressGoal}}},
                          {"cublas", cublas.ok() ? cublas->path : cublas.status().message()},
                          {"gpus", nlohmann::json::array()}};
    for (const Row& row : rows) {
      nlohmann::json entry = {{"index", row.gpu.index}, {"uuid", row.gpu.uuid},
                              {"name", row.gpu.name},   {"module", row.image},
                              {"bytes", row.bytes},     {"memtest_errors", row.memtest_errors},
                              {"stress_mismatches", row.stress_mismatches},
                              {"stress_nans", row.stress_nans}, {"notes", row.notes}};
      auto put = [&](const char* key, const std::optional<double>& value) {
        entry[key] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
      };
      put("memtest_gbs", row.memtest_gbs);
      put("d2d_copy_gbs", row.copy_gbs);
      put("stress_fp32_tflops", row.stress_tflops);
      put("cublas_sgemm_tflops", row.cublas_tflops);
      if (row.checked) {
        entry["checked_gemm"] = {{"n", row.checked->n},
                                 {"mismatches", row.checked->mismatches},
                                 {"nans", row.checked->nans},
                                 {"max_rel_error", row.checked->max_rel_error}};
      }
      out["gpus"].push_back(entry);
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("n = %d, %d products per rate; cuBLAS: %s\n\n", n, iterations,
                cublas.ok() ? cublas->path.c_str() : cublas.status().message().c_str());
    std::printf("| GPU | name | module | memtest GB/s | d2d copy GB/s | memtest/copy (goal >= 80%%) "
                "| stress FP32 TFLOPS | cuBLAS SGEMM TFLOPS | stress/cuBLAS (goal >= 90%%) "
                "| checked GEMM 256 |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Row& row : rows) {
      std::string checked = "n/a";
      if (row.checked) {
        char text[96];
        std::snprintf(text, sizeof(text), "%llu bad, %llu NaN, max rel %.1e",
                      static_cast<unsigned long long>(row.checked->mismatches),
                      static_cast<unsigned long long>(row.checked->nans),
                      row.checked->max_rel_error);
        checked = text;
      }
      std::printf("| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row.gpu.index,
                  row.gpu.name.c_str(), row.image.c_str(), Number(row.memtest_gbs).c_str(),
                  Number(row.copy_gbs).c_str(),
                  Ratio(row.memtest_gbs, row.copy_gbs, kMemoryGoal).c_str(),
                  Number(row.stress_tflops, "%.2f").c_str(),
                  Number(row.cublas_tflops, "%.2f").c_str(),
                  Ratio(row.stress_tflops, row.cublas_tflops, kStressGoal).c_str(),
                  checked.c_str());
    }
    for (const Row& row : rows) {
      std::printf("\nGPU %d: memtest errors %llu, stress mismatches %llu, NaN/Inf %llu\n",
                  row.gpu.index, static_cast<unsigned long long>(row.memtest_errors),
                  static_cast<unsigned long long>(row.stress_mismatches),
                  static_cast<unsigned long long>(row.stress_nans));
      for (const std::string& note : row.notes) std::printf("  - %s\n", note.c_str());
    }
  }
  return count > 0 && all_measured ? 0 : 1;
}

}  // namespace
}  // namespace gpuherd

int main(int argc, char** argv) { return gpuherd::Run(argc, argv); }
