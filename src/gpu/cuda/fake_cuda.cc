// A stand-in for libcuda.so.1, built as a shared library and loaded through
// the same dlopen path as the real one, so the tests reach CudaLibrary and
// CudaComputeBackend unchanged. It has one GPU (UUID kFakeUuid below, 4 SMs,
// compute capability 6.1, like a GTX 1070 Ti): device memory is host memory,
// copies are memcpy, kernels do nothing, and the module loader behaves like a
// Pascal driver: a fatbin (no Pascal code in it) is refused with
// CUDA_ERROR_NO_BINARY_FOR_GPU, PTX is accepted, and cuModuleGetFunction finds
// exactly the `.entry` names the PTX declares.
//
// The test reaches the loaded instance by dlopen'ing the same path and
// calling, via dlsym:
//   void FakeCudaSetLaunchResult(int)   what every cuLaunchKernel returns;
//   int FakeCudaLiveContexts()          contexts created and not destroyed;
//   int FakeCudaLaunches()              cuLaunchKernel calls so far;
//   const char* FakeCudaLaunchName(int i)   the i-th launch's kernel (null
//                                       past the end);
//   void FakeCudaLaunchShape(int i, unsigned shape[4])   its grid x, y and
//                                       block x, y;
//   void FakeCudaLastCompare(unsigned long long* words, unsigned* kind)   the
//                                       last compare_words launch's arguments.
//
// Variants (compile definitions):
//   FAKE_CUDA_AMPERE      compute capability 8.0, like an A100: it takes the
//                         fatbin (finding the entry names in its bytes) and
//                         the PTX alike;
//   FAKE_CUDA_NO_DEVICE   cuInit returns CUDA_ERROR_NO_DEVICE;
//   FAKE_CUDA_NO_LAUNCH   lacks the required cuLaunchKernel;
//   FAKE_CUDA_LEGACY      exports cuDeviceGetUuid and cuEventElapsedTime only
//                         under their unversioned names.
// Not thread-safe: one test thread drives it.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "gpu/cuda/cuda_api.h"

using namespace gpuherd::gpu::cuda;  // NOLINT: the C ABI below is unqualified

namespace {

constexpr unsigned char kFakeUuid[16] = {0x8c, 0x6b, 0x1f, 0x02, 0x3a, 0x44, 0x5e, 0x60,
                                         0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8};
constexpr unsigned kFatbinMagic = 0xba55ed50u;

#ifdef FAKE_CUDA_AMPERE
constexpr int kCcMajor = 8, kCcMinor = 0;
constexpr char kName[] = "Fake A100";
#else
constexpr int kCcMajor = 6, kCcMinor = 1;
constexpr char kName[] = "Fake GTX 1070 Ti";
#endif

struct LaunchRecord {
  std::string name;
  unsigned shape[4];
};

int launch_result = CUDA_SUCCESS;
int live_contexts = 0;
int launches = 0;
std::string loaded_image;  // the PTX text, or the fatbin's bytes
std::deque<std::string> function_names;  // a CUfunction points at one
std::vector<LaunchRecord> launch_records;
unsigned long long compare_words = 0;
unsigned compare_kind = 0;
int context_tokens[64];
int module_token;
int event_tokens[2];

}  // namespace

extern "C" {

void FakeCudaSetLaunchResult(int result) { launch_result = result; }
int FakeCudaLiveContexts() { return live_contexts; }
int FakeCudaLaunches() { return launches; }
const char* FakeCudaLaunchName(int i) {
  if (i < 0 || i >= static_cast<int>(launch_records.size())) return nullptr;
  return launch_records[i].name.c_str();
}
void FakeCudaLaunchShape(int i, unsigned shape[4]) {
  std::memcpy(shape, launch_records.at(i).shape, sizeof(launch_records[i].shape));
}
void FakeCudaLastCompare(unsigned long long* words, unsigned* kind) {
  *words = compare_words;
  *kind = compare_kind;
}

CUresult cuInit(unsigned int) {
#ifdef FAKE_CUDA_NO_DEVICE
  return CUDA_ERROR_NO_DEVICE;
#else
  return CUDA_SUCCESS;
#endif
}

CUresult cuDriverGetVersion(int* version) {
  *version = 12040;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** text) {
  switch (error) {
    case CUDA_SUCCESS: *text = "CUDA_SUCCESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY: *text = "CUDA_ERROR_OUT_OF_MEMORY"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE: *text = "CUDA_ERROR_NO_DEVICE"; return CUDA_SUCCESS;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: *text = "CUDA_ERROR_NO_BINARY_FOR_GPU"; return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND: *text = "CUDA_ERROR_NOT_FOUND"; return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS: *text = "CUDA_ERROR_ILLEGAL_ADDRESS"; return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED: *text = "CUDA_ERROR_LAUNCH_FAILED"; return CUDA_SUCCESS;
    default: *text = nullptr; return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_ERROR_NO_DEVICE: *text = "no CUDA-capable device is detected"; return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED: *text = "unspecified launch failure"; return CUDA_SUCCESS;
    default: *text = "fake CUDA error"; return CUDA_SUCCESS;
  }
}

CUresult cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int length, CUdevice) {
  std::strncpy(name, kName, static_cast<size_t>(length));
  return CUDA_SUCCESS;
}

