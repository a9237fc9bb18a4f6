#include "gpu/json.h"

#include <gtest/gtest.h>

namespace gpuherd::gpu {
namespace {

TEST(GpuJsonTest, AbsentReadingsAreOmittedNotZero) {
  GpuSample s;
  s.time = 5000;
  s.temp_c = 41;
  nlohmann::json j = s;
  EXPECT_EQ(j["temp_c"], 41);
  EXPECT_FALSE(j.contains("fan_pct"));
  EXPECT_FALSE(j.contains("power_w"));
  GpuSample back = j.get<GpuSample>();
  EXPECT_FALSE(back.fan_pct.has_value());
  EXPECT_EQ(back.temp_c, 41);
}

TEST(GpuJsonTest, InfoRoundTrips) {
  GpuInfo g;
  g.index = 3;
  g.uuid = "GPU-1";
  g.cc_major = 9;
  g.cc_minor = 0;
  g.max_pcie_gen = 5;
  g.numa_node = 1;
  nlohmann::json j = g;
  EXPECT_EQ(j["compute_capability"], "9.0");
  GpuInfo back = j.get<GpuInfo>();
  EXPECT_EQ(back.cc_major, 9);
  EXPECT_EQ(back.max_pcie_gen, 5);
  EXPECT_EQ(back.numa_node, 1);
  EXPECT_FALSE(back.max_pcie_width.has_value());
}

TEST(GpuJsonTest, ThrottleReasonsAreDescribed) {
  GpuSample s;
  s.throttle_reasons = throttle::kSwPowerCap | throttle::kHwThermalSlowdown;
  nlohmann::json j = s;
  EXPECT_EQ(j["throttle"], "sw_power_cap,hw_thermal");
  EXPECT_EQ(ParseLink("nvlink"), Link::kNvLink);
  EXPECT_EQ(ParseLink("bogus"), Link::kUnknown);
}

}  // namespace
}  // namespace gpuherd::gpu
