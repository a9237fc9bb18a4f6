#include "sched/placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/test_fleet.h"

namespace gpuherd::sched {
namespace {

using gpu::Link;
using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;
using testing::Gpus;
using testing::kGiB;

std::vector<int> PlaceOrEmpty(const FleetState& fleet, const JobSpec& spec,
                              const PlacementOptions& options = {}) {
  return Place(fleet, spec, options).value_or(std::vector<int>{});
}

TEST(PlacementTest, EveryUnusableConditionIsAvoided) {
  // GPU 0 is the coolest of all, and each variant makes it unusable.
  struct Case {
    const char* what;
    void (*spoil)(GpuState*);
    GpuBlock block;
  };
  const Case cases[] = {
      {"lost", [](GpuState* g) { g->lost = true; }, GpuBlock::kLost},
      {"drained", [](GpuState* g) { g->drained = true; }, GpuBlock::kDrained},
      {"unhealthy", [](GpuState* g) { g->healthy = false; }, GpuBlock::kUnhealthy},
      {"at slowdown", [](GpuState* g) { g->temp_c = 87; }, GpuBlock::kTooHot},
      {"throttling", [](GpuState* g) { g->thermal_throttling = true; }, GpuBlock::kThrottling},
  };
  for (const Case& c : cases) {
    FleetState fleet = testing::MakeFleet(2);
    fleet.gpus[0].temp_c = 30;
    EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(10)), ElementsAre(0)) << c.what;
    c.spoil(&fleet.gpus[0]);
    EXPECT_EQ(CheckGpu(fleet.gpus[0], {}), c.block) << c.what;
    EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(10)), ElementsAre(1)) << c.what;
    EXPECT_FALSE(Place(fleet, Gpus(20), {}).has_value()) << c.what;
  }
}

TEST(PlacementTest, ConfiguredTemperatureLimitBelowTheCardsOwn) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].temp_c = 80;
  fleet.gpus[1].temp_c = 84;
  PlacementOptions options{.max_temp_c = 82};
  EXPECT_EQ(CheckGpu(fleet.gpus[1], options), GpuBlock::kTooHot);
  EXPECT_EQ(CheckGpu(fleet.gpus[1], {}), GpuBlock::kNone);
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(10), options), ElementsAre(0));
  fleet.gpus[1].slowdown_temp_c.reset();  // the configured limit still applies
  EXPECT_EQ(TemperatureLimit(fleet.gpus[1], options), 82);
  EXPECT_FALSE(Place(fleet, Gpus(20), options).has_value());
}

TEST(PlacementTest, ModelCapabilityAndMemoryFilters) {
  FleetState fleet = testing::MakeFleet(3);
  fleet.gpus[1].name = "NVIDIA GeForce RTX 3090";
  fleet.gpus[1].cc = 86;
  fleet.gpus[1].memory_total_bytes = 24 * kGiB;
  fleet.gpus[1].temp_c = 20;  // the coolest, so only a filter keeps a job off it
  JobSpec spec = Gpus(10);
  spec.model = "rtx 3090";
  EXPECT_THAT(PlaceOrEmpty(fleet, spec), ElementsAre(1));
  spec.model.clear();
  spec.min_cc = 90;
  EXPECT_THAT(PlaceOrEmpty(fleet, spec), ElementsAre(0));
  spec.min_cc.reset();
  spec.gpu_mem_bytes = 40 * kGiB;
  EXPECT_THAT(PlaceOrEmpty(fleet, spec), ElementsAre(0));
  spec.model = "3090";
  EXPECT_FALSE(Place(fleet, spec, {}).has_value());
}

TEST(PlacementTest, PrefersCoolerThenHealthier) {
  FleetState fleet = testing::MakeFleet(3);
  fleet.gpus[0].temp_c = 70;
  fleet.gpus[1].temp_c = 45;
  fleet.gpus[2].temp_c = 60;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(10)), ElementsAre(1));
  fleet.gpus[0].health_score = 90;
  fleet.gpus[1].health_score = 60;
  fleet.gpus[2].health_score = 95;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(10)), ElementsAre(2));
}

