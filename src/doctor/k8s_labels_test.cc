#include "doctor/k8s_labels.h"

#include <gtest/gtest.h>

#include "gpu/sim/sim_driver.h"

namespace gpuherd::doctor {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string Get(const Labels& labels, const std::string& key) {
  for (const auto& [k, v] : labels) {
    if (k == key) return v;
  }
  return "<absent>";
}

std::vector<gpu::GpuInfo> SimGpus(int count, std::vector<std::string> models = {}) {
  gpu::sim::SimOptions options;
  options.count = count;
  options.models = std::move(models);
  auto driver = gpu::sim::OpenSimDriver(options);
  EXPECT_TRUE(driver.ok()) << driver.status().ToString();
  return (*driver)->Discover()->gpus;
}

TEST(K8sLabelsTest, UniformNodeWithVerdicts) {
  const auto gpus = SimGpus(4, {"h100-sxm"});
  std::map<std::string, std::string> verdicts;
  for (const auto& g : gpus) verdicts[g.uuid] = "healthy";
  auto labels = NodeLabels(gpus, verdicts);
  ASSERT_TRUE(labels.ok()) << labels.status().ToString();
  EXPECT_EQ(Get(*labels, "accelerator"), "nvidia-h100-80gb-hbm3");
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.count"), "4");
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.memory"), std::to_string(gpus[0].memory_total_bytes >> 20));
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.model"), "h100_80gb_hbm3");
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.mixed"), "<absent>");
  EXPECT_EQ(Get(*labels, "gpuherd.io/health"), "healthy");
  EXPECT_EQ(Get(*labels, "gpuherd.io/healthy-gpus"), "4");

  verdicts[gpus[2].uuid] = "degraded";
  EXPECT_EQ(Get(*NodeLabels(gpus, verdicts), "gpuherd.io/health"), "degraded");
  verdicts.erase(gpus[1].uuid);
  EXPECT_EQ(Get(*NodeLabels(gpus, verdicts), "gpuherd.io/healthy-gpus"), "2");
  verdicts[gpus[3].uuid] = "unhealthy";
  EXPECT_EQ(Get(*NodeLabels(gpus, verdicts), "gpuherd.io/health"), "unhealthy");
}

TEST(K8sLabelsTest, NoVerdictsMeansUnknown) {
  const auto gpus = SimGpus(2, {"t4"});
  auto labels = NodeLabels(gpus, {});
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(Get(*labels, "gpuherd.io/health"), "unknown");
  EXPECT_EQ(Get(*labels, "gpuherd.io/healthy-gpus"), "0");
  EXPECT_EQ(Get(*labels, "accelerator"), "nvidia-tesla-t4") << "the seed's nvidia-tesla-v100 style";
}

TEST(K8sLabelsTest, MixedNodeNamedByItsMostCommonModel) {
  const auto gpus = SimGpus(3, {"rtx3090", "h100-sxm", "h100-sxm"});
  auto labels = NodeLabels(gpus, {});
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.mixed"), "true");
}

// Product, count and memory describe one model: a 4 x H100 + 4 x 3090 box
// once said H100 with the 3090's memory and a count of 8.
TEST(K8sLabelsTest, MixedNodeLabelsEachModelWithItsOwnCountAndMemory) {
  const auto gpus = SimGpus(7, {"rtx3090", "h100-sxm", "h100-sxm", "rtx3090", "h100-sxm", "h100-sxm", "rtx3090"});
  ASSERT_EQ(gpus.size(), 7u);
  uint64_t h100_mib = 0, rtx_mib = 0;
  for (const auto& g : gpus) (g.name.find("H100") != std::string::npos ? h100_mib : rtx_mib) = g.memory_total_bytes >> 20;
  ASSERT_NE(h100_mib, rtx_mib);
  auto labels = NodeLabels(gpus, {});
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.product"), "NVIDIA-H100-80GB-HBM3");
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.count"), "4");
  EXPECT_EQ(Get(*labels, "nvidia.com/gpu.memory"), std::to_string(h100_mib));
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.total"), "7");
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.h100_80gb_hbm3.count"), "4");
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.h100_80gb_hbm3.memory"), std::to_string(h100_mib));
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.geforce_rtx_3090.count"), "3") << ::testing::PrintToString(*labels);
  EXPECT_EQ(Get(*labels, "gpuherd.io/gpu.geforce_rtx_3090.memory"), std::to_string(rtx_mib));
  // A uniform node has none of the per-model labels.
  auto uniform = NodeLabels(SimGpus(2, {"rtx3090"}), {});
  ASSERT_TRUE(uniform.ok());
  EXPECT_EQ(Get(*uniform, "gpuherd.io/gpu.total"), "<absent>");
  EXPECT_EQ(Get(*uniform, "gpuherd.io/gpu.geforce_rtx_3090.count"), "<absent>");
}

TEST(K8sLabelsTest, LabelValuesAreValid) {
  EXPECT_EQ(LabelValue("NVIDIA GeForce RTX 3090"), "NVIDIA-GeForce-RTX-3090");
  EXPECT_EQ(LabelValue("  (weird) name! "), "weird-name");
  const std::string long_value = LabelValue(std::string(100, 'a') + " b");
  EXPECT_EQ(long_value.size(), 63u);
  EXPECT_EQ(LabelValue("x-"), "x");
  EXPECT_EQ(NodeLabels({}, {}).status().code(), Code::kFailedPrecondition);
}

TEST(K8sLabelsTest, KubectlCommand) {
  EXPECT_EQ(KubectlLabelCommand("gpu-01", {{"a", "1"}, {"b.io/c", "x"}}),
            "kubectl label node gpu-01 --overwrite \\\n    a=1 \\\n    b.io/c=x\n");
}

}  // namespace
}  // namespace gpuherd::doctor
