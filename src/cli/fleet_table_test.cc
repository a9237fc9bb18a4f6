#include "cli/fleet_table.h"

#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

using nlohmann::json;

json Fleet() {
  return json::parse(R"({
    "simulated": true, "sim_reason": "asked for with --sim 2",
    "gpus": [
      {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 85899345920,
       "max_pcie_gen": 5, "max_pcie_width": 16, "temp_slowdown_c": 87, "state": "ok",
       "sample": {"gpu_util_pct": 87, "mem_used_bytes": 42949672960, "mem_total_bytes": 85899345920,
                  "temp_c": 67, "power_w": 612, "power_limit_w": 700, "pcie_gen": 5, "pcie_width": 16,
                  "throttle": "", "xids": []}},
      {"index": 1, "name": "NVIDIA GeForce RTX 3090", "memory_total_bytes": 25769803776,
       "max_pcie_gen": 4, "max_pcie_width": 16, "state": "lost",
       "sample": {"gpu_util_pct": 0, "temp_c": 35, "pcie_gen": 4, "pcie_width": 8, "fan_pct": 30,
                  "xids": [{"xid": 79}]}}
    ]})");
}

TEST(FleetTableTest, ShowsSimulationBannerAndReadings) {
  std::string out = RenderFleetTable(Fleet().get<api::Fleet>(), false);
  EXPECT_EQ(out.rfind("SIMULATED FLEET (asked for with --sim 2)", 0), 0u) << out;
  EXPECT_NE(out.find("87%"), std::string::npos);
  EXPECT_NE(out.find("40.0/80.0 GiB"), std::string::npos);
  EXPECT_NE(out.find("612/700 W"), std::string::npos);
  EXPECT_NE(out.find("Gen5 x16 "), std::string::npos);
}

TEST(FleetTableTest, MarksDowntrainedLinkLostGpuAndXid) {
  std::string out = RenderFleetTable(Fleet().get<api::Fleet>(), false);
  EXPECT_NE(out.find("Gen4 x8 ! (max Gen4 x16)"), std::string::npos) << out;
  EXPECT_NE(out.find("lost xid 79"), std::string::npos) << out;
  // An absent reading is "-", never 0: the H100 has no fan.
  std::string h100 = out.substr(out.find("H100"), out.find('\n', out.find("H100")) - out.find("H100"));
  EXPECT_EQ(h100.find("0%  "), std::string::npos) << h100;
}

TEST(FleetTableTest, RealFleetHasNoBanner) {
  json fleet = Fleet();
  fleet["simulated"] = false;
  EXPECT_EQ(RenderFleetTable(fleet.get<api::Fleet>(), false).find("SIMULATED"), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::cli
