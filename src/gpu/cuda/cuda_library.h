// libcuda opened with dlopen at run time: the driver-API entry points the
// burn-in kernels need, each resolved to the newest name the installed driver
// exports. Nothing here runs work on a GPU; CudaComputeBackend does.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gpu/cuda/cuda_api.h"

namespace gpuherd::gpu::cuda {

// The library every NVIDIA driver installs; the default when nothing else is named.
inline constexpr char kDefaultCudaLibrary[] = "libcuda.so.1";

// The empty path means $GPUHERD_CUDA_LIBRARY when set, else kDefaultCudaLibrary.
std::string ResolveCudaLibraryPath(const std::string& path);

// Typed entry points; every one is required and never null once opened.
struct CudaApi {
  cuInitFn init = nullptr;
  cuDriverGetVersionFn driver_get_version = nullptr;
  cuGetErrorStringFn get_error_name = nullptr;
  cuGetErrorStringFn get_error_string = nullptr;
  cuDeviceGetCountFn device_get_count = nullptr;
  cuDeviceGetFn device_get = nullptr;
  cuDeviceGetNameFn device_get_name = nullptr;
  cuDeviceGetUuidFn device_get_uuid = nullptr;
  cuDeviceGetAttributeFn device_get_attribute = nullptr;
  cuCtxCreateFn ctx_create = nullptr;
  cuCtxDestroyFn ctx_destroy = nullptr;
  cuCtxPushCurrentFn ctx_push_current = nullptr;
  cuCtxPopCurrentFn ctx_pop_current = nullptr;
  cuCtxSynchronizeFn ctx_synchronize = nullptr;
  cuDevicePrimaryCtxRetainFn device_primary_ctx_retain = nullptr;
  cuDevicePrimaryCtxReleaseFn device_primary_ctx_release = nullptr;
  cuModuleLoadDataFn module_load_data = nullptr;
  cuModuleUnloadFn module_unload = nullptr;
  cuModuleGetFunctionFn module_get_function = nullptr;
  cuMemGetInfoFn mem_get_info = nullptr;
  cuMemAllocFn mem_alloc = nullptr;
  cuMemFreeFn mem_free = nullptr;
  cuMemAllocHostFn mem_alloc_host = nullptr;
  cuMemFreeHostFn mem_free_host = nullptr;
  cuMemcpyHtoDFn memcpy_htod = nullptr;
  cuMemcpyDtoHFn memcpy_dtoh = nullptr;
  cuMemcpyDtoDFn memcpy_dtod = nullptr;
  cuMemsetD8Fn memset_d8 = nullptr;
  cuLaunchKernelFn launch_kernel = nullptr;
  cuEventCreateFn event_create = nullptr;
  cuEventDestroyFn event_destroy = nullptr;
  cuEventRecordFn event_record = nullptr;
  cuEventSynchronizeFn event_synchronize = nullptr;
  cuEventElapsedTimeFn event_elapsed_time = nullptr;
};

// Owns the dlopen handle; the function pointers die with it. The driver API
// itself is thread-safe; this object adds no state after Open.
class CudaLibrary {
 public:
  // Loads `path` (as given to dlopen: a file name searched the usual way, or a
  // path) and resolves every entry. kUnavailable when the library cannot be
  // loaded or lacks an entry; the message names the library, the symbol and
  // dlerror's text. Does not call cuInit.
  static Result<std::unique_ptr<CudaLibrary>> Open(const std::string& path);

  CudaLibrary(const CudaLibrary&) = delete;
  CudaLibrary& operator=(const CudaLibrary&) = delete;
  ~CudaLibrary();

  const CudaApi& api() const { return api_; }
  const std::string& path() const { return path_; }

  // The exported name an entry was resolved to, looked up by its newest name:
  // ResolvedName("cuDeviceGetUuid_v2") is "cuDeviceGetUuid" on an old driver.
  // Empty when unknown.
  std::string ResolvedName(std::string_view newest_name) const;

  // "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected".
  std::string ErrorText(CUresult result) const;

  // Ok, or kUnavailable "<what>: <ErrorText>" (kFailedPrecondition for out of
  // memory, which a caller can fix by testing less).
  Status Check(CUresult result, std::string_view what) const;

 private:
  CudaLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}

  void* handle_;
  std::string path_;
  CudaApi api_;
  // (newest name, resolved name) for every entry.
  std::vector<std::pair<std::string, std::string>> resolved_;
};

// NVML's spelling of a CUDA UUID: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string FormatGpuUuid(const CUuuid& uuid);

}  // namespace gpuherd::gpu::cuda
