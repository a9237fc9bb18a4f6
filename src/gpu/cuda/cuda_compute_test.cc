#include "gpu/cuda/cuda_compute.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/cuda/kernel_images.h"

namespace gpuherd::gpu::cuda {
namespace {

using ::testing::HasSubstr;

constexpr char kFakeUuid[] = "GPU-8c6b1f02-3a44-5e60-7182-93a4b5c6d7e8";

GpuInfo FakeGpu() {
  GpuInfo gpu;
  gpu.index = 3;
  gpu.uuid = kFakeUuid;
  return gpu;
}

// Points the backend at one fake libcuda for the test's duration and reaches
// the fake's scripting entries in the same loaded instance.
class CudaComputeTest : public ::testing::Test {
 protected:
  void UseLibrary(const char* path) { ::setenv("GPUHERD_CUDA_LIBRARY", path, 1); }
  void TearDown() override {
    ::unsetenv("GPUHERD_CUDA_LIBRARY");
    if (fake_ != nullptr) {
      SetLaunchResult(CUDA_SUCCESS);
      dlclose(fake_);
    }
  }

  std::unique_ptr<ComputeBackend> MustOpenFake(const char* path = FAKE_CUDA_PATH) {
    if (!KernelsBuilt()) return nullptr;
    UseLibrary(path);
    auto backend = OpenCudaComputeBackend();
    EXPECT_TRUE(backend.ok()) << backend.status().ToString();
    if (!backend.ok()) return nullptr;
    fake_ = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    EXPECT_NE(fake_, nullptr);
    return std::move(backend).value();
  }
  int LiveContexts() {
    auto fn = reinterpret_cast<int (*)()>(dlsym(fake_, "FakeCudaLiveContexts"));
    return fn();
  }
  int Launches() {
    auto fn = reinterpret_cast<int (*)()>(dlsym(fake_, "FakeCudaLaunches"));
    return fn();
  }
  std::string LaunchName(int i) {
    auto fn = reinterpret_cast<const char* (*)(int)>(dlsym(fake_, "FakeCudaLaunchName"));
    const char* name = fn(i);
    return name != nullptr ? name : "(none)";
  }
  std::vector<unsigned> LaunchShape(int i) {
    auto fn = reinterpret_cast<void (*)(int, unsigned*)>(dlsym(fake_, "FakeCudaLaunchShape"));
    std::vector<unsigned> shape(4);
    fn(i, shape.data());
    return shape;
  }
  std::pair<unsigned long long, unsigned> LastCompare() {
    auto fn = reinterpret_cast<void (*)(unsigned long long*, unsigned*)>(
        dlsym(fake_, "FakeCudaLastCompare"));
    std::pair<unsigned long long, unsigned> last;
    fn(&last.first, &last.second);
    return last;
  }
  void SetLaunchResult(int result) {
    auto fn = reinterpret_cast<void (*)(int)>(dlsym(fake_, "FakeCudaSetLaunchResult"));
    fn(result);
  }

  void* fake_ = nullptr;
};

TEST_F(CudaComputeTest, MissingDriverIsUnavailableWithTheReason) {
  UseLibrary("/nonexistent");
  auto backend = OpenCudaComputeBackend();
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kUnavailable);
  EXPECT_THAT(backend.status().message(), HasSubstr("/nonexistent"));
  EXPECT_THAT(backend.status().message(), HasSubstr("No such file or directory"));
}

TEST_F(CudaComputeTest, DriverWithoutDevicesIsUnavailable) {
  UseLibrary(FAKE_CUDA_NO_DEVICE_PATH);
  auto backend = OpenCudaComputeBackend();
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kUnavailable);
  EXPECT_THAT(backend.status().message(), HasSubstr("cuInit"));
  EXPECT_THAT(backend.status().message(), HasSubstr("CUDA_ERROR_NO_DEVICE"));
}

TEST_F(CudaComputeTest, BuildWithoutKernelsIsUnavailable) {
  if (KernelsBuilt()) GTEST_SKIP() << "this build has the kernels";
  UseLibrary(FAKE_CUDA_PATH);
  auto backend = OpenCudaComputeBackend();
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), Code::kUnavailable);
  EXPECT_THAT(backend.status().message(), HasSubstr("kernels were not built"));
}

TEST_F(CudaComputeTest, UnknownUuidIsUnavailableAndListsWhatCudaSees) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  EXPECT_EQ(backend->name(), "cuda");
  EXPECT_FALSE(backend->simulated());
  GpuInfo other = FakeGpu();
  other.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  auto device = backend->Open(other);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), Code::kUnavailable);
  EXPECT_THAT(device.status().message(), HasSubstr(other.uuid));
  EXPECT_THAT(device.status().message(), HasSubstr(kFakeUuid));
  EXPECT_EQ(LiveContexts(), 0);
}

