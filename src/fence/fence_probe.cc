// A driver-API program for the memory fence's tests and benchmark. It is
// linked to the (fake) driver and reaches it one of three ways, chosen by its
// first argument: `direct` (the linked symbols), `dlsym` (dlopen
// "libcuda.so.1" and look up by handle, as the CUDA runtime starts) or
// `procaddress` (cuGetProcAddress_v2, as the runtime reaches everything else).
// The remaining arguments are steps, each answered by one line on stdout:
//   alloc MB      cuMemAlloc_v2 of MB MiB      -> "alloc MB RESULT"
//   alloc-bytes N cuMemAlloc_v2 of N bytes      -> "alloc-bytes N RESULT"
//   pitch W H     cuMemAllocPitch_v2             -> "pitch RESULT PITCH"
//   async MB / managed MB / create MB / array W H / array3d W H D / mipmap W H LEVELS
//   free          frees the newest allocation   -> "free RESULT"
//   info          cuMemGetInfo_v2               -> "info FREE TOTAL"
//   pause         prints "paused", waits for a line on stdin
//   sleep S       sleeps S seconds                -> "slept"
//   fenced        whether the entry points it uses are the preloaded
//                 library's ("fenced yes|no")
//   rtld-next     whether dlsym(RTLD_NEXT, "dlsym") from here finds the first
//                 dlsym after this program ("rtld-next ok|wrong")
//   bench N       N cuMemAlloc_v2+cuMemFree_v2 pairs of 1 MiB -> "bench NS_PER_PAIR"
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <string>
#include <vector>

#include "fence/cuda_driver.h"

