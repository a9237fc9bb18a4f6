// The compiled forms of kernels.cu that are embedded in the binary, and the
// entry points the loader looks up in them.
#pragma once

#include <span>
#include <string_view>

namespace gpuherd::gpu::cuda {

// True when the build embedded the PTX (clang was found at configure time).
bool KernelsBuilt();

// PTX for sm_60, which the driver compiles at load time for any GPU from
// Pascal on. NUL-terminated, as cuModuleLoadData wants it; the view excludes
// the NUL. Empty when !KernelsBuilt().
std::string_view KernelPtx();

// nvcc's fatbin with native code for sm_75..sm_90 and compute_90 PTX; empty
// when the build had no nvcc (or GPUHERD_CUDA_FATBIN was off).
std::span<const unsigned char> KernelFatbin();

// Every extern "C" kernel of kernels.cu that CudaComputeDevice launches.
std::span<const char* const> KernelEntryNames();

}  // namespace gpuherd::gpu::cuda
