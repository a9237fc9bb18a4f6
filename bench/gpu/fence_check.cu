// The memory fence on a real card (bench/gpu/fence_check.sh runs it). Modes:
//   fence_check hog GIB        cudaMalloc 256 MiB at a time up to GIB GiB; prints
//                              where it stopped and why ("hog stopped at X MiB: error")
//   fence_check neighbour GIB SECONDS   holds GIB GiB and keeps a kernel writing
//                              and checking it for SECONDS; "neighbour ok" or the error
//   fence_check bench N        N cuMemAlloc_v2 + cuMemFree_v2 pairs of 2 MiB, after
//                              a warm-up; prints nanoseconds per pair
//   fence_check info           cudaMemGetInfo's free and total
#include <cuda.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

__global__ void Fill(unsigned* data, size_t n, unsigned round) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    data[i] = static_cast<unsigned>(i) * 2654435761u + round;
  }
}

__global__ void Check(const unsigned* data, size_t n, unsigned round, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    if (data[i] != static_cast<unsigned>(i) * 2654435761u + round) atomicAdd(wrong, 1ull);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  if (std::strcmp(mode, "info") == 0) {
    size_t free_bytes = 0, total = 0;
    cudaError_t e = cudaMemGetInfo(&free_bytes, &total);
    std::printf("info free %zu MiB total %zu MiB (%s)\n", free_bytes >> 20, total >> 20, cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
  }
  if (std::strcmp(mode, "hog") == 0 && argc == 3) {
    const size_t want = std::strtoull(argv[2], nullptr, 10) << 30, chunk = size_t{256} << 20;
    std::vector<void*> held;
    size_t got = 0;
    cudaError_t e = cudaSuccess;
    while (got < want) {
      void* p = nullptr;
      e = cudaMalloc(&p, chunk);
      if (e != cudaSuccess) break;
      held.push_back(p);
      got += chunk;
    }
    size_t free_bytes = 0, total = 0;
    cudaMemGetInfo(&free_bytes, &total);
    std::printf("hog stopped at %zu MiB: %s; cudaMemGetInfo free %zu MiB total %zu MiB\n", got >> 20,
                e == cudaSuccess ? "took all it asked for" : cudaGetErrorName(e), free_bytes >> 20, total >> 20);
    for (void* p : held) cudaFree(p);
    return 0;
  }
  if (std::strcmp(mode, "neighbour") == 0 && argc == 4) {
    const size_t bytes = std::strtoull(argv[2], nullptr, 10) << 30, n = bytes / sizeof(unsigned);
    const double seconds = std::atof(argv[3]);
    unsigned* data = nullptr;
    unsigned long long* wrong = nullptr;
    cudaError_t e = cudaMalloc(&data, bytes);
    if (e == cudaSuccess) e = cudaMalloc(&wrong, sizeof(*wrong));
    if (e != cudaSuccess) {
      std::printf("neighbour cannot allocate: %s\n", cudaGetErrorName(e));
      return 1;
    }
    cudaMemset(wrong, 0, sizeof(*wrong));
    auto start = std::chrono::steady_clock::now();
    unsigned round = 0;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
      Fill<<<1024, 256>>>(data, n, ++round);
      Check<<<1024, 256>>>(data, n, round, wrong);
      e = cudaDeviceSynchronize();
      if (e != cudaSuccess) break;
    }
    unsigned long long bad = 0;
    if (e == cudaSuccess) e = cudaMemcpy(&bad, wrong, sizeof(bad), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess || bad != 0) {
      std::printf("neighbour failed after %u rounds: %s, %llu wrong words\n", round, cudaGetErrorName(e), bad);
      return 1;
    }
    std::printf("neighbour ok: %u rounds over %zu MiB, no error\n", round, bytes >> 20);
    return 0;
  }
  if (std::strcmp(mode, "bench") == 0 && argc == 3) {
    const int n = std::atoi(argv[2]);
    cudaFree(nullptr);  // creates the primary context
    CUcontext context = nullptr;
    cuCtxGetCurrent(&context);
    auto pairs = [&](int count) {
      for (int i = 0; i < count; ++i) {
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, size_t{2} << 20) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) return false;
      }
      return true;
    };
    if (!pairs(1000)) return 1;
    auto start = std::chrono::steady_clock::now();
    if (!pairs(n)) return 1;
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / n;
    std::printf("bench %.0f ns per cuMemAlloc+cuMemFree pair\n", ns);
    return 0;
  }
  std::fprintf(stderr, "usage: fence_check info | hog GIB | neighbour GIB SECONDS | bench N\n");
  return 2;
}
