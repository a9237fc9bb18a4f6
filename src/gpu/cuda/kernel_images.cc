#include "gpu/cuda/kernel_images.h"

#if GPUHERD_HAVE_CUDA_KERNELS
extern "C" const unsigned char gpuherd_kernels_ptx[];
extern "C" const unsigned long gpuherd_kernels_ptx_size;
#endif
#if GPUHERD_HAVE_CUDA_FATBIN
extern "C" const unsigned char gpuherd_kernels_fatbin[];
extern "C" const unsigned long gpuherd_kernels_fatbin_size;
#endif

namespace gpuherd::gpu::cuda {
namespace {

constexpr const char* kEntryNames[] = {
    "memtest_write_walking_ones",    "memtest_check_walking_ones",
    "memtest_write_walking_zeros",   "memtest_check_walking_zeros",
    "memtest_write_own_address",     "memtest_check_own_address",
    "memtest_write_constant",        "memtest_check_constant",
    "memtest_write_modulo_20",       "memtest_check_modulo_20",
    "memtest_write_random_sequence", "memtest_check_random_sequence",
    "copy_f4",                       "fill_uniform_f32",
    "fill_uniform_f16x2",            "sgemm_128x128x8",
    "hgemm_f16x2",                   "compare_words",
    "fill_uniform_bf16x2",           "bgemm_bf16_wmma",
};

}  // namespace

bool KernelsBuilt() { return GPUHERD_HAVE_CUDA_KERNELS != 0; }

std::string_view KernelPtx() {
#if GPUHERD_HAVE_CUDA_KERNELS
  return {reinterpret_cast<const char*>(gpuherd_kernels_ptx), gpuherd_kernels_ptx_size};
#else
  return {};
#endif
}

std::span<const unsigned char> KernelFatbin() {
#if GPUHERD_HAVE_CUDA_FATBIN
  return {gpuherd_kernels_fatbin, gpuherd_kernels_fatbin_size};
#else
  return {};
#endif
}

std::span<const char* const> KernelEntryNames() { return kEntryNames; }

}  // namespace gpuherd::gpu::cuda
