// The part of the CUDA driver API's C ABI that gpuherd uses, written from
// NVIDIA's driver API reference so that building needs no CUDA toolkit.
// Names follow CUDA's own spelling (not gpuherd's style) so each line can be
// checked against the reference; values are the stable ABI and must never be
// "tidied".
#pragma once

#include <cstddef>

namespace gpuherd::gpu::cuda {

// A fixed underlying type: the driver may return codes not listed here, and
// loading one into an enum without it is undefined (UBSan: "not a valid
// value for type CUresult").
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_ECC_UNCORRECTABLE = 214,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_TIMEOUT = 702,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_UNKNOWN = 999,
};

using CUdevice = int;
using CUdeviceptr = unsigned long long;  // 64-bit on every platform gpuherd runs on
struct CUctx_st;
using CUcontext = CUctx_st*;
struct CUmod_st;
using CUmodule = CUmod_st*;
struct CUfunc_st;
using CUfunction = CUfunc_st*;
struct CUevent_st;
using CUevent = CUevent_st*;
struct CUstream_st;
using CUstream = CUstream_st*;

struct CUuuid {
  char bytes[16];
};

enum CUdevice_attribute {
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
  CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
};

// cuCtxCreate flags.
inline constexpr unsigned int CU_CTX_SCHED_BLOCKING_SYNC = 0x04;
// cuEventCreate flags.
inline constexpr unsigned int CU_EVENT_DEFAULT = 0x0;

using cuInitFn = CUresult (*)(unsigned int flags);
using cuDriverGetVersionFn = CUresult (*)(int* version);
using cuGetErrorStringFn = CUresult (*)(CUresult error, const char** text);
using cuDeviceGetCountFn = CUresult (*)(int* count);
using cuDeviceGetFn = CUresult (*)(CUdevice* device, int ordinal);
using cuDeviceGetNameFn = CUresult (*)(char* name, int length, CUdevice device);
using cuDeviceGetUuidFn = CUresult (*)(CUuuid* uuid, CUdevice device);
using cuDeviceGetAttributeFn = CUresult (*)(int* value, CUdevice_attribute attribute,
                                            CUdevice device);
using cuCtxCreateFn = CUresult (*)(CUcontext* context, unsigned int flags, CUdevice device);
using cuCtxDestroyFn = CUresult (*)(CUcontext context);
using cuCtxPushCurrentFn = CUresult (*)(CUcontext context);
using cuCtxPopCurrentFn = CUresult (*)(CUcontext* context);
using cuCtxSynchronizeFn = CUresult (*)();
using cuDevicePrimaryCtxRetainFn = CUresult (*)(CUcontext* context, CUdevice device);
using cuDevicePrimaryCtxReleaseFn = CUresult (*)(CUdevice device);
using cuModuleLoadDataFn = CUresult (*)(CUmodule* module, const void* image);
using cuModuleUnloadFn = CUresult (*)(CUmodule module);
using cuModuleGetFunctionFn = CUresult (*)(CUfunction* function, CUmodule module,
                                           const char* name);
using cuMemGetInfoFn = CUresult (*)(size_t* free_bytes, size_t* total_bytes);
using cuMemAllocFn = CUresult (*)(CUdeviceptr* pointer, size_t bytes);
using cuMemFreeFn = CUresult (*)(CUdeviceptr pointer);
using cuMemAllocHostFn = CUresult (*)(void** pointer, size_t bytes);
using cuMemFreeHostFn = CUresult (*)(void* pointer);
using cuMemcpyHtoDFn = CUresult (*)(CUdeviceptr destination, const void* source, size_t bytes);
using cuMemcpyDtoHFn = CUresult (*)(void* destination, CUdeviceptr source, size_t bytes);
using cuMemcpyDtoDFn = CUresult (*)(CUdeviceptr destination, CUdeviceptr source, size_t bytes);
using cuMemsetD8Fn = CUresult (*)(CUdeviceptr destination, unsigned char value, size_t count);
using cuLaunchKernelFn = CUresult (*)(CUfunction function, unsigned int grid_x,
                                      unsigned int grid_y, unsigned int grid_z,
                                      unsigned int block_x, unsigned int block_y,
                                      unsigned int block_z, unsigned int shared_bytes,
                                      CUstream stream, void** params, void** extra);
using cuEventCreateFn = CUresult (*)(CUevent* event, unsigned int flags);
using cuEventDestroyFn = CUresult (*)(CUevent event);
using cuEventRecordFn = CUresult (*)(CUevent event, CUstream stream);
using cuEventSynchronizeFn = CUresult (*)(CUevent event);
using cuEventElapsedTimeFn = CUresult (*)(float* milliseconds, CUevent start, CUevent end);

}  // namespace gpuherd::gpu::cuda
