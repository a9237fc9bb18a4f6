#include "gpu/nvml/nvml_library.h"

#include <cstdlib>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::gpu::nvml {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<NvmlLibrary> MustOpen(const char* path) {
  auto library = NvmlLibrary::Open(path);
  EXPECT_TRUE(library.ok()) << library.status().ToString();
  return library.ok() ? std::move(library).value() : nullptr;
}

TEST(NvmlLibraryTest, CurrentLibraryResolvesTheNewestNames) {
  auto library = MustOpen(FAKE_NVML_PATH);
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(library->path(), FAKE_NVML_PATH);
  EXPECT_EQ(library->ResolvedName("nvmlInit_v2"), "nvmlInit_v2");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetCount_v2"), "nvmlDeviceGetCount_v2");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetHandleByIndex_v2"),
            "nvmlDeviceGetHandleByIndex_v2");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetPciInfo_v3"), "nvmlDeviceGetPciInfo_v3");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetComputeRunningProcesses_v3"),
            "nvmlDeviceGetComputeRunningProcesses_v3");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetCurrentClocksEventReasons"),
            "nvmlDeviceGetCurrentClocksEventReasons");
  EXPECT_EQ(library->ResolvedName("nvmlEventSetWait_v2"), "nvmlEventSetWait_v2");
  EXPECT_EQ(library->ResolvedName("nvmlSystemGetCudaDriverVersion_v2"),
            "nvmlSystemGetCudaDriverVersion_v2");
  // _v3 of a driver that also exports the process-detail list: 24-byte entries.
  EXPECT_EQ(library->process_layout(), ProcessLayout::kV2);
  EXPECT_NE(library->api().device_get_numa_node_id, nullptr);
}

TEST(NvmlLibraryTest, OlderLibraryFallsBackToUnversionedNames) {
  auto library = MustOpen(FAKE_NVML_LEGACY_PATH);
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(library->ResolvedName("nvmlInit_v2"), "nvmlInit");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetCount_v2"), "nvmlDeviceGetCount");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetHandleByIndex_v2"),
            "nvmlDeviceGetHandleByIndex");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetPciInfo_v3"), "nvmlDeviceGetPciInfo_v2");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetComputeRunningProcesses_v3"),
            "nvmlDeviceGetComputeRunningProcesses");
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetCurrentClocksEventReasons"),
            "nvmlDeviceGetCurrentClocksThrottleReasons");
  EXPECT_EQ(library->ResolvedName("nvmlEventSetWait_v2"), "nvmlEventSetWait");
  EXPECT_EQ(library->ResolvedName("nvmlSystemGetCudaDriverVersion_v2"),
            "nvmlSystemGetCudaDriverVersion");
  EXPECT_EQ(library->process_layout(), ProcessLayout::kV1);
  // Missing optional entries are null, not errors.
  EXPECT_EQ(library->api().device_get_numa_node_id, nullptr);
  EXPECT_EQ(library->api().device_get_remapped_rows, nullptr);
  EXPECT_EQ(library->api().device_get_handle_by_uuid, nullptr);
  EXPECT_EQ(library->ResolvedName("nvmlDeviceGetNumaNodeId"), "");
}

TEST(NvmlLibraryTest, ConfidentialComputingEraDriverUsesTheWideV3Layout) {
  auto library = MustOpen(FAKE_NVML_CC_PATH);
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(library->process_layout(), ProcessLayout::kV3ConfCompute);
}

TEST(NvmlLibraryTest, MissingRequiredSymbolIsUnavailable) {
  auto library = NvmlLibrary::Open(FAKE_NVML_NO_UUID_PATH);
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), Code::kUnavailable);
  EXPECT_THAT(library.status().message(), HasSubstr("required symbol nvmlDeviceGetUUID"));
  EXPECT_THAT(library.status().message(), HasSubstr(FAKE_NVML_NO_UUID_PATH));
  EXPECT_THAT(library.status().message(), HasSubstr("undefined symbol: nvmlDeviceGetUUID"));
}

TEST(NvmlLibraryTest, MissingLibraryIsUnavailable) {
  auto library = NvmlLibrary::Open("libnvidia-ml-does-not-exist.so.1");
  ASSERT_FALSE(library.ok());
  EXPECT_EQ(library.status().code(), Code::kUnavailable);
  EXPECT_THAT(library.status().message(),
              HasSubstr("libnvidia-ml-does-not-exist.so.1: cannot open shared object file"));
}

TEST(NvmlLibraryTest, ErrorStringCarriesNvmlTextAndCode) {
  auto library = MustOpen(FAKE_NVML_PATH);
  ASSERT_NE(library, nullptr);
  EXPECT_EQ(library->ErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost (15)");
  EXPECT_EQ(library->ErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported (3)");
  // A code this header does not list (a newer driver's) keeps its number.
  EXPECT_THAT(library->ErrorString(static_cast<nvmlReturn_t>(4242)), ::testing::EndsWith(" (4242)"));
}

TEST(NvmlLibraryTest, LibraryPathPrecedence) {
  const char* saved = std::getenv("GPUHERD_NVML_LIBRARY");
  std::string saved_value = saved != nullptr ? saved : "";
  unsetenv("GPUHERD_NVML_LIBRARY");
  EXPECT_EQ(ResolveNvmlLibraryPath(""), "libnvidia-ml.so.1");
  setenv("GPUHERD_NVML_LIBRARY", "/opt/nvml/libnvidia-ml.so.1", 1);
  EXPECT_EQ(ResolveNvmlLibraryPath(""), "/opt/nvml/libnvidia-ml.so.1");
  EXPECT_EQ(ResolveNvmlLibraryPath("/explicit/libnvidia-ml.so"), "/explicit/libnvidia-ml.so");
  if (saved != nullptr) {
    setenv("GPUHERD_NVML_LIBRARY", saved_value.c_str(), 1);
  } else {
    unsetenv("GPUHERD_NVML_LIBRARY");
  }
}

}  // namespace
}  // namespace gpuherd::gpu::nvml