TEST(PlacementTest, NvLinkPairBeatsPciePair) {
  FleetState fleet = testing::MakeFleet(4);
  testing::SetAllLinks(&fleet, Link::kCrossSocket);
  testing::SetLink(&fleet, 0, 1, Link::kPcieSwitch);
  testing::SetLink(&fleet, 2, 3, Link::kNvLink);
  DeriveTopologyGroups(&fleet);
  fleet.gpus[0].temp_c = fleet.gpus[1].temp_c = 30;  // cooler, but worse connected
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(20)), UnorderedElementsAre(2, 3));
  fleet.gpus[3].drained = true;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(20)), UnorderedElementsAre(0, 1));
}

TEST(PlacementTest, SameNumaSetBeatsCrossSocket) {
  // No matrix: the NUMA nodes alone decide. Node 0 = {1, 3}, node 1 = {0, 2}.
  FleetState fleet = testing::MakeFleet(4);
  for (int i = 0; i < 4; ++i) fleet.gpus[i].numa_node = i % 2 == 0 ? 1 : 0;
  fleet.gpus[0].temp_c = fleet.gpus[1].temp_c = 30;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(20)), UnorderedElementsAre(0, 2));
  fleet.gpus[2].lost = true;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(20)), UnorderedElementsAre(1, 3));
  // Three GPUs cannot stay on one node: two from the fuller node, one across.
  fleet.gpus[2].lost = false;
  fleet.gpus[3].drained = true;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(30)), UnorderedElementsAre(0, 2, 1));
}

TEST(PlacementTest, WorstPairDecidesBetweenIslands) {
  // Two 4-GPU groups behind PCIe switches; in the second all pairs have NVLink.
  FleetState fleet = testing::MakeFleet(8);
  testing::SetAllLinks(&fleet, Link::kCrossSocket);
  for (int a = 0; a < 4; ++a) {
    for (int b = a + 1; b < 4; ++b) {
      testing::SetLink(&fleet, a, b, Link::kPcieSwitch);
      testing::SetLink(&fleet, a + 4, b + 4, Link::kNvLink);
    }
  }
  DeriveTopologyGroups(&fleet);
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(40)), UnorderedElementsAre(4, 5, 6, 7));
  fleet.gpus[5].twentieths_in_use = 20;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(40)), UnorderedElementsAre(0, 1, 2, 3));
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(30)), UnorderedElementsAre(4, 6, 7));
}

TEST(PlacementTest, OneGpuJobPacksIntoTheFullestIsland) {
  // Islands {0,1,2,3} (all free) and {4,5,6,7} (two taken): a single GPU goes
  // to the second so the first stays whole for a 4-GPU job.
  FleetState fleet = testing::MakeFleet(8);
  for (int i = 0; i < 8; ++i) fleet.gpus[i].nvlink_island = i / 4;
  fleet.gpus[4].twentieths_in_use = fleet.gpus[5].twentieths_in_use = 20;
  std::vector<int> gpus = PlaceOrEmpty(fleet, Gpus(10));
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_GE(gpus[0], 6);
}

TEST(PlacementTest, FractionsPackOntoTheFullestSharedGpu) {
  FleetState fleet = testing::MakeFleet(4);
  fleet.gpus[1].twentieths_in_use = 6;
  fleet.gpus[1].fraction_mem_reserved_bytes = 10 * kGiB;
  fleet.gpus[2].twentieths_in_use = 12;
  fleet.gpus[2].fraction_mem_reserved_bytes = 20 * kGiB;
  fleet.gpus[3].twentieths_in_use = 18;
  fleet.gpus[3].fraction_mem_reserved_bytes = 30 * kGiB;
  // 0.4 fits on 1 and 2; 2 is fuller.
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(4)), ElementsAre(2));
  // 0.1 fits on 3 as well, the fullest.
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(1)), ElementsAre(3));
  // 0.8 fits on no shared GPU: a free one.
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(8)), ElementsAre(0));
  // Memory counts too: 0.1 with 61 GiB fits only beside GPU 1's 10 GiB.
  JobSpec big = Gpus(1);
  big.gpu_mem_bytes = 61 * kGiB;
  EXPECT_THAT(PlaceOrEmpty(fleet, big), ElementsAre(1));
  // Memory used by processes outside gpuherd counts as well.
  fleet.gpus[1].memory_used_bytes = 30 * kGiB;
  EXPECT_THAT(PlaceOrEmpty(fleet, big), ElementsAre(0));
}

