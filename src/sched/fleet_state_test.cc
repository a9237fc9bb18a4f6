#include "sched/fleet_state.h"

#include <gtest/gtest.h>

#include "sched/test_fleet.h"

namespace gpuherd::sched {
namespace {

using gpu::Link;

TEST(FleetStateTest, GroupsFromTheMatrixNest) {
  // 0-1 NVLink, 1-2 PCIe switch, 3 across the socket from everyone.
  FleetState fleet = testing::MakeFleet(4);
  testing::SetAllLinks(&fleet, Link::kCrossSocket);
  testing::SetLink(&fleet, 0, 1, Link::kNvLink);
  testing::SetLink(&fleet, 1, 2, Link::kPcieSwitch);
  testing::SetLink(&fleet, 0, 2, Link::kHostBridge);
  DeriveTopologyGroups(&fleet);
  const auto& g = fleet.gpus;
  EXPECT_EQ(g[0].nvlink_island, g[1].nvlink_island);
  EXPECT_NE(g[0].nvlink_island, g[2].nvlink_island);
  EXPECT_EQ(g[0].pcie_switch, g[2].pcie_switch);  // joined through GPU 1
  EXPECT_NE(g[3].pcie_switch, g[0].pcie_switch);
  EXPECT_NE(g[3].host_bridge, g[0].host_bridge);
}

TEST(FleetStateTest, LinkFromMatrixOrFromGroups) {
  FleetState fleet = testing::MakeFleet(3);
  testing::SetAllLinks(&fleet, Link::kNumaNode);
  testing::SetLink(&fleet, 0, 2, Link::kNvLink);
  EXPECT_EQ(fleet.LinkBetween(0, 2), Link::kNvLink);
  EXPECT_EQ(fleet.LinkBetween(0, 1), Link::kNumaNode);
  EXPECT_EQ(fleet.LinkBetween(1, 1), Link::kSelf);

  FleetState groups = testing::MakeFleet(4);
  groups.gpus[0].nvlink_island = groups.gpus[1].nvlink_island = 0;
  groups.gpus[2].pcie_switch = groups.gpus[0].pcie_switch = 5;
  groups.gpus[3].numa_node = 1;
  EXPECT_EQ(groups.LinkBetween(0, 1), Link::kNvLink);
  EXPECT_EQ(groups.LinkBetween(0, 2), Link::kPcieSwitch);
  EXPECT_EQ(groups.LinkBetween(1, 2), Link::kNumaNode);
  EXPECT_EQ(groups.LinkBetween(1, 3), Link::kCrossSocket);
  groups.gpus[3].numa_node.reset();
  EXPECT_EQ(groups.LinkBetween(1, 3), Link::kUnknown);
}

TEST(FleetStateTest, FromFleetCopiesStaticFacts) {
  gpu::Fleet fleet;
  gpu::GpuInfo info;
  info.index = 0;
  info.uuid = "GPU-a";
  info.name = "NVIDIA RTX 4090";
  info.cc_major = 8;
  info.cc_minor = 9;
  info.memory_total_bytes = 24 * testing::kGiB;
  info.temp_slowdown_c = 88;
  info.numa_node = 1;
  fleet.gpus.push_back(info);
  info.index = 1;
  info.uuid = "GPU-b";
  fleet.gpus.push_back(info);
  fleet.topology = {{Link::kSelf, Link::kPcieSwitch}, {Link::kPcieSwitch, Link::kSelf}};
  FleetState state = FleetStateFromFleet(fleet);
  ASSERT_EQ(state.gpus.size(), 2u);
  EXPECT_EQ(state.gpus[1].uuid, "GPU-b");
  EXPECT_EQ(state.gpus[0].cc, 89);
  EXPECT_EQ(state.gpus[0].slowdown_temp_c, 88);
  EXPECT_EQ(state.gpus[0].numa_node, 1);
  EXPECT_EQ(state.gpus[0].pcie_switch, state.gpus[1].pcie_switch);
  EXPECT_NE(state.gpus[0].nvlink_island, state.gpus[1].nvlink_island);
  EXPECT_TRUE(state.gpus[0].healthy);
}

TEST(FleetStateTest, AccountRunningJobs) {
  FleetState fleet = testing::MakeFleet(3);
  fleet.gpus[2].twentieths_in_use = 14;  // stale: reset by the accounting
  RunningJob whole{.id = 1, .spec = testing::Gpus(10), .started = 0, .gpus = {0}};
  RunningJob a{.id = 2, .spec = testing::Gpus(3), .started = 0, .gpus = {1}};
  RunningJob b{.id = 3, .spec = testing::Gpus(4), .started = 0, .gpus = {1}};
  RunningJob stray{.id = 4, .spec = testing::Gpus(10), .started = 0, .gpus = {9}};
  AccountRunningJobs({whole, a, b, stray}, &fleet);
  EXPECT_EQ(fleet.gpus[0].twentieths_in_use, 20);
  EXPECT_EQ(fleet.gpus[1].twentieths_in_use, 14);
  EXPECT_EQ(fleet.gpus[1].fraction_mem_reserved_bytes, 16 * testing::kGiB);
  EXPECT_EQ(fleet.gpus[2].twentieths_in_use, 0);
}

TEST(FleetStateTest, ExpectedEnd) {
  RunningJob job{.id = 1, .spec = testing::Gpus(10, kHourMs), .started = 1000, .gpus = {0}};
  EXPECT_EQ(job.ExpectedEnd(), 1000 + kHourMs);
  job.spec.time_limit = 0;
  EXPECT_FALSE(job.ExpectedEnd().has_value());
  job.stopping = true;
  job.stop_deadline = 5000;
  EXPECT_EQ(job.ExpectedEnd(), 5000);
}

}  // namespace
}  // namespace gpuherd::sched
