// A stand-in for libcuda.so.1 for the memory fence's tests, built under that
// very name in its own folder (fake-libcuda/) so that programs linked to it,
// programs that dlopen "libcuda.so.1" and the CUDA runtime all find it. It
// has one GPU of 8 GiB; allocations hand out addresses and touch no memory,
// so tests can take gigabytes. cuGetProcAddress resolves names as the real
// driver does: _ptsz with the per-thread flag, _v2 from CUDA 3.2 on.
//
// Test hooks (environment): FAKE_CUDA_HANG_BYTES=N makes a cuMemAlloc_v2 of
// exactly N bytes create $FAKE_CUDA_HANG_FILE and never return (the test kills
// the process there); FAKE_CUDA_DRIVER_VERSION overrides cuDriverGetVersion.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "fence/cuda_driver.h"

namespace {

constexpr unsigned long long kTotal = 8ull << 30;
std::atomic<unsigned long long> next_address{0x700000000000ull};
std::atomic<unsigned long long> used{0};

CUresult Take(CUdeviceptr* out, size_t bytes) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (used.fetch_add(bytes) + bytes > kTotal) {
    used.fetch_sub(bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = next_address.fetch_add((bytes + 0xfff) & ~0xfffull);
  return CUDA_SUCCESS;
}

// What each address took, so a free gives it back (a log, newest last).
struct Block {
  unsigned long long address, bytes;
};
Block blocks[65536];
std::atomic<int> block_count{0};

void Log(unsigned long long address, unsigned long long bytes) {
  int i = block_count.fetch_add(1);
  if (i < 65536) blocks[i] = {address, bytes};
}
void Unlog(unsigned long long address) {
  int n = block_count.load();
  if (n > 65536) n = 65536;
  for (int i = n - 1; i >= 0; --i) {  // newest first: frees are mostly LIFO
    if (blocks[i].address == address && blocks[i].bytes != 0) {
      used.fetch_sub(blocks[i].bytes);
      blocks[i].bytes = 0;
      if (i == n - 1) block_count.store(i);  // single-threaded use: pop the log
      return;
    }
  }
}

CUresult Allocate(CUdeviceptr* out, size_t bytes) {
  CUresult r = Take(out, bytes);
  if (r == CUDA_SUCCESS) Log(*out, bytes);
  return r;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult cuDriverGetVersion(int* version) {
  const char* text = getenv("FAKE_CUDA_DRIVER_VERSION");
  *version = text != nullptr ? atoi(text) : 12040;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(int* device, int ordinal) {
  if (ordinal != 0) return 101;  // CUDA_ERROR_INVALID_DEVICE
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult, const char** text) {
  *text = "fake CUDA error";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorName(CUresult error, const char** text) {
  *text = error == CUDA_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = kTotal - used.load();
  *total_bytes = kTotal;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  const char* hang = getenv("FAKE_CUDA_HANG_BYTES");
  if (hang != nullptr && strtoull(hang, nullptr, 10) == bytes) {
    const char* file = getenv("FAKE_CUDA_HANG_FILE");
    if (file != nullptr) close(open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    for (;;) pause();
  }
  return Allocate(dptr, bytes);
}
CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height, unsigned int) {
  *pitch = (width + 511) & ~size_t{511};
  return Allocate(dptr, *pitch * height);
}
CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int) { return Allocate(dptr, bytes); }
CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream) { return Allocate(dptr, bytes); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream) { return Allocate(dptr, bytes); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool, CUstream) {
  return Allocate(dptr, bytes);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool, CUstream) {
  return Allocate(dptr, bytes);
}
CUresult cuMemFree_v2(CUdeviceptr dptr) {
  Unlog(dptr);
  return CUDA_SUCCESS;
}
CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) { return cuMemFree_v2(dptr); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) { return cuMemFree_v2(dptr); }
CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp*,
                     unsigned long long) {
  CUdeviceptr address = 0;
  CUresult r = Allocate(&address, bytes);
  if (r == CUDA_SUCCESS) *handle = address;
  return r;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle handle) { return cuMemFree_v2(handle); }
CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* d) {
  CUdeviceptr address = 0;
  CUresult r = Allocate(&address, d->Width * (d->Height ? d->Height : 1) * 4 * d->NumChannels);
  if (r == CUDA_SUCCESS) *array = reinterpret_cast<CUarray>(address);
  return r;
}
CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  CUdeviceptr address = 0;
  CUresult r = Allocate(&address, d->Width * (d->Height ? d->Height : 1) * (d->Depth ? d->Depth : 1) * 4 *
                                      d->NumChannels);
  if (r == CUDA_SUCCESS) *array = reinterpret_cast<CUarray>(address);
  return r;
}
CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned int) {
  CUdeviceptr address = 0;
  CUresult r = Allocate(&address, d->Width * (d->Height ? d->Height : 1) * 8 * d->NumChannels);
  if (r == CUDA_SUCCESS) *array = reinterpret_cast<CUmipmappedArray>(address);
  return r;
}
CUresult cuArrayDestroy(CUarray array) { return cuMemFree_v2(reinterpret_cast<CUdeviceptr>(array)); }
CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  return cuMemFree_v2(reinterpret_cast<CUdeviceptr>(array));
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status);
CUresult cuGetExportTable(const void** table, const void* id);