extern "C" {
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuMemAllocPitch_v2(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemAllocManaged(CUdeviceptr*, size_t, unsigned int);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuArrayCreate_v2(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
CUresult cuArray3DCreate_v2(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
}

namespace {

struct Api {
  decltype(&cuMemAlloc_v2) alloc;
  decltype(&cuMemFree_v2) free;
  decltype(&cuMemGetInfo_v2) info;
  decltype(&cuMemAllocPitch_v2) pitch;
  decltype(&cuMemAllocAsync) alloc_async;
  decltype(&cuMemFreeAsync) free_async;
  decltype(&cuMemAllocManaged) managed;
  decltype(&cuMemCreate) create;
  decltype(&cuMemRelease) release;
  decltype(&cuArrayCreate_v2) array;
  decltype(&cuArray3DCreate_v2) array3d;
  decltype(&cuArrayDestroy) array_destroy;
  decltype(&cuMipmappedArrayCreate) mipmap;
  decltype(&cuMipmappedArrayDestroy) mipmap_destroy;
};

template <typename F>
void Get(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr) {
    fprintf(stderr, "fence_probe: no %s\n", name);
    exit(2);
  }
}

template <typename F>
void Proc(decltype(&cuGetProcAddress_v2) gpa, const char* name, F* out) {
  void* fn = nullptr;
  if (gpa(name, &fn, 12000, 0, nullptr) != CUDA_SUCCESS || fn == nullptr) {
    fprintf(stderr, "fence_probe: cuGetProcAddress found no %s\n", name);
    exit(2);
  }
  *out = reinterpret_cast<F>(fn);
}

Api Load(const std::string& via) {
  if (via == "direct") {
    return {cuMemAlloc_v2, cuMemFree_v2, cuMemGetInfo_v2, cuMemAllocPitch_v2, cuMemAllocAsync, cuMemFreeAsync,
            cuMemAllocManaged, cuMemCreate, cuMemRelease, cuArrayCreate_v2, cuArray3DCreate_v2, cuArrayDestroy,
            cuMipmappedArrayCreate, cuMipmappedArrayDestroy};
  }
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    fprintf(stderr, "fence_probe: %s\n", dlerror());
    exit(2);
  }
  Api api;
  if (via == "dlsym") {
    Get(handle, "cuMemAlloc_v2", &api.alloc);
    Get(handle, "cuMemFree_v2", &api.free);
    Get(handle, "cuMemGetInfo_v2", &api.info);
    Get(handle, "cuMemAllocPitch_v2", &api.pitch);
    Get(handle, "cuMemAllocAsync", &api.alloc_async);
    Get(handle, "cuMemFreeAsync", &api.free_async);
    Get(handle, "cuMemAllocManaged", &api.managed);
    Get(handle, "cuMemCreate", &api.create);
    Get(handle, "cuMemRelease", &api.release);
    Get(handle, "cuArrayCreate_v2", &api.array);
    Get(handle, "cuArray3DCreate_v2", &api.array3d);
    Get(handle, "cuArrayDestroy", &api.array_destroy);
    Get(handle, "cuMipmappedArrayCreate", &api.mipmap);
    Get(handle, "cuMipmappedArrayDestroy", &api.mipmap_destroy);
    return api;
  }
  decltype(&cuGetProcAddress_v2) gpa;
  Get(handle, "cuGetProcAddress_v2", &gpa);
  // Asked for by base name, as the runtime does.
  Proc(gpa, "cuMemAlloc", &api.alloc);
  Proc(gpa, "cuMemFree", &api.free);
  Proc(gpa, "cuMemGetInfo", &api.info);
  Proc(gpa, "cuMemAllocPitch", &api.pitch);
  Proc(gpa, "cuMemAllocAsync", &api.alloc_async);
  Proc(gpa, "cuMemFreeAsync", &api.free_async);
  Proc(gpa, "cuMemAllocManaged", &api.managed);
  Proc(gpa, "cuMemCreate", &api.create);
  Proc(gpa, "cuMemRelease", &api.release);
  Proc(gpa, "cuArrayCreate", &api.array);
  Proc(gpa, "cuArray3DCreate", &api.array3d);
  Proc(gpa, "cuArrayDestroy", &api.array_destroy);
  Proc(gpa, "cuMipmappedArrayCreate", &api.mipmap);
  Proc(gpa, "cuMipmappedArrayDestroy", &api.mipmap_destroy);
  return api;
}

struct Held {
  enum Kind { kPointer, kAsync, kHandle, kArray, kMipmap } kind;
  unsigned long long value;
};

double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: fence_probe direct|dlsym|procaddress STEP...\n");
    return 2;
  }
  Api api = Load(argv[1]);
  std::vector<Held> held;
  auto arg = [&](int& i) -> unsigned long long {
    if (i + 1 >= argc) {
      fprintf(stderr, "fence_probe: %s needs a number\n", argv[i]);
      exit(2);
    }
    return strtoull(argv[++i], nullptr, 10);
  };
  for (int i = 2; i < argc; ++i) {
    std::string step = argv[i];
    if (step == "alloc" || step == "alloc-bytes" || step == "async" || step == "managed" || step == "create") {
      unsigned long long n = arg(i);
      size_t bytes = step == "alloc-bytes" ? n : n << 20;
      CUdeviceptr p = 0;
      CUresult r;
      Held::Kind kind = Held::kPointer;
      if (step == "async") {
        r = api.alloc_async(&p, bytes, nullptr);
        kind = Held::kAsync;
      } else if (step == "managed") {
        r = api.managed(&p, bytes, 1);
      } else if (step == "create") {
        CUmemAllocationProp prop{};
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        r = api.create(&p, bytes, &prop, 0);
        kind = Held::kHandle;
      } else {
        r = api.alloc(&p, bytes);
      }
      if (r == CUDA_SUCCESS) held.push_back({kind, p});
      printf("%s %llu %d\n", step.c_str(), n, r);
    } else if (step == "pitch") {
      unsigned long long w = arg(i), h = arg(i);
      CUdeviceptr p = 0;
      size_t pitch = 0;
      CUresult r = api.pitch(&p, &pitch, w, h, 4);
      if (r == CUDA_SUCCESS) held.push_back({Held::kPointer, p});
      printf("pitch %d %zu\n", r, pitch);
    } else if (step == "array" || step == "array3d" || step == "mipmap") {
      unsigned long long w = arg(i), h = arg(i), third = arg(i);
      CUresult r;
      Held h_{Held::kArray, 0};
      if (step == "array") {
        CUDA_ARRAY_DESCRIPTOR d{w, h, CU_AD_FORMAT_FLOAT, static_cast<unsigned>(third)};
        CUarray a = nullptr;
        r = api.array(&a, &d);
        h_.value = reinterpret_cast<unsigned long long>(a);
      } else if (step == "array3d") {
        CUDA_ARRAY3D_DESCRIPTOR d{w, h, third, CU_AD_FORMAT_FLOAT, 1, 0};
        CUarray a = nullptr;
        r = api.array3d(&a, &d);
        h_.value = reinterpret_cast<unsigned long long>(a);
      } else {
        CUDA_ARRAY3D_DESCRIPTOR d{w, h, 0, CU_AD_FORMAT_FLOAT, 1, 0};
        CUmipmappedArray a = nullptr;
        r = api.mipmap(&a, &d, static_cast<unsigned>(third));
        h_ = {Held::kMipmap, reinterpret_cast<unsigned long long>(a)};
      }
      if (r == CUDA_SUCCESS) held.push_back(h_);
      printf("%s %d\n", step.c_str(), r);
    } else if (step == "free") {
      if (held.empty()) {
        printf("free none\n");
        continue;
      }
      Held h = held.back();
      held.pop_back();
      CUresult r;
      switch (h.kind) {
        case Held::kAsync: r = api.free_async(h.value, nullptr); break;
        case Held::kHandle: r = api.release(h.value); break;
        case Held::kArray: r = api.array_destroy(reinterpret_cast<CUarray>(h.value)); break;
        case Held::kMipmap: r = api.mipmap_destroy(reinterpret_cast<CUmipmappedArray>(h.value)); break;
        default: r = api.free(h.value); break;
      }
      printf("free %d\n", r);
    } else if (step == "info") {
      size_t free_bytes = 0, total = 0;
      CUresult r = api.info(&free_bytes, &total);
      printf("info %zu %zu %d\n", free_bytes, total, r);
    } else if (step == "pause") {
      printf("paused\n");
      char line[64];
      if (fgets(line, sizeof(line), stdin) == nullptr) {
      }
    } else if (step == "sleep") {
      unsigned long long seconds = arg(i);
      timespec ts{static_cast<time_t>(seconds), 0};
      nanosleep(&ts, nullptr);
      printf("slept\n");
    } else if (step == "fenced") {
      Dl_info where{};
      dladdr(reinterpret_cast<void*>(api.alloc), &where);
      bool fenced = where.dli_fname != nullptr && strstr(where.dli_fname, "gpuherd-fence") != nullptr;
      printf("fenced %s\n", fenced ? "yes" : "no");
    } else if (step == "rtld-next") {
      void* next = dlsym(RTLD_NEXT, "dlsym");
      void* first = dlsym(RTLD_DEFAULT, "dlsym");
      printf("rtld-next %s\n", next == first ? "ok" : "wrong");
    } else if (step == "bench") {
      unsigned long long n = arg(i);
      double start = NowNs();
      for (unsigned long long k = 0; k < n; ++k) {
        CUdeviceptr p = 0;
        if (api.alloc(&p, 1 << 20) != CUDA_SUCCESS || api.free(p) != CUDA_SUCCESS) {
          printf("bench failed\n");
          return 1;
        }
      }
      printf("bench %.1f\n", (NowNs() - start) / n);
    } else {
      fprintf(stderr, "fence_probe: unknown step %s\n", step.c_str());
      return 2;
    }
  }
  return 0;
}
