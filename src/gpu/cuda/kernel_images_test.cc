#include "gpu/cuda/kernel_images.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::gpu::cuda {
namespace {

using ::testing::HasSubstr;

class KernelImagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!KernelsBuilt()) GTEST_SKIP() << "clang++ was not found at configure time";
  }
};

TEST_F(KernelImagesTest, PtxTargetsSm60AndIsNulTerminated) {
  const std::string_view ptx = KernelPtx();
  ASSERT_FALSE(ptx.empty());
  EXPECT_THAT(std::string(ptx.substr(0, 400)), HasSubstr(".target sm_60"));
  EXPECT_THAT(std::string(ptx.substr(0, 400)), HasSubstr(".address_size 64"));
  EXPECT_EQ(ptx.data()[ptx.size()], '\0');
  EXPECT_EQ(std::strlen(ptx.data()), ptx.size());
}

TEST_F(KernelImagesTest, PtxDeclaresEveryEntryTheLoaderLooksUp) {
  const std::string ptx(KernelPtx());
  ASSERT_FALSE(KernelEntryNames().empty());
  for (const char* name : KernelEntryNames()) {
    EXPECT_THAT(ptx, HasSubstr(std::string(".visible .entry ") + name + "("))
        << name << " is looked up but not in the PTX";
  }
}

TEST_F(KernelImagesTest, StressGemmKeepsItsVectorAccessesAndStaysOffTheStack) {
  const std::string ptx(KernelPtx());
  const size_t begin = ptx.find(".entry sgemm_128x128x8(");
  ASSERT_NE(begin, std::string::npos);
  const std::string body = ptx.substr(begin, ptx.find(".entry", begin + 1) - begin);
  // The design's speed rests on float4 shared and global accesses and on the
  // accumulators living in registers.
  EXPECT_THAT(body, HasSubstr("ld.shared.v4.f32"));
  EXPECT_THAT(body, HasSubstr("ld.global.v4.f32"));
  EXPECT_THAT(body, HasSubstr("st.global.v4.f32"));
  EXPECT_EQ(body.find(".local"), std::string::npos);
}

TEST_F(KernelImagesTest, PtxHasOnlyTheNanStubOfTheBf16Gemm) {
  // clang's sm_60 PTX cannot hold BF16 tensor-core code; its stand-in fills
  // the result with NaNs (0x7fc00000) so that a launch by mistake fails loudly.
  const std::string ptx(KernelPtx());
  const size_t begin = ptx.find(".entry bgemm_bf16_wmma(");
  ASSERT_NE(begin, std::string::npos);
  const std::string body = ptx.substr(begin, ptx.find(".entry", begin + 1) - begin);
  EXPECT_EQ(body.find("mma.sync"), std::string::npos);  // neither mma.sync nor wmma.mma.sync
  EXPECT_THAT(body, HasSubstr("2143289344"));
}

TEST_F(KernelImagesTest, FatbinIsPresentWhenBuiltWithNvcc) {
  const auto fatbin = KernelFatbin();
  if (GPUHERD_TEST_HAVE_FATBIN == 0) {
    EXPECT_TRUE(fatbin.empty());
    return;
  }
  ASSERT_GE(fatbin.size(), 16u);
  // The fatbin container's magic number, little-endian.
  EXPECT_EQ(fatbin[0], 0x50);
  EXPECT_EQ(fatbin[1], 0xed);
  EXPECT_EQ(fatbin[2], 0x55);
  EXPECT_EQ(fatbin[3], 0xba);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(fatbin.data()) % 16, 0u);
}

// Runs ptxas on the embedded text: proves the PTX the driver will JIT is
// valid for the architectures named.
class PtxasTest : public KernelImagesTest, public ::testing::WithParamInterface<const char*> {};

TEST_P(PtxasTest, EmbeddedPtxAssembles) {
  const std::string ptxas = GPUHERD_PTXAS_PATH;
  if (ptxas.empty() || !std::filesystem::exists(ptxas)) {
    GTEST_SKIP() << "ptxas was not found at configure time (no CUDA toolkit on this machine)";
  }
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpuherd-ptxas-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto ptx_path = dir / "kernels.ptx";
  {
    std::ofstream out(ptx_path);
    out << KernelPtx();
  }
  const std::string command = ptxas + " -arch=" + GetParam() + " " + ptx_path.string() + " -o " +
                              (dir / "kernels.cubin").string() + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << command << "\n" << output;
  EXPECT_GT(std::filesystem::file_size(dir / "kernels.cubin"), 0u);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Architectures, PtxasTest, ::testing::Values("sm_75", "sm_90"));

}  // namespace
}  // namespace gpuherd::gpu::cuda
