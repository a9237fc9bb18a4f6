// libgpuherd-fence.so: the memory fence the shim preloads into fractional
// jobs (docs/queue.md "Fractional GPUs: the memory fence"). It interposes the CUDA
// driver API's allocation entry points and checks each against the job's
// share of its GPU, kept in a ledger file that all of the job's processes
// share (ledger.h). It reaches the driver three ways, as programs do: by
// symbol (programs linked to libcuda), by dlsym on a handle of libcuda (the
// CUDA runtime dlopens it) and by cuGetProcAddress (the runtime's way to
// every other entry point); all three hand out the fenced functions.
//
// Built without the C++ runtime (no exceptions, no new, no static guards):
// it lives in every process of a job. Any failure of its own turns the fence
// off for the process, says so once on stderr and in the status file, and
// passes every call straight to the driver.
//
// Process-wide state is unavoidable here: an interposer has nowhere else to
// keep it. It is all in `g` below.
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fence/cuda_driver.h"
#include "fence/ledger.h"

#define FENCE_EXPORT extern "C" __attribute__((visibility("default")))

namespace gpuherd::fence {
namespace {

// The entry points the fence replaces, and how cuGetProcAddress names them:
// by their base name, the version the caller was built for choosing _v2, and
// the per-thread default stream flag choosing _ptsz.
enum Fn {
  kMemAlloc, kMemAllocPitch, kMemAllocManaged, kMemAllocAsync, kMemAllocAsyncPtsz,
  kMemAllocFromPoolAsync, kMemAllocFromPoolAsyncPtsz, kMemCreate, kArrayCreate, kArray3DCreate,
  kMipmappedArrayCreate, kMemFree, kMemFreeAsync, kMemFreeAsyncPtsz, kMemRelease, kArrayDestroy,
  kMipmappedArrayDestroy, kMemGetInfo, kGetProcAddress, kGetProcAddressV2, kFnCount
};

struct FnName {
  const char* exported;
  const char* base;
  int min_version;  // cuGetProcAddress's cudaVersion from which this is the one
  int below_version;  // 0: no upper bound
  int ptsz;  // 1: only with the per-thread flag, 0: only without, -1: either
};

constexpr FnName kNames[kFnCount] = {
    {"cuMemAlloc_v2", "cuMemAlloc", 3020, 0, -1},
    {"cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, 0, -1},
    {"cuMemAllocManaged", "cuMemAllocManaged", 0, 0, -1},
    {"cuMemAllocAsync", "cuMemAllocAsync", 0, 0, 0},
    {"cuMemAllocAsync_ptsz", "cuMemAllocAsync", 0, 0, 1},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 0, 0, 0},
    {"cuMemAllocFromPoolAsync_ptsz", "cuMemAllocFromPoolAsync", 0, 0, 1},
    {"cuMemCreate", "cuMemCreate", 0, 0, -1},
    {"cuArrayCreate_v2", "cuArrayCreate", 3020, 0, -1},
    {"cuArray3DCreate_v2", "cuArray3DCreate", 3020, 0, -1},
    {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 0, 0, -1},
    {"cuMemFree_v2", "cuMemFree", 3020, 0, -1},
    {"cuMemFreeAsync", "cuMemFreeAsync", 0, 0, 0},
    {"cuMemFreeAsync_ptsz", "cuMemFreeAsync", 0, 0, 1},
    {"cuMemRelease", "cuMemRelease", 0, 0, -1},
    {"cuArrayDestroy", "cuArrayDestroy", 0, 0, -1},
    {"cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 0, 0, -1},
    {"cuMemGetInfo_v2", "cuMemGetInfo", 3020, 0, -1},
    {"cuGetProcAddress", "cuGetProcAddress", 0, 12000, -1},
    {"cuGetProcAddress_v2", "cuGetProcAddress", 12000, 0, -1},
};

// What an account entry in the process's own table is for: the keys of
// different kinds live in different namespaces.
enum Kind : uint32_t { kPointer = 1, kHandle = 2, kArray = 3, kMipmapped = 4 };

struct Slot {
  uint64_t key;
  uint64_t bytes;
  uint32_t kind;  // 0: empty
  uint32_t unused;
};

enum State { kUninitialized = 0, kActive = 1, kOff = 2 };

struct Globals {
  void* real[kFnCount];
  void* wrapper[kFnCount];
  void* driver_handle;  // the handle the program looked the driver up through
  int state;
  pthread_mutex_t init_mutex;
  LedgerFile* ledger;
  int slot;
  // Device pointers, handles and arrays this process holds, with their sizes:
  // open addressing, linear probing, backward-shift deletion.
  pthread_mutex_t table_mutex;
  Slot* table;
  size_t capacity;  // a power of two
  size_t count;
};

Globals g = {{}, {}, nullptr, kUninitialized, PTHREAD_MUTEX_INITIALIZER, nullptr, -1,
             PTHREAD_MUTEX_INITIALIZER, nullptr, 0, 0};

using DlsymFn = void* (*)(void*, const char*);
DlsymFn real_dlsym = nullptr;

DlsymFn RealDlsym() {
  DlsymFn fn = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);
  if (fn != nullptr) return fn;
  // dlvsym is not interposed; the version names the libc that has dlsym.
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (const char* version : kVersions) {
    fn = reinterpret_cast<DlsymFn>(dlvsym(RTLD_NEXT, "dlsym", version));
    if (fn != nullptr) break;
  }
  __atomic_store_n(&real_dlsym, fn, __ATOMIC_RELEASE);
  return fn;
}

bool IsWrapper(void* p) {
  for (void* w : g.wrapper) {
    if (w == p) return true;
  }
  return false;
}

void* Lookup(const char* name) {
  DlsymFn dl = RealDlsym();
  if (dl == nullptr) return nullptr;
  void* handle = __atomic_load_n(&g.driver_handle, __ATOMIC_ACQUIRE);
  void* p = handle != nullptr ? dl(handle, name) : nullptr;
  if (p == nullptr || IsWrapper(p)) p = dl(RTLD_NEXT, name);
  if (p == nullptr || IsWrapper(p)) {
    void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    p = cuda != nullptr ? dl(cuda, name) : nullptr;
    if (cuda != nullptr) dlclose(cuda);
  }
  return p != nullptr && !IsWrapper(p) ? p : nullptr;
}

void* Real(Fn f) {
  void* p = __atomic_load_n(&g.real[f], __ATOMIC_ACQUIRE);
  if (p != nullptr) return p;
  p = Lookup(kNames[f].exported);
  void* expected = nullptr;
  if (p != nullptr && !__atomic_compare_exchange_n(&g.real[f], &expected, p, false, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_ACQUIRE)) {
    p = expected;
  }
  return p;
}

// Remembers what the driver handed out for `f` unless something is already known.
void Learn(Fn f, void* p) {
  void* expected = nullptr;
  __atomic_compare_exchange_n(&g.real[f], &expected, p, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

void WriteAll(int fd, const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    ssize_t n = write(fd, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// The status file the daemon reads for `gpuherd show`: one line.
void WriteStatus(const char* line) {
  const char* path = getenv("GPUHERD_FENCE_STATUS");
  if (path == nullptr || *path == '\0') return;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return;
  WriteAll(fd, line);
  close(fd);
}

// Under init_mutex or the fork handler: turns the fence off for this process.
void TurnOff(const char* reason) {
  char line[512];
  snprintf(line, sizeof(line),
           "gpuherd-fence: %s; GPU memory is not fenced in process %d (the memory watchdog still applies)\n",
           reason, static_cast<int>(getpid()));
  WriteAll(2, line);
  snprintf(line, sizeof(line), "off %s\n", reason);
  WriteStatus(line);
  __atomic_store_n(&g.state, kOff, __ATOMIC_RELEASE);
}

bool ParseBytes(const char* text, uint64_t scale, uint64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  uint64_t value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9' || value > (UINT64_MAX - 9) / 10) return false;
    value = value * 10 + static_cast<uint64_t>(*p - '0');
  }
  if (value > UINT64_MAX / scale) return false;
  *out = value * scale;
  return true;
}

void ChildAfterFork() {
  // The child holds no device memory of its parent; it claims its own entry
  // at its first CUDA call.
  if (g.table != nullptr) munmap(g.table, g.capacity * sizeof(Slot));
  g.table = nullptr;
  g.capacity = g.count = 0;
  g.slot = -1;
  pthread_mutex_init(&g.table_mutex, nullptr);
  pthread_mutex_init(&g.init_mutex, nullptr);
  if (__atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == kActive) __atomic_store_n(&g.state, kUninitialized, __ATOMIC_RELEASE);
}

void Initialize() {
  uint64_t limit = 0;
  const char* bytes = getenv("GPUHERD_GPU_MEM_LIMIT_BYTES");
  const char* mb = getenv("GPUHERD_GPU_MEM_LIMIT_MB");
  if (bytes == nullptr && mb == nullptr) {
    // Not a fractional job: nothing to fence, nothing to say.
    __atomic_store_n(&g.state, kOff, __ATOMIC_RELEASE);
    return;
  }
  if (!(bytes != nullptr ? ParseBytes(bytes, 1, &limit) : ParseBytes(mb, uint64_t{1} << 20, &limit))) {
    TurnOff("the job's GPU memory share (GPUHERD_GPU_MEM_LIMIT_BYTES/_MB) is not a number");
    return;
  }
  const char* path = getenv("GPUHERD_FENCE_LEDGER");
  if (path == nullptr || *path == '\0') {
    TurnOff("GPUHERD_FENCE_LEDGER is not set");
    return;
  }
  char error[384] = "";
  if (g.ledger == nullptr) g.ledger = OpenLedger(path, limit, error, sizeof(error));
  if (g.ledger == nullptr) {
    TurnOff(error);
    return;
  }
  if (!LockLedger(g.ledger)) {
    TurnOff("the ledger's lock is unusable");
    return;
  }
  pid_t pid = getpid();
  g.slot = ClaimEntry(g.ledger, pid, ProcessStartTime(pid));
  uint64_t share = g.ledger->limit_bytes;
  UnlockLedger(g.ledger);
  if (g.slot < 0) {
    TurnOff("the ledger has no room for another process");
    return;
  }
  static bool fork_handler = false;
  if (!fork_handler) {
    fork_handler = true;
    pthread_atfork(nullptr, nullptr, ChildAfterFork);
  }
  char line[128];
  snprintf(line, sizeof(line), "active %llu\n", static_cast<unsigned long long>(share));
  WriteStatus(line);
  __atomic_store_n(&g.state, kActive, __ATOMIC_RELEASE);
}

bool Active() {
  int state = __atomic_load_n(&g.state, __ATOMIC_ACQUIRE);
  if (state == kUninitialized) {
    pthread_mutex_lock(&g.init_mutex);
    if (__atomic_load_n(&g.state, __ATOMIC_ACQUIRE) == kUninitialized) Initialize();
    pthread_mutex_unlock(&g.init_mutex);
    state = __atomic_load_n(&g.state, __ATOMIC_ACQUIRE);
  }
  return state == kActive;
}

// ---- The process's own table ----

size_t Hash(uint32_t kind, uint64_t key, size_t capacity) {
  return static_cast<size_t>(((key ^ kind) * 0x9e3779b97f4a7c15ull) >> 20) & (capacity - 1);
}

bool Grow() {
  size_t capacity = g.capacity == 0 ? 1024 : g.capacity * 2;
  void* memory = mmap(nullptr, capacity * sizeof(Slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return false;
  Slot* table = static_cast<Slot*>(memory);
  for (size_t i = 0; i < g.capacity; ++i) {
    const Slot& s = g.table[i];
    if (s.kind == 0) continue;
    size_t at = Hash(s.kind, s.key, capacity);
    while (table[at].kind != 0) at = (at + 1) & (capacity - 1);
    table[at] = s;
  }
  if (g.table != nullptr) munmap(g.table, g.capacity * sizeof(Slot));
  g.table = table;
  g.capacity = capacity;
  return true;
}

bool Remember(uint32_t kind, uint64_t key, uint64_t bytes) {
  pthread_mutex_lock(&g.table_mutex);
  bool ok = (g.count + 1) * 2 <= g.capacity || Grow();
  if (ok) {
    size_t at = Hash(kind, key, g.capacity);
    while (g.table[at].kind != 0 && !(g.table[at].kind == kind && g.table[at].key == key)) {
      at = (at + 1) & (g.capacity - 1);
    }
    if (g.table[at].kind == 0) ++g.count;
    g.table[at] = Slot{key, bytes, kind, 0};
  }
  pthread_mutex_unlock(&g.table_mutex);
  return ok;
}

// Forgets `key` and returns its size; 0 when it was not fenced.
uint64_t Forget(uint32_t kind, uint64_t key) {
  uint64_t bytes = 0;
  pthread_mutex_lock(&g.table_mutex);
  if (g.capacity > 0) {
    size_t mask = g.capacity - 1;
    size_t at = Hash(kind, key, g.capacity);
    while (g.table[at].kind != 0 && !(g.table[at].kind == kind && g.table[at].key == key)) at = (at + 1) & mask;
    if (g.table[at].kind != 0) {
      bytes = g.table[at].bytes;
      --g.count;
      // Backward shift: pull later entries of the run into the hole.
      size_t hole = at;
      for (size_t next = (hole + 1) & mask; g.table[next].kind != 0; next = (next + 1) & mask) {
        size_t home = Hash(g.table[next].kind, g.table[next].key, g.capacity);
        if (((next - home) & mask) >= ((next - hole) & mask)) {
          g.table[hole] = g.table[next];
          hole = next;
        }
      }
      g.table[hole] = Slot{};
    }
  }
  pthread_mutex_unlock(&g.table_mutex);
  return bytes;
}

// ---- The account ----

bool ReserveShare(uint64_t bytes) {
  if (!LockLedger(g.ledger)) return true;  // an unusable lock fences nothing
  bool ok = Reserve(g.ledger, g.slot, bytes);
  UnlockLedger(g.ledger);
  return ok;
}

void Adjust(uint64_t reserved, uint64_t actual) {
  if (reserved == actual || !LockLedger(g.ledger)) return;
  if (actual > reserved) {
    Charge(g.ledger, g.slot, actual - reserved);
  } else {
    Release(g.ledger, g.slot, reserved - actual);
  }
  UnlockLedger(g.ledger);
}

// The allocation protocol: reserve, call the driver, give back on failure,
// remember what it made on success. `call` returns the driver's result and
// sets the key and the bytes actually taken.
template <typename Call>
CUresult Allocate(uint32_t kind, uint64_t bytes, Call call) {
  uint64_t key = 0, actual = bytes;
  if (!Active()) return call(&key, &actual);
  if (!ReserveShare(bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult result = call(&key, &actual);
  if (result != CUDA_SUCCESS) {
    Adjust(bytes, 0);
    return result;
  }
  Adjust(bytes, actual);
  // Without room to remember it, the allocation stays counted until the
  // process ends: stricter, never looser.
  Remember(kind, key, actual);
  return result;
}

// Frees are counted back only once the driver agreed.
template <typename Call>
CUresult Free(uint32_t kind, uint64_t key, Call call) {
  if (!Active()) return call();
  uint64_t bytes = Forget(kind, key);
  CUresult result = call();
  if (result != CUDA_SUCCESS) {
    if (bytes > 0) Remember(kind, key, bytes);
    return result;
  }
  Adjust(bytes, 0);
  return result;
}

uint64_t FormatBytes(int format) {
  switch (format) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16: case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
  }
}

uint64_t ArrayBytes(size_t width, size_t height, size_t depth, int format, unsigned channels) {
  return static_cast<uint64_t>(width) * (height == 0 ? 1 : height) * (depth == 0 ? 1 : depth) *
         FormatBytes(format) * (channels == 0 ? 1 : channels);
}

uint64_t MipmapBytes(const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned levels) {
  uint64_t total = 0;
  size_t w = d->Width, h = d->Height, z = d->Depth;
  for (unsigned i = 0; i < (levels == 0 ? 1 : levels); ++i) {
    total += ArrayBytes(w, h, z, d->Format, d->NumChannels);
    w = w > 1 ? w / 2 : 1;
    h = h > 1 ? h / 2 : h;
    z = z > 1 ? z / 2 : z;
  }
  return total;
}

template <typename F>
F RealFn(Fn f) {
  return reinterpret_cast<F>(Real(f));
}

// The fenced replacement for what the driver handed out under `symbol`.
void* Substitute(const char* symbol, void* p, int version, cuuint64_t flags) {
  if (p == nullptr || IsWrapper(p)) return p;
  for (int f = 0; f < kFnCount; ++f) {
    if (__atomic_load_n(&g.real[f], __ATOMIC_ACQUIRE) == p) return g.wrapper[f];
  }
  const int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0 ? 1 : 0;
  for (int f = 0; f < kFnCount; ++f) {
    const FnName& n = kNames[f];
    if (strcmp(n.base, symbol) != 0 || version < n.min_version) continue;
    if (n.below_version != 0 && version >= n.below_version) continue;
    if (n.ptsz != -1 && n.ptsz != ptsz) continue;
    Learn(static_cast<Fn>(f), p);
    return g.wrapper[f];
  }
  return p;
}

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcAddressV2Fn = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);

}  // namespace
}  // namespace gpuherd::fence

using namespace gpuherd::fence;  // NOLINT: the C ABI below is unqualified

// ---- The fenced entry points (CUDA's names and signatures) ----

FENCE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  auto real = RealFn<CUresult (*)(CUdeviceptr*, size_t)>(kMemAlloc);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Allocate(kPointer, bytes, [&](uint64_t* key, uint64_t*) {
    CUresult r = real(dptr, bytes);
    if (r == CUDA_SUCCESS) *key = *dptr;
    return r;
  });
}

FENCE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                                         unsigned int element_bytes) {
  auto real = RealFn<CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int)>(kMemAllocPitch);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  // Reserved at the width; charged at the pitch the driver chose.
  return Allocate(kPointer, static_cast<uint64_t>(width) * height, [&](uint64_t* key, uint64_t* actual) {
    CUresult r = real(dptr, pitch, width, height, element_bytes);
    if (r == CUDA_SUCCESS) {
      *key = *dptr;
      *actual = static_cast<uint64_t>(*pitch) * height;
    }
    return r;
  });
}

FENCE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int flags) {
  auto real = RealFn<CUresult (*)(CUdeviceptr*, size_t, unsigned int)>(kMemAllocManaged);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Allocate(kPointer, bytes, [&](uint64_t* key, uint64_t*) {
    CUresult r = real(dptr, bytes, flags);
    if (r == CUDA_SUCCESS) *key = *dptr;
    return r;
  });
}

namespace {
CUresult AllocAsync(Fn f, CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  auto real = RealFn<CUresult (*)(CUdeviceptr*, size_t, CUstream)>(f);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Allocate(kPointer, bytes, [&](uint64_t* key, uint64_t*) {
    CUresult r = real(dptr, bytes, stream);
    if (r == CUDA_SUCCESS) *key = *dptr;
    return r;
  });
}
CUresult AllocFromPoolAsync(Fn f, CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  auto real = RealFn<CUresult (*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream)>(f);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Allocate(kPointer, bytes, [&](uint64_t* key, uint64_t*) {
    CUresult r = real(dptr, bytes, pool, stream);
    if (r == CUDA_SUCCESS) *key = *dptr;
    return r;
  });
}
CUresult FreeAsync(Fn f, CUdeviceptr dptr, CUstream stream) {
  auto real = RealFn<CUresult (*)(CUdeviceptr, CUstream)>(f);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Free(kPointer, dptr, [&] { return real(dptr, stream); });
}
}  // namespace

FENCE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocAsync(kMemAllocAsync, dptr, bytes, stream);
}
FENCE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return AllocAsync(kMemAllocAsyncPtsz, dptr, bytes, stream);
}
FENCE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  return AllocFromPoolAsync(kMemAllocFromPoolAsync, dptr, bytes, pool, stream);
}
FENCE_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                                   CUstream stream) {
  return AllocFromPoolAsync(kMemAllocFromPoolAsyncPtsz, dptr, bytes, pool, stream);
}