TEST(PlacementTest, WholeGpuJobsNeverShareWithFractions) {
  FleetState fleet = testing::MakeFleet(2);
  fleet.gpus[0].twentieths_in_use = 2;
  fleet.gpus[0].temp_c = 20;
  EXPECT_THAT(PlaceOrEmpty(fleet, Gpus(10)), ElementsAre(1));
  EXPECT_FALSE(Place(fleet, Gpus(20), {}).has_value());
}

TEST(PlacementTest, IndexTakeAndGive) {
  FleetState fleet = testing::MakeFleet(2);
  PlacementIndex index(fleet, {});
  EXPECT_EQ(index.free_count(), 2);
  JobSpec half = Gpus(5);
  std::optional<std::vector<size_t>> a = index.Find(half);
  ASSERT_TRUE(a.has_value());
  index.Take(half, *a);
  EXPECT_EQ(index.free_count(), 1);
  // The second half goes beside the first, keeping the other GPU free.
  std::optional<std::vector<size_t>> b = index.Find(half);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, *a);
  index.Take(half, *b);
  EXPECT_EQ(index.twentieths_in_use((*a)[0]), 20);
  EXPECT_FALSE(index.Find(Gpus(20)).has_value());
  // A reservation's GPUs can be kept out.
  std::vector<size_t> avoid = {1 - (*a)[0]};
  EXPECT_FALSE(index.Find(Gpus(10), avoid).has_value());
  index.Give(half, *b);
  index.Give(half, *a);
  EXPECT_EQ(index.free_count(), 2);
  EXPECT_TRUE(index.Find(Gpus(20)).has_value());
}

TEST(PlacementTest, CountsAndTheirDescription) {
  FleetState fleet = testing::MakeFleet(6);
  fleet.gpus[0].drained = true;
  fleet.gpus[1].temp_c = 91;
  fleet.gpus[2].twentieths_in_use = 20;
  fleet.gpus[3].twentieths_in_use = 4;
  fleet.gpus[4].lost = true;
  PlacementIndex index(fleet, {});
  MatchCounts c = index.Count(Gpus(40));
  EXPECT_EQ(c.matching, 6);
  EXPECT_EQ(c.free, 1);
  EXPECT_EQ(c.busy, 1);
  EXPECT_EQ(c.shared, 1);
  EXPECT_EQ(c.drained, 1);
  EXPECT_EQ(c.lost, 1);
  EXPECT_EQ(c.too_hot, 1);
  EXPECT_EQ(DescribeCounts(c),
            "1 free, 1 busy, 1 shared by fractions, 1 lost, 1 drained, 1 too hot (91 °C ≥ 87 °C)");
  JobSpec other = Gpus(10);
  other.model = "A100";
  EXPECT_EQ(index.Count(other).matching, 0);
  EXPECT_EQ(index.FreeMatching(Gpus(10)), 1);
}

TEST(PlacementTest, LargeFleetChoosesAWholeIsland) {
  // 10,000 GPUs in NVLink islands of 8, NUMA nodes of 4 islands; most busy.
  FleetState fleet = testing::MakeFleet(10000);
  for (int i = 0; i < 10000; ++i) {
    fleet.gpus[i].nvlink_island = i / 8;
    fleet.gpus[i].numa_node = i / 32;
    if (i % 8 != 0 && i < 9000) fleet.gpus[i].twentieths_in_use = 20;
  }
  std::vector<int> gpus = PlaceOrEmpty(fleet, Gpus(80));
  ASSERT_EQ(gpus.size(), 8u);
  for (int g : gpus) EXPECT_EQ(g / 8, gpus[0] / 8);
  EXPECT_GE(gpus[0], 9000);
}

}  // namespace
}  // namespace gpuherd::sched
