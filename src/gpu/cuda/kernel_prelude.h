// What kernels.cu needs from a CUDA compiler, for both compilers that build it:
// clang's CUDA mode without any CUDA installation (-nocudainc, so nothing
// defines __global__, threadIdx or atomicAdd) and nvcc (which includes
// cuda_runtime.h by itself). Kernel code uses only the names below.
#pragma once

#include <stdint.h>

#if defined(__NVCC__)

#include <mma.h>  // WMMA; its BF16 fragments exist from sm_80 on

// BF16 tensor-core kernels: nvcc's sm_80 and newer code only. clang's sm_60
// PTX and nvcc's sm_75 code get stubs in their place (see kernels.cu).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GPUHERD_HAVE_BF16_MMA 1
#endif

#define GPUHERD_LAUNCH_BOUNDS(threads, min_blocks) __launch_bounds__(threads, min_blocks)
__device__ __forceinline__ unsigned long long AtomicAddU64(unsigned long long* counter,
                                                           unsigned long long value) {
  return atomicAdd(counter, value);
}
__device__ __forceinline__ void SyncThreads() { __syncthreads(); }
__device__ __forceinline__ float Fma(float a, float b, float c) { return __fmaf_rn(a, b, c); }
// 16-byte vectors: one v4 load or store each.
using Float4 = float4;
using Word4 = uint4;

#elif defined(__clang__) && defined(__CUDA__)

#include <__clang_cuda_builtin_vars.h>  // threadIdx, blockIdx, blockDim, gridDim

#define __host__ __attribute__((host))
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define GPUHERD_LAUNCH_BOUNDS(threads, min_blocks) \
  __attribute__((launch_bounds(threads, min_blocks)))
__device__ __forceinline__ unsigned long long AtomicAddU64(unsigned long long* counter,
                                                           unsigned long long value) {
  return static_cast<unsigned long long>(__nvvm_atom_add_gen_ll(
      reinterpret_cast<long long*>(counter), static_cast<long long>(value)));
}
__device__ __forceinline__ void SyncThreads() { __syncthreads(); }
__device__ __forceinline__ float Fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
// 16-byte vectors: one v4 load or store each (a plain struct would be split
// into scalar accesses, or copied through the stack).
typedef float Float4 __attribute__((ext_vector_type(4)));
typedef uint32_t Word4 __attribute__((ext_vector_type(4)));

#else
#error "kernel_prelude.h is for CUDA device compilation (clang -x cuda or nvcc)"
#endif