FENCE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t bytes, const CUmemAllocationProp* prop,
                                  unsigned long long flags) {
  auto real = RealFn<CUresult (*)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                                  unsigned long long)>(kMemCreate);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  // Pinned host memory made through the same call is not the GPU's.
  if (prop == nullptr || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return real(handle, bytes, prop, flags);
  return Allocate(kHandle, bytes, [&](uint64_t* key, uint64_t*) {
    CUresult r = real(handle, bytes, prop, flags);
    if (r == CUDA_SUCCESS) *key = *handle;
    return r;
  });
}

FENCE_EXPORT CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  auto real = RealFn<CUresult (*)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*)>(kArrayCreate);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (desc == nullptr) return real(array, desc);
  return Allocate(kArray, ArrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels),
                  [&](uint64_t* key, uint64_t*) {
                    CUresult r = real(array, desc);
                    if (r == CUDA_SUCCESS) *key = reinterpret_cast<uint64_t>(*array);
                    return r;
                  });
}

FENCE_EXPORT CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  auto real = RealFn<CUresult (*)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*)>(kArray3DCreate);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (desc == nullptr) return real(array, desc);
  return Allocate(kArray, ArrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels),
                  [&](uint64_t* key, uint64_t*) {
                    CUresult r = real(array, desc);
                    if (r == CUDA_SUCCESS) *key = reinterpret_cast<uint64_t>(*array);
                    return r;
                  });
}