// Stands in for every entry point this fake lacks when FAKE_CUDA_STUB_ALL is
// set, to see how far the CUDA runtime gets with it.
CUresult FakeCudaNotSupported() { return 801; }  // CUDA_ERROR_NOT_SUPPORTED

}  // extern "C"

namespace {

struct Export {
  const char* name;
  void* fn;
};
#define FAKE_EXPORT(f) {#f, reinterpret_cast<void*>(&f)}
const Export kExports[] = {
    FAKE_EXPORT(cuInit), FAKE_EXPORT(cuDriverGetVersion), FAKE_EXPORT(cuDeviceGetCount),
    FAKE_EXPORT(cuDeviceGet), FAKE_EXPORT(cuGetErrorString), FAKE_EXPORT(cuGetErrorName),
    FAKE_EXPORT(cuMemGetInfo_v2), FAKE_EXPORT(cuMemAlloc_v2), FAKE_EXPORT(cuMemAllocPitch_v2),
    FAKE_EXPORT(cuMemAllocManaged), FAKE_EXPORT(cuMemAllocAsync), FAKE_EXPORT(cuMemAllocAsync_ptsz),
    FAKE_EXPORT(cuMemAllocFromPoolAsync), FAKE_EXPORT(cuMemAllocFromPoolAsync_ptsz), FAKE_EXPORT(cuMemFree_v2),
    FAKE_EXPORT(cuMemFreeAsync), FAKE_EXPORT(cuMemFreeAsync_ptsz), FAKE_EXPORT(cuMemCreate),
    FAKE_EXPORT(cuMemRelease), FAKE_EXPORT(cuArrayCreate_v2), FAKE_EXPORT(cuArray3DCreate_v2),
    FAKE_EXPORT(cuMipmappedArrayCreate), FAKE_EXPORT(cuArrayDestroy), FAKE_EXPORT(cuMipmappedArrayDestroy),
    FAKE_EXPORT(cuGetProcAddress_v2), FAKE_EXPORT(cuGetExportTable),
};

void* Find(const std::string& name) {
  for (const Export& e : kExports) {
    if (name == e.name) return e.fn;
  }
  return nullptr;
}

}  // namespace

extern "C" {

// Resolved from this library's own table, never through dlsym, so the tests
// see exactly what the fence makes of the driver's answer.
CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  std::string base = symbol;
  void* fn = nullptr;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0) fn = Find(base + "_ptsz");
  if (fn == nullptr && version >= 3020) fn = Find(base + "_v2");
  if (fn == nullptr && base == "cuGetProcAddress") fn = reinterpret_cast<void*>(&cuGetProcAddress_v2);
  if (fn == nullptr) fn = Find(base);
  if (fn == nullptr && getenv("FAKE_CUDA_STUB_ALL") != nullptr && !base.empty()) {
    fn = reinterpret_cast<void*>(&FakeCudaNotSupported);
  }
  if (getenv("FAKE_CUDA_TRACE") != nullptr) {
    fprintf(stderr, "fake libcuda: cuGetProcAddress %s %d %llu -> %s\n", symbol, version, flags, fn ? "found" : "none");
  }
  if (status != nullptr) *status = fn != nullptr ? 0 : 1;  // SUCCESS, SYMBOL_NOT_FOUND
  *pfn = fn;
  return fn != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}

// The runtime asks for the driver's private interfaces by UUID; this fake has none.
CUresult cuGetExportTable(const void** table, const void* id) {
  if (getenv("FAKE_CUDA_TRACE") != nullptr) {
    const unsigned char* b = static_cast<const unsigned char*>(id);
    fprintf(stderr, "fake libcuda: cuGetExportTable ");
    for (int i = 0; i < 16; ++i) fprintf(stderr, "%02x", b[i]);
    fprintf(stderr, "\n");
  }
  *table = nullptr;
  return CUDA_ERROR_NOT_FOUND;
}

}  // extern "C"