#ifdef FAKE_CUDA_LEGACY
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice) {
#else
CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice) {
#endif
  std::memcpy(uuid->bytes, kFakeUuid, 16);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 4; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = kCcMajor; return CUDA_SUCCESS;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = kCcMinor; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult cuCtxCreate_v2(CUcontext* context, unsigned int, CUdevice) {
  if (live_contexts >= 64) return CUDA_ERROR_OUT_OF_MEMORY;
  *context = reinterpret_cast<CUcontext>(&context_tokens[live_contexts++]);
  return CUDA_SUCCESS;
}
CUresult cuCtxDestroy_v2(CUcontext) {
  --live_contexts;
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext) { return CUDA_SUCCESS; }
CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  *context = nullptr;
  return CUDA_SUCCESS;
}
CUresult cuCtxSynchronize() { return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&context_tokens[63]);
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice) { return CUDA_SUCCESS; }

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  unsigned magic = 0;
  std::memcpy(&magic, image, sizeof(magic));
  if (magic == kFatbinMagic) {
#ifdef FAKE_CUDA_AMPERE
    // The container's header: magic, version (16 bits), header size (16
    // bits), then the size of what follows it (64 bits).
    uint16_t header_size = 0;
    uint64_t body_size = 0;
    std::memcpy(&header_size, static_cast<const char*>(image) + 6, sizeof(header_size));
    std::memcpy(&body_size, static_cast<const char*>(image) + 8, sizeof(body_size));
    loaded_image.assign(static_cast<const char*>(image), header_size + body_size);
    *module = reinterpret_cast<CUmodule>(&module_token);
    return CUDA_SUCCESS;
#else
    return CUDA_ERROR_NO_BINARY_FOR_GPU;
#endif
  }
  loaded_image = static_cast<const char*>(image);
  if (loaded_image.find(".target sm_60") == std::string::npos) return CUDA_ERROR_INVALID_IMAGE;
  *module = reinterpret_cast<CUmodule>(&module_token);
  return CUDA_SUCCESS;
}
CUresult cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  // PTX declares `.entry name(`; a fatbin's cubins hold the name in their
  // string tables, NUL-terminated.
  const bool ptx = loaded_image.find(".target sm_60") != std::string::npos;
  const std::string entry =
      ptx ? std::string(".entry ") + name + "(" : std::string(name) + std::string(1, '\0');
  if (loaded_image.find(entry) == std::string::npos) return CUDA_ERROR_NOT_FOUND;
  function_names.emplace_back(name);
  *function = reinterpret_cast<CUfunction>(&function_names.back());
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = size_t{7} << 30;
  *total_bytes = size_t{8} << 30;
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc_v2(CUdeviceptr* pointer, size_t bytes) {
  void* memory = std::malloc(bytes);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}
CUresult cuMemAllocHost_v2(void** pointer, size_t bytes) {
  *pointer = std::malloc(bytes);
  return *pointer != nullptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuMemFreeHost(void* pointer) {
  std::free(pointer);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr destination, const void* source, size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(destination), source, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoH_v2(void* destination, CUdeviceptr source, size_t bytes) {
  std::memcpy(destination, reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoD_v2(CUdeviceptr destination, CUdeviceptr source, size_t bytes) {
  std::memcpy(reinterpret_cast<void*>(destination), reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8_v2(CUdeviceptr destination, unsigned char value, size_t count) {
  std::memset(reinterpret_cast<void*>(destination), value, count);
  return CUDA_SUCCESS;
}

#ifndef FAKE_CUDA_NO_LAUNCH
CUresult cuLaunchKernel(CUfunction function, unsigned int grid_x, unsigned int grid_y,
                        unsigned int, unsigned int block_x, unsigned int block_y, unsigned int,
                        unsigned int, CUstream, void** params, void**) {
  ++launches;
  const std::string& name = *reinterpret_cast<const std::string*>(function);
  launch_records.push_back({name, {grid_x, grid_y, block_x, block_y}});
  if (name == "compare_words") {  // (result, reference, count, kind, counters)
    compare_words = *static_cast<const uint64_t*>(params[2]);
    compare_kind = *static_cast<const uint32_t*>(params[3]);
  }
  return static_cast<CUresult>(launch_result);
}
#endif

CUresult cuEventCreate(CUevent* event, unsigned int) {
  static int next = 0;
  *event = reinterpret_cast<CUevent>(&event_tokens[next++ % 2]);
  return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent) { return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
#ifdef FAKE_CUDA_LEGACY
CUresult cuEventElapsedTime(float* milliseconds, CUevent, CUevent) {
#else
CUresult cuEventElapsedTime_v2(float* milliseconds, CUevent, CUevent) {
#endif
  *milliseconds = 1.0f;
  return CUDA_SUCCESS;
}

}  // extern "C"