FENCE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                             unsigned int levels) {
  auto real = RealFn<CUresult (*)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int)>(
      kMipmappedArrayCreate);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (desc == nullptr) return real(array, desc, levels);
  return Allocate(kMipmapped, MipmapBytes(desc, levels), [&](uint64_t* key, uint64_t*) {
    CUresult r = real(array, desc, levels);
    if (r == CUDA_SUCCESS) *key = reinterpret_cast<uint64_t>(*array);
    return r;
  });
}

FENCE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  auto real = RealFn<CUresult (*)(CUdeviceptr)>(kMemFree);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Free(kPointer, dptr, [&] { return real(dptr); });
}
FENCE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) { return FreeAsync(kMemFreeAsync, dptr, stream); }
FENCE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return FreeAsync(kMemFreeAsyncPtsz, dptr, stream);
}
FENCE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  auto real = RealFn<CUresult (*)(CUmemGenericAllocationHandle)>(kMemRelease);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Free(kHandle, handle, [&] { return real(handle); });
}
FENCE_EXPORT CUresult cuArrayDestroy(CUarray array) {
  auto real = RealFn<CUresult (*)(CUarray)>(kArrayDestroy);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Free(kArray, reinterpret_cast<uint64_t>(array), [&] { return real(array); });
}
FENCE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  auto real = RealFn<CUresult (*)(CUmipmappedArray)>(kMipmappedArrayDestroy);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  return Free(kMipmapped, reinterpret_cast<uint64_t>(array), [&] { return real(array); });
}

