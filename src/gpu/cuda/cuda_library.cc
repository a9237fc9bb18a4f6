#include "gpu/cuda/cuda_library.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <type_traits>

#include "gpu/dynamic_symbols.h"

namespace gpuherd::gpu::cuda {
namespace {

// Stores a dlsym result into one typed member of CudaApi.
template <auto kMember>
void Assign(CudaApi& api, void* symbol) {
  using Fn = std::remove_reference_t<decltype(api.*kMember)>;
  api.*kMember = reinterpret_cast<Fn>(symbol);
}

struct SymbolEntry {
  // Newest first; later names are older exports with the same signature. The
  // unversioned names of _v2 entries take 32-bit sizes or pointers, so those
  // never fall back.
  const char* names[2];
  void (*assign)(CudaApi&, void*);
};

const SymbolEntry kSymbols[] = {
    {{"cuInit"}, &Assign<&CudaApi::init>},
    {{"cuDriverGetVersion"}, &Assign<&CudaApi::driver_get_version>},
    {{"cuGetErrorName"}, &Assign<&CudaApi::get_error_name>},
    {{"cuGetErrorString"}, &Assign<&CudaApi::get_error_string>},
    {{"cuDeviceGetCount"}, &Assign<&CudaApi::device_get_count>},
    {{"cuDeviceGet"}, &Assign<&CudaApi::device_get>},
    {{"cuDeviceGetName"}, &Assign<&CudaApi::device_get_name>},
    {{"cuDeviceGetUuid_v2", "cuDeviceGetUuid"}, &Assign<&CudaApi::device_get_uuid>},
    {{"cuDeviceGetAttribute"}, &Assign<&CudaApi::device_get_attribute>},
    {{"cuCtxCreate_v2"}, &Assign<&CudaApi::ctx_create>},
    {{"cuCtxDestroy_v2"}, &Assign<&CudaApi::ctx_destroy>},
    {{"cuCtxPushCurrent_v2"}, &Assign<&CudaApi::ctx_push_current>},
    {{"cuCtxPopCurrent_v2"}, &Assign<&CudaApi::ctx_pop_current>},
    {{"cuCtxSynchronize"}, &Assign<&CudaApi::ctx_synchronize>},
    {{"cuDevicePrimaryCtxRetain"}, &Assign<&CudaApi::device_primary_ctx_retain>},
    {{"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
     &Assign<&CudaApi::device_primary_ctx_release>},
    {{"cuModuleLoadData"}, &Assign<&CudaApi::module_load_data>},
    {{"cuModuleUnload"}, &Assign<&CudaApi::module_unload>},
    {{"cuModuleGetFunction"}, &Assign<&CudaApi::module_get_function>},
    {{"cuMemGetInfo_v2"}, &Assign<&CudaApi::mem_get_info>},
    {{"cuMemAlloc_v2"}, &Assign<&CudaApi::mem_alloc>},
    {{"cuMemFree_v2"}, &Assign<&CudaApi::mem_free>},
    {{"cuMemAllocHost_v2"}, &Assign<&CudaApi::mem_alloc_host>},
    {{"cuMemFreeHost"}, &Assign<&CudaApi::mem_free_host>},
    {{"cuMemcpyHtoD_v2"}, &Assign<&CudaApi::memcpy_htod>},
    {{"cuMemcpyDtoH_v2"}, &Assign<&CudaApi::memcpy_dtoh>},
    {{"cuMemcpyDtoD_v2"}, &Assign<&CudaApi::memcpy_dtod>},
    {{"cuMemsetD8_v2"}, &Assign<&CudaApi::memset_d8>},
    {{"cuLaunchKernel"}, &Assign<&CudaApi::launch_kernel>},
    {{"cuEventCreate"}, &Assign<&CudaApi::event_create>},
    {{"cuEventDestroy_v2", "cuEventDestroy"}, &Assign<&CudaApi::event_destroy>},
    {{"cuEventRecord"}, &Assign<&CudaApi::event_record>},
    {{"cuEventSynchronize"}, &Assign<&CudaApi::event_synchronize>},
    {{"cuEventElapsedTime_v2", "cuEventElapsedTime"}, &Assign<&CudaApi::event_elapsed_time>},
};

}  // namespace

std::string ResolveCudaLibraryPath(const std::string& path) {
  if (!path.empty()) return path;
  const char* env = std::getenv("GPUHERD_CUDA_LIBRARY");
  if (env != nullptr && *env != '\0') return env;
  return kDefaultCudaLibrary;
}

Result<std::unique_ptr<CudaLibrary>> CudaLibrary::Open(const std::string& path) {
  dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* text = dlerror();
    return Unavailable("cannot load the CUDA driver library " + path + ": " +
                       (text != nullptr ? text : "unknown dlopen error") +
                       " (is the NVIDIA driver installed? GPUHERD_CUDA_LIBRARY names another)");
  }
  std::unique_ptr<CudaLibrary> library(new CudaLibrary(handle, path));
  for (const SymbolEntry& entry : kSymbols) {
    const SymbolLookup found = LookupFirst(handle, entry.names);
    void* symbol = found.symbol;
    const int variant = found.variant;
    const std::string& tried = found.tried;
    const std::string& last_error = found.error;
    if (symbol == nullptr) {
      return Unavailable("the CUDA driver library " + path + " lacks the required symbol " +
                         tried + " (dlerror: " + last_error + "); the driver may be too old");
    }
    entry.assign(library->api_, symbol);
    library->resolved_.emplace_back(entry.names[0], entry.names[variant]);
  }
  return library;
}

CudaLibrary::~CudaLibrary() { dlclose(handle_); }

std::string CudaLibrary::ResolvedName(std::string_view newest_name) const {
  for (const auto& [newest, resolved] : resolved_) {
    if (newest == newest_name) return resolved;
  }
  return "";
}

std::string CudaLibrary::ErrorText(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.get_error_name == nullptr || api_.get_error_name(result, &name) != CUDA_SUCCESS ||
      name == nullptr) {
    name = "CUDA_ERROR_UNRECOGNIZED";
  }
  std::string message = std::string(name) + " (" + std::to_string(static_cast<int>(result)) + ")";
  if (api_.get_error_string != nullptr && api_.get_error_string(result, &text) == CUDA_SUCCESS &&
      text != nullptr) {
    message += std::string(": ") + text;
  }
  return message;
}

Status CudaLibrary::Check(CUresult result, std::string_view what) const {
  if (result == CUDA_SUCCESS) return Status::Ok();
  std::string message = std::string(what) + ": " + ErrorText(result);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    return FailedPrecondition(message + "; test a smaller share of the GPU's memory");
  }
  return Unavailable(message);
}

std::string FormatGpuUuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

}  // namespace gpuherd::gpu::cuda