TEST_F(CudaComputeTest, OpenFallsBackToPtxAndFindsEveryKernel) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  GpuInfo gpu = FakeGpu();
  gpu.uuid = "GPU-8C6B1F02-3A44-5E60-7182-93A4B5C6D7E8";  // case does not matter
  {
    auto device = backend->Open(gpu);
    ASSERT_TRUE(device.ok()) << device.status().ToString();
    auto* cuda = dynamic_cast<CudaComputeDevice*>(device->get());
    ASSERT_NE(cuda, nullptr);
    // The fake is a Pascal driver: it refuses the fatbin, if there is one.
    EXPECT_EQ(cuda->module_image(), "ptx sm_60");
    EXPECT_EQ(cuda->sm_count(), 4);
    EXPECT_TRUE((*device)->Supports(Precision::kFp32));
    EXPECT_TRUE((*device)->Supports(Precision::kFp16));
    EXPECT_FALSE((*device)->Supports(Precision::kBf16));
    auto memory = (*device)->Memory();
    ASSERT_TRUE(memory.ok()) << memory.status().ToString();
    EXPECT_EQ(memory->total_bytes, uint64_t{8} << 30);
    EXPECT_EQ(memory->free_bytes, uint64_t{7} << 30);
    EXPECT_EQ(LiveContexts(), 1);
  }
  EXPECT_EQ(LiveContexts(), 0);  // the device's own context dies with it
}

TEST_F(CudaComputeTest, RoundTripComparesWhatCameBack) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  auto device = backend->Open(FakeGpu());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto mismatches = (*device)->RoundTrip(1 << 20);
  ASSERT_TRUE(mismatches.ok()) << mismatches.status().ToString();
  EXPECT_EQ(*mismatches, 0u);
  auto empty = (*device)->RoundTrip(0);
  EXPECT_EQ(empty.status().code(), Code::kInvalidArgument);
}

TEST_F(CudaComputeTest, FailingLaunchNamesTheErrorAndTheGpu) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  auto device = backend->Open(FakeGpu());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  SetLaunchResult(CUDA_ERROR_LAUNCH_FAILED);
  auto pass = (*device)->MemTest(MemPattern::kOwnAddress, 1 << 16, 1, 16, {});
  ASSERT_FALSE(pass.ok());
  EXPECT_EQ(pass.status().code(), Code::kUnavailable);
  EXPECT_THAT(pass.status().message(), HasSubstr("CUDA_ERROR_LAUNCH_FAILED"));
  EXPECT_THAT(pass.status().message(), HasSubstr("GPU 3 (" + std::string(kFakeUuid) + ")"));
  EXPECT_THAT(pass.status().message(), HasSubstr("memtest_write_own_address"));
  auto stress = (*device)->PrepareStress(Precision::kFp32, 256);
  EXPECT_THAT(stress.message(), HasSubstr("CUDA_ERROR_LAUNCH_FAILED"));
  auto again = (*device)->Stress(Precision::kFp32, 1, {});
  EXPECT_EQ(again.status().code(), Code::kFailedPrecondition);
}

TEST_F(CudaComputeTest, StopRequestAbortsBeforeTheNextLaunch) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  auto device = backend->Open(FakeGpu());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  std::stop_source source;
  source.request_stop();
  const int before = Launches();
  auto pass = (*device)->MemTest(MemPattern::kWalkingOnes, 1 << 16, 1, 16, source.get_token());
  EXPECT_EQ(pass.status().code(), Code::kAborted);
  ASSERT_TRUE((*device)->PrepareStress(Precision::kFp32, 200).ok());
  auto* cuda = dynamic_cast<CudaComputeDevice*>(device->get());
  EXPECT_EQ(cuda->stress_n(), 256);  // rounded up to the tile
  const int prepared = Launches();
  EXPECT_EQ(prepared - before, 3);  // two fills and the reference product
  auto batch = (*device)->Stress(Precision::kFp32, 10, source.get_token());
  EXPECT_EQ(batch.status().code(), Code::kAborted);
  EXPECT_EQ(Launches(), prepared);
}

TEST_F(CudaComputeTest, BadSizesAreRejectedWithWhatToFix) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  auto device = backend->Open(FakeGpu());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  EXPECT_EQ((*device)->MemTest(MemPattern::kOwnAddress, 8, 1, 1, {}).status().code(),
            Code::kInvalidArgument);
  EXPECT_THAT((*device)->CheckedGemm(5000).status().message(), HasSubstr("1..1024"));
  const Status bf16 = (*device)->PrepareStress(Precision::kBf16, 256);
  EXPECT_EQ(bf16.code(), Code::kInvalidArgument);
  EXPECT_THAT(bf16.message(), HasSubstr("compute capability 8.0 or newer (this GPU has 6.1)"));
  EXPECT_EQ((*device)->CopyBandwidth(CopyKind::kHostToDevice, 0, 1).status().code(),
            Code::kInvalidArgument);
}