// The share is the total; what is left of it (or less, when the card itself
// has less free) is free: frameworks size their caches from this.
FENCE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  auto real = RealFn<CUresult (*)(size_t*, size_t*)>(kMemGetInfo);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real(free_bytes, total_bytes);
  if (r != CUDA_SUCCESS || !Active() || !LockLedger(g.ledger)) return r;
  ReclaimDead(g.ledger);  // not a hot call: what dead processes held is free
  uint64_t limit = g.ledger->limit_bytes, used = g.ledger->used_bytes;
  UnlockLedger(g.ledger);
  uint64_t left = used >= limit ? 0 : limit - used;
  if (free_bytes != nullptr && *free_bytes > left) *free_bytes = left;
  if (total_bytes != nullptr) *total_bytes = limit;
  return r;
}

FENCE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  auto real = RealFn<GetProcAddressFn>(kGetProcAddress);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real(symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr) *pfn = Substitute(symbol, *pfn, version, flags);
  return r;
}

FENCE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                          CUdriverProcAddressQueryResult* status) {
  auto real = RealFn<GetProcAddressV2Fn>(kGetProcAddressV2);
  if (real == nullptr) return CUDA_ERROR_NOT_FOUND;
  CUresult r = real(symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && symbol != nullptr && pfn != nullptr) *pfn = Substitute(symbol, *pfn, version, flags);
  return r;
}

