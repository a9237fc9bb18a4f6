#include "daemon/burnin_jobs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

gpu::Fleet TwoGpus() {
  gpu::Fleet fleet;
  for (int i = 0; i < 2; ++i) {
    gpu::GpuInfo g;
    g.index = i;
    g.uuid = "GPU-" + std::to_string(i);
    fleet.gpus.push_back(g);
  }
  return fleet;
}

BurnInLauncher Launcher() {
  BurnInLauncher l;
  l.self_exe = "/opt/gpuherd";
  l.home = "/var/lib/gpuherd";
  l.driver_args = {"--sim", "2", "--seed", "1"};
  return l;
}

// The request read as POST /v1/burnin reads it, then planned.
Result<BurnInJob> Plan(const json& body, const gpu::Fleet& fleet, const BurnInLauncher& launcher) {
  auto request = api::ParseBurnInRequest(body);
  if (!request.ok()) return request.status();
  return PlanBurnInJob(*request, fleet, launcher);
}

TEST(BurnInJobsTest, ALevelThreeRequestBecomesAPinnedJobThatReopensTheSameFleet) {
  auto job = Plan({{"level", 3}, {"gpus", {"1"}}, {"duration", "30s"}}, TwoGpus(), Launcher());
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_THAT(job->extras.pinned_gpus, ElementsAre("GPU-1"));
  EXPECT_THAT(job->positions, ElementsAre(1));
  EXPECT_EQ(job->spec.gpu_twentieths, 20);
  EXPECT_EQ(job->spec.name, "burnin-L3-gpu1");
  EXPECT_THAT(job->spec.argv,
            ElementsAre("/opt/gpuherd", "burnin", "--direct", "--json", "--level", "3", "--gpu", "GPU-1", "--duration",
                  "30s", "--memtest-fraction", "0.9", "--sim", "2", "--seed", "1", "--home", "/var/lib/gpuherd"));
}

TEST(BurnInJobsTest, AllGpusByDefault) {
  auto job = Plan({{"level", 1}}, TwoGpus(), Launcher());
  ASSERT_TRUE(job.ok());
  EXPECT_THAT(job->extras.pinned_gpus, ElementsAre("GPU-0", "GPU-1"));
  EXPECT_EQ(job->spec.argv.at(7), "GPU-0,GPU-1");
}

TEST(BurnInJobsTest, BadRequestsNameTheFieldToFix) {
  struct Case {
    json body;
    std::string says;
  } cases[] = {
      {{{"level", 4}}, "\"level\" must be 1, 2 or 3"},
      {{{"gpus", "all"}}, "\"level\" must be 1, 2 or 3"},
      {{{"level", 1}, {"gpus", {"7"}}}, "not a GPU of this machine"},
      {{{"level", 1}, {"gpus", json::array()}}, "non-empty list"},
      {{{"level", 3}, {"duration", "soon"}}, "\"duration\" must be a positive duration"},
      {{{"level", 2}, {"memtest_fraction", 1.5}}, "\"memtest_fraction\""},
      {{{"level", 1}, {"colour", "red"}}, "\"colour\" is not a burn-in option"},
  };
  for (const Case& c : cases) {
    auto job = Plan(c.body, TwoGpus(), Launcher());
    ASSERT_FALSE(job.ok()) << c.body.dump();
    EXPECT_EQ(job.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(job.status().message(), HasSubstr(c.says)) << c.body.dump();
  }
}

TEST(BurnInJobsTest, TheLauncherReopensASimulatedFleetButNotNvml) {
  gpu::DriverChoice nvml;
  EXPECT_TRUE(MakeBurnInLauncher(nvml, "", 4, "/h").driver_args.empty());
  EXPECT_THAT(MakeBurnInLauncher(nvml, "no NVIDIA driver found", 8, "/h").driver_args,
              ElementsAre("--sim", "8", "--seed", "1"));
  gpu::DriverChoice scenario;
  scenario.scenario_path = "/etc/fleet.yaml";
  scenario.seed = 5;
  EXPECT_THAT(MakeBurnInLauncher(scenario, "scenario", 8, "/h").driver_args,
              ElementsAre("--scenario", "/etc/fleet.yaml", "--seed", "5"));
}

TEST(BurnInJobsTest, OnlyDrainsGpuherdMadeArePassedBack) {
  using queue::DrainLifter;
  using queue::DrainOrigin;
  for (DrainOrigin o : {DrainOrigin::kFault, DrainOrigin::kAlert, DrainOrigin::kBurnIn, DrainOrigin::kRisk}) {
    EXPECT_TRUE(queue::MayLift(DrainLifter::kPassedBurnIn, o));
  }
  EXPECT_FALSE(queue::MayLift(DrainLifter::kPassedBurnIn, DrainOrigin::kOperator));
  EXPECT_TRUE(queue::MayLift(DrainLifter::kOperator, DrainOrigin::kOperator));
}

}  // namespace
}  // namespace gpuherd::daemon
