#include "gpu/catalog.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace gpuherd::gpu {
namespace {

TEST(CatalogTest, FindsRequiredModelsByKeyAndNvmlName) {
  const std::pair<const char*, const char*> kRequired[] = {
      {"gtx1070ti", "NVIDIA GeForce GTX 1070 Ti"},
      {"rtx3090", "NVIDIA GeForce RTX 3090"},
      {"a100-40gb", "NVIDIA A100-SXM4-40GB"},
      {"h100-sxm", "NVIDIA H100 80GB HBM3"},
      {"h200", "NVIDIA H200"},
  };
  for (const auto& [key, name] : kRequired) {
    const GpuModel* by_key = FindModel(key);
    ASSERT_NE(by_key, nullptr) << key;
    EXPECT_EQ(by_key->name, name);
    EXPECT_EQ(FindModel(name), by_key) << name;
  }
}

TEST(CatalogTest, LookupIgnoresCase) {
  EXPECT_EQ(FindModel("H100-SXM"), FindModel("h100-sxm"));
  EXPECT_EQ(FindModel("nvidia geforce gtx 1070 ti"), FindModel("gtx1070ti"));
  EXPECT_EQ(FindModel("h100"), nullptr);  // no prefix matching: ambiguous
}

TEST(CatalogTest, UnknownModelErrorListsKnownKeys) {
  auto result = LookupModel("rtx9090");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), Code::kNotFound);
  EXPECT_NE(result.status().message().find("rtx9090"), std::string::npos);
  EXPECT_NE(result.status().message().find("gtx1070ti"), std::string::npos);
  EXPECT_NE(result.status().message().find("h200"), std::string::npos);
}

TEST(CatalogTest, KeysAndNamesAreUnique) {
  std::set<std::string> keys, names;
  for (const GpuModel& model : Catalog()) {
    EXPECT_TRUE(keys.insert(std::string(model.key)).second) << model.key;
    EXPECT_TRUE(names.insert(std::string(model.name)).second) << model.name;
  }
  EXPECT_GE(keys.size(), 5u);
}

TEST(CatalogTest, SpecsAreConsistent) {
  for (const GpuModel& m : Catalog()) {
    SCOPED_TRACE(std::string(m.key));
    EXPECT_GT(m.memory_bytes, 4ull << 30);
    EXPECT_LT(m.idle_power_w, m.power_limit_w / 3);
    EXPECT_LT(m.idle_sm_clock_mhz, m.base_sm_clock_mhz);
    EXPECT_LE(m.base_sm_clock_mhz, m.max_sm_clock_mhz);
    EXPECT_LE(m.idle_mem_clock_mhz, m.max_mem_clock_mhz);
    EXPECT_LT(m.temp_slowdown_c, m.temp_shutdown_c);
    EXPECT_GE(m.thermal_time_constant_s, 60);
    EXPECT_LE(m.thermal_time_constant_s, 120);
    // At its power limit a new card settles below its software slowdown.
    const double full_c = 30 + m.power_limit_w * m.thermal_resistance_c_per_w;
    EXPECT_GT(full_c, 55);
    EXPECT_LT(full_c, m.temp_slowdown_c - 5);
    EXPECT_GT(m.fp32_tflops, 1);
    // BF16 arrived with Ampere (compute capability 8.0).
    EXPECT_EQ(m.bf16_tflops > 0, m.cc_major >= 8);
    EXPECT_GT(m.mem_bandwidth_gbs, 100);
    // Only SXM parts have NVLink, and they are all datacenter parts with ECC
    // and no fan of their own.
    if (m.nvlinks > 0) {
      EXPECT_TRUE(m.ecc);
      EXPECT_FALSE(m.has_fan);
    }
  }
}

TEST(CatalogTest, GeForceCardsHaveFansAndNoEcc) {
  for (const char* key : {"gtx1070ti", "rtx3090"}) {
    const GpuModel* m = FindModel(key);
    ASSERT_NE(m, nullptr);
    EXPECT_FALSE(m->ecc) << key;
    EXPECT_TRUE(m->has_fan) << key;
    EXPECT_EQ(m->nvlinks, 0) << key;
  }
}

TEST(CatalogTest, RealSpecsOfTheSeedCards) {
  const GpuModel* pascal = FindModel("gtx1070ti");
  ASSERT_NE(pascal, nullptr);
  EXPECT_EQ(pascal->cc_major, 6);
  EXPECT_EQ(pascal->cc_minor, 1);
  EXPECT_EQ(pascal->memory_bytes, 8ull << 30);
  EXPECT_EQ(pascal->power_limit_w, 180);
  EXPECT_EQ(pascal->max_pcie_gen, 3);

  const GpuModel* h100 = FindModel("h100-sxm");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->cc_major, 9);
  EXPECT_EQ(h100->power_limit_w, 700);
  EXPECT_EQ(h100->max_pcie_gen, 5);
  EXPECT_EQ(h100->max_sm_clock_mhz, 1980);
  EXPECT_EQ(h100->nvlinks, 18);
  EXPECT_GT(FindModel("h200")->memory_bytes, h100->memory_bytes);
}

TEST(CatalogTest, MemoryRepairMechanismFollowsArchitecture) {
  EXPECT_TRUE(UsesRowRemapping(*FindModel("a100-40gb")));
  EXPECT_TRUE(UsesRowRemapping(*FindModel("h100-sxm")));
  EXPECT_FALSE(UsesRowRemapping(*FindModel("v100-sxm2")));  // retires pages
  EXPECT_FALSE(UsesRowRemapping(*FindModel("rtx3090")));    // no ECC at all
}

}  // namespace
}  // namespace gpuherd::gpu