// A program (the CUDA runtime among them) that dlopens the driver and looks
// its entry points up by handle gets the fenced ones. Everything else,
// RTLD_NEXT above all, goes to the real dlsym by a tail call, so that it sees
// its caller's return address, not this library's.
FENCE_EXPORT void* dlsym(void* handle, const char* name) {
  DlsymFn real = RealDlsym();
  if (real == nullptr) return nullptr;
  if (handle != RTLD_NEXT && name[0] == 'c' && name[1] == 'u') {
    for (int f = 0; f < kFnCount; ++f) {
      if (strcmp(kNames[f].exported, name) != 0) continue;
      void* p = real(handle, name);
      if (p == nullptr || IsWrapper(p)) return p;
      if (handle != RTLD_DEFAULT) __atomic_store_n(&g.driver_handle, handle, __ATOMIC_RELEASE);
      Learn(static_cast<Fn>(f), p);
      return g.wrapper[f];
    }
  }
  return real(handle, name);
}

namespace {

__attribute__((constructor)) void RegisterWrappers() {
  void* wrappers[kFnCount] = {
      reinterpret_cast<void*>(&cuMemAlloc_v2), reinterpret_cast<void*>(&cuMemAllocPitch_v2),
      reinterpret_cast<void*>(&cuMemAllocManaged), reinterpret_cast<void*>(&cuMemAllocAsync),
      reinterpret_cast<void*>(&cuMemAllocAsync_ptsz), reinterpret_cast<void*>(&cuMemAllocFromPoolAsync),
      reinterpret_cast<void*>(&cuMemAllocFromPoolAsync_ptsz), reinterpret_cast<void*>(&cuMemCreate),
      reinterpret_cast<void*>(&cuArrayCreate_v2), reinterpret_cast<void*>(&cuArray3DCreate_v2),
      reinterpret_cast<void*>(&cuMipmappedArrayCreate), reinterpret_cast<void*>(&cuMemFree_v2),
      reinterpret_cast<void*>(&cuMemFreeAsync), reinterpret_cast<void*>(&cuMemFreeAsync_ptsz),
      reinterpret_cast<void*>(&cuMemRelease), reinterpret_cast<void*>(&cuArrayDestroy),
      reinterpret_cast<void*>(&cuMipmappedArrayDestroy), reinterpret_cast<void*>(&cuMemGetInfo_v2),
      reinterpret_cast<void*>(&cuGetProcAddress), reinterpret_cast<void*>(&cuGetProcAddress_v2)};
  memcpy(g.wrapper, wrappers, sizeof(wrappers));
}

// The driver frees a process's memory when it ends; so does its entry.
__attribute__((destructor)) void ReleaseEntry() {
  if (__atomic_load_n(&g.state, __ATOMIC_ACQUIRE) != kActive || !LockLedger(g.ledger)) return;
  Release(g.ledger, g.slot, g.ledger->entries[g.slot].bytes);
  g.ledger->entries[g.slot].pid = 0;
  UnlockLedger(g.ledger);
}

}  // namespace
