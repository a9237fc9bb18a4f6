#include "gpu/cuda/cuda_library.h"

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::gpu::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaLibraryTest, MissingLibraryIsUnavailableWithDlerrorText) {
  auto library = CudaLibrary::Open("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), Code::kUnavailable);
  EXPECT_THAT(library.status().message(), HasSubstr("/nonexistent/libcuda.so.1"));
  EXPECT_THAT(library.status().message(), HasSubstr("cannot open shared object file"));
  EXPECT_THAT(library.status().message(), HasSubstr("GPUHERD_CUDA_LIBRARY"));
}

TEST(CudaLibraryTest, MissingRequiredSymbolIsNamed) {
  auto library = CudaLibrary::Open(FAKE_CUDA_NO_LAUNCH_PATH);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), Code::kUnavailable);
  EXPECT_THAT(library.status().message(), HasSubstr("required symbol cuLaunchKernel"));
  EXPECT_THAT(library.status().message(), HasSubstr("undefined symbol: cuLaunchKernel"));
  EXPECT_THAT(library.status().message(), HasSubstr(FAKE_CUDA_NO_LAUNCH_PATH));
}

TEST(CudaLibraryTest, CurrentDriverResolvesVersionedNames) {
  auto library = CudaLibrary::Open(FAKE_CUDA_PATH);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ((*library)->ResolvedName("cuDeviceGetUuid_v2"), "cuDeviceGetUuid_v2");
  EXPECT_EQ((*library)->ResolvedName("cuEventElapsedTime_v2"), "cuEventElapsedTime_v2");
  EXPECT_EQ((*library)->ResolvedName("cuMemAlloc_v2"), "cuMemAlloc_v2");
  EXPECT_EQ((*library)->ResolvedName("cuNoSuchEntry"), "");
}

TEST(CudaLibraryTest, OlderDriverFallsBackToUnversionedNames) {
  auto library = CudaLibrary::Open(FAKE_CUDA_LEGACY_PATH);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ((*library)->ResolvedName("cuDeviceGetUuid_v2"), "cuDeviceGetUuid");
  EXPECT_EQ((*library)->ResolvedName("cuEventElapsedTime_v2"), "cuEventElapsedTime");
}

TEST(CudaLibraryTest, ErrorsCarryTheCudaErrorName) {
  auto library = CudaLibrary::Open(FAKE_CUDA_PATH);
  ASSERT_TRUE(library.ok()) << library.status().ToString();
  EXPECT_EQ((*library)->ErrorText(CUDA_ERROR_NO_DEVICE),
            "CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected");
  EXPECT_THAT((*library)->ErrorText(static_cast<CUresult>(4242)),
              HasSubstr("CUDA_ERROR_UNRECOGNIZED (4242)"));
  Status launch = (*library)->Check(CUDA_ERROR_LAUNCH_FAILED, "cuLaunchKernel(x)");
  EXPECT_EQ(launch.code(), Code::kUnavailable);
  EXPECT_THAT(launch.message(), HasSubstr("cuLaunchKernel(x): CUDA_ERROR_LAUNCH_FAILED (719)"));
  Status memory = (*library)->Check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
  EXPECT_EQ(memory.code(), Code::kFailedPrecondition);
  EXPECT_TRUE((*library)->Check(CUDA_SUCCESS, "anything").ok());
}

TEST(CudaLibraryTest, PathComesFromTheEnvironmentWhenNotGiven) {
  ::setenv("GPUHERD_CUDA_LIBRARY", "/opt/other/libcuda.so.1", 1);
  EXPECT_EQ(ResolveCudaLibraryPath(""), "/opt/other/libcuda.so.1");
  EXPECT_EQ(ResolveCudaLibraryPath("/given.so"), "/given.so");
  ::unsetenv("GPUHERD_CUDA_LIBRARY");
  EXPECT_EQ(ResolveCudaLibraryPath(""), "libcuda.so.1");
}

TEST(CudaLibraryTest, UuidIsSpelledAsNvmlSpellsIt) {
  CUuuid uuid{};
  const unsigned char bytes[16] = {0x8c, 0x6b, 0x1f, 0x02, 0x3a, 0x44, 0x5e, 0x60,
                                   0x71, 0x82, 0x93, 0xa4, 0xb5, 0xc6, 0xd7, 0xe8};
  for (int i = 0; i < 16; ++i) uuid.bytes[i] = static_cast<char>(bytes[i]);
  EXPECT_EQ(FormatGpuUuid(uuid), "GPU-8c6b1f02-3a44-5e60-7182-93a4b5c6d7e8");
}

}  // namespace
}  // namespace gpuherd::gpu::cuda