TEST_F(CudaComputeTest, EachPrecisionLaunchesItsProductAndComparesItsResultWords) {
  auto backend = MustOpenFake();
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  auto device = backend->Open(FakeGpu());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  struct Case {
    Precision precision;
    const char* fill;
    const char* gemm;
    std::vector<unsigned> shape;  // grid x, y, block x, y for n = 256
    unsigned long long words;
    unsigned kind;
  };
  for (const Case& c : {Case{Precision::kFp32, "fill_uniform_f32", "sgemm_128x128x8",
                             {2, 2, 256, 1}, 256 * 256, 0},
                        Case{Precision::kFp16, "fill_uniform_f16x2", "hgemm_f16x2",
                             {8, 16, 16, 16}, 256 * 256 / 2, 1}}) {
    SCOPED_TRACE(PrecisionName(c.precision));
    const int before = Launches();
    ASSERT_TRUE((*device)->PrepareStress(c.precision, 256).ok());
    EXPECT_EQ(LaunchName(before), c.fill);
    EXPECT_EQ(LaunchName(before + 1), c.fill);
    EXPECT_EQ(LaunchName(before + 2), c.gemm);
    EXPECT_EQ(LaunchShape(before + 2), c.shape);
    auto batch = (*device)->Stress(c.precision, 2, {});
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    EXPECT_EQ(Launches(), before + 3 + 4);  // a product and a comparison per iteration
    EXPECT_EQ(LaunchName(before + 5), c.gemm);
    EXPECT_EQ(LaunchName(before + 6), "compare_words");
    EXPECT_EQ(LastCompare(), std::make_pair(c.words, c.kind));
  }
}

TEST_F(CudaComputeTest, AmpereStressesBf16OnTheTensorCoreKernelWithFp32Results) {
  auto backend = MustOpenFake(FAKE_CUDA_AMPERE_PATH);
  if (backend == nullptr) GTEST_SKIP() << "the kernels were not built";
  auto device = backend->Open(FakeGpu());
  ASSERT_TRUE(device.ok()) << device.status().ToString();
  auto* cuda = dynamic_cast<CudaComputeDevice*>(device->get());
  ASSERT_NE(cuda, nullptr);
  if (GPUHERD_TEST_HAVE_FATBIN == 0) {
    // The sm_60 PTX has only the stub: no BF16 without nvcc's code.
    EXPECT_EQ(cuda->module_image(), "ptx sm_60");
    EXPECT_FALSE((*device)->Supports(Precision::kBf16));
    EXPECT_THAT((*device)->PrepareStress(Precision::kBf16, 256).message(),
                HasSubstr("kernels built with nvcc (loaded: ptx sm_60)"));
    return;
  }
  EXPECT_EQ(cuda->module_image(), "fatbin");
  EXPECT_TRUE((*device)->Supports(Precision::kBf16));
  EXPECT_TRUE((*device)->Supports(Precision::kFp16));
  const int before = Launches();
  ASSERT_TRUE((*device)->PrepareStress(Precision::kBf16, 200).ok());
  EXPECT_EQ(cuda->stress_n(), 256);
  ASSERT_EQ(Launches(), before + 3);
  EXPECT_EQ(LaunchName(before), "fill_uniform_bf16x2");
  EXPECT_EQ(LaunchName(before + 1), "fill_uniform_bf16x2");
  EXPECT_EQ(LaunchName(before + 2), "bgemm_bf16_wmma");
  EXPECT_EQ(LaunchShape(before + 2), (std::vector<unsigned>{2, 2, 256, 1}));

  auto batch = (*device)->Stress(Precision::kBf16, 3, {});
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->precision, Precision::kBf16);
  EXPECT_EQ(batch->iterations, 3);
  EXPECT_DOUBLE_EQ(batch->flops, 2.0 * 256 * 256 * 256 * 3);
  EXPECT_EQ(batch->mismatches, 0u);
  EXPECT_EQ(batch->nans, 0u);
  ASSERT_EQ(Launches(), before + 3 + 6);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(LaunchName(before + 3 + 2 * i), "bgemm_bf16_wmma");
    EXPECT_EQ(LaunchName(before + 4 + 2 * i), "compare_words");
  }
  // Every one of the n x n FP32 result words is compared, as FP32.
  EXPECT_EQ(LastCompare(), std::make_pair(256ull * 256, 0u));
  EXPECT_EQ((*device)->Stress(Precision::kFp16, 1, {}).status().code(),
            Code::kFailedPrecondition);
}

}  // namespace
}  // namespace gpuherd::gpu::cuda
