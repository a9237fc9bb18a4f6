#include "sched/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "sched/test_fleet.h"

namespace gpuherd::sched {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::kGiB;
using Json = nlohmann::json;

Json Minimal() { return Json{{"command", {"python", "train.py"}}}; }

Result<JobSpec> ParseWith(const std::string& key, Json value) {
  Json j = Minimal();
  j[key] = std::move(value);
  return ParseJobSpec(j);
}

TEST(ParseJobSpecTest, FullSpec) {
  Json j = Json::parse(R"({
    "command": ["python", "train.py", "--lr", "0.1"], "cwd": "/data/run1",
    "env": {"SEED": "7", "EPOCHS": 3}, "gpus": 2, "gpu_mem": "20G", "model": "H100",
    "min_cc": "8.0", "cpus": 8, "mem": "64GiB", "priority": 50, "time_limit": "2h",
    "checkpoint": {"grace": "60s"}, "preemptible": true, "max_restarts": 3,
    "depends_on": [4, 5], "name": "resnet", "labels": {"team": "vision"},
    "mixed_models": true})");
  Result<JobSpec> spec = ParseJobSpec(j);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->argv, (std::vector<std::string>{"python", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(spec->cwd, "/data/run1");
  EXPECT_EQ(spec->env.at("SEED"), "7");
  EXPECT_EQ(spec->env.at("EPOCHS"), "3");
  EXPECT_EQ(spec->gpu_twentieths, 40);
  EXPECT_EQ(spec->gpu_mem_bytes, 20 * kGiB);
  EXPECT_EQ(spec->model, "H100");
  EXPECT_EQ(spec->min_cc, 80);
  EXPECT_EQ(spec->cpus, 8);
  EXPECT_EQ(spec->mem_bytes, 64 * kGiB);
  EXPECT_EQ(spec->priority, 50);
  EXPECT_EQ(spec->time_limit, 2 * kHourMs);
  EXPECT_EQ(spec->checkpoint_grace, 60 * kSecondMs);
  EXPECT_TRUE(spec->preemptible);
  EXPECT_EQ(spec->max_restarts, 3);
  EXPECT_EQ(spec->depends_on, (std::vector<JobId>{4, 5}));
  EXPECT_EQ(spec->name, "resnet");
  EXPECT_EQ(spec->labels.at("team"), "vision");
  EXPECT_TRUE(spec->mixed_models);
}

TEST(ParseJobSpecTest, DefaultsWithOnlyACommand) {
  Result<JobSpec> spec = ParseJobSpec(Minimal());
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->gpu_twentieths, 0);
  EXPECT_EQ(spec->checkpoint_grace, 30 * kSecondMs);
  EXPECT_FALSE(spec->preemptible);
  EXPECT_FALSE(spec->mixed_models);
}

TEST(ParseJobSpecTest, GpuFractionsInTwentieths) {
  const std::pair<double, int> cases[] = {{0, 0},     {0.05, 1},  {0.1, 2},  {0.15, 3}, {0.25, 5},
                                          {0.3, 6},   {0.75, 15}, {0.9, 18}, {0.95, 19}, {1, 20},
                                          {2.0, 40},  {8, 160}};
  for (const auto& [gpus, twentieths] : cases) {
    Json j = Minimal();
    j["gpus"] = gpus;
    if (twentieths > 0 && twentieths < 20) j["gpu_mem"] = "4GiB";
    Result<JobSpec> spec = ParseJobSpec(j);
    ASSERT_TRUE(spec.ok()) << gpus << ": " << spec.status().ToString();
    EXPECT_EQ(spec->gpu_twentieths, twentieths) << gpus;
  }
  Json j = Minimal();
  j["gpus"] = "0.5";
  j["gpu_mem"] = 512;
  Result<JobSpec> spec = ParseJobSpec(j);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->gpu_twentieths, 10);
  EXPECT_EQ(spec->gpu_mem_bytes, 512ull << 20);
}

TEST(ParseJobSpecTest, RefusesGpuCountsThatAreNotTwentiethsOrWhole) {
  Result<JobSpec> r = ParseWith("gpus", 0.33);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("'gpus'"));
  EXPECT_THAT(r.status().message(), HasSubstr("0.33 is not a multiple of 0.05"));
  EXPECT_FALSE(ParseWith("gpus", 0.01).ok());
  EXPECT_FALSE(ParseWith("gpus", 0.125).ok());

  r = ParseWith("gpus", 1.5);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ask for 1 or 2"));

  r = ParseWith("gpus", -1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("got -1"));

  EXPECT_FALSE(ParseWith("gpus", "two").ok());
  EXPECT_FALSE(ParseWith("gpus", "0.5x").ok());
  EXPECT_FALSE(ParseWith("gpus", true).ok());
  EXPECT_FALSE(ParseWith("gpus", 1e9).ok());
}

TEST(ParseJobSpecTest, UnknownFieldIsNamedWithTheAllowedOnes) {
  Result<JobSpec> r = ParseWith("gpu", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown field 'gpu'"));
  EXPECT_THAT(r.status().message(), HasSubstr("allowed fields: command, cwd, env, gpus"));
  r = ParseWith("checkpoint", Json{{"every", "10m"}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'checkpoint.every'"));
  EXPECT_THAT(r.status().message(), HasSubstr("allowed: grace"));
}

// A grace of 106751991167 days overflowed Now() + grace when the job was
// stopped: every duration is bounded at parse time, with the range said.
TEST(ParseJobSpecTest, DurationsBeyondTheRangeAreRefusedWithIt) {
  for (const Json& grace : {Json("106751991167d"), Json("11575d"), Json(1e18), Json(1e9 + 1)}) {
    Result<JobSpec> r = ParseWith("checkpoint", Json{{"grace", grace}});
    ASSERT_FALSE(r.ok()) << grace.dump();
    EXPECT_THAT(r.status().message(), HasSubstr("'checkpoint.grace'"));
    EXPECT_THAT(r.status().message(), AnyOf(HasSubstr("to 366d"), HasSubstr("to 31622400 (366 days)")));
  }
  Result<JobSpec> r = ParseWith("time_limit", "106751991167d");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("366d"));
  r = ParseWith("time_limit", "366d");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_LE(r->time_limit, kMaxDurationMs);
}

TEST(ParseJobSpecTest, UserComesFromCredentialsNotTheSpec) {
  Result<JobSpec> r = ParseWith("user", "root");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("whoever submits"));
}

TEST(ParseJobSpecTest, CommandIsRequiredAndMustBeStrings) {
  Result<JobSpec> r = ParseJobSpec(Json{{"gpus", 1}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'command': is required"));
  EXPECT_FALSE(ParseJobSpec(Json{{"command", Json::array()}}).ok());
  EXPECT_FALSE(ParseJobSpec(Json{{"command", ""}}).ok());
  EXPECT_FALSE(ParseJobSpec(Json{{"command", {"python", 3}}}).ok());
  EXPECT_FALSE(ParseJobSpec(Json::array()).ok());
}

TEST(ParseJobSpecTest, AStringCommandRunsThroughTheShell) {
  Result<JobSpec> r = ParseJobSpec(Json{{"command", "python train.py | tee out.log"}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->argv, (std::vector<std::string>{"/bin/sh", "-c", "python train.py | tee out.log"}));
}

TEST(ParseJobSpecTest, DependencyKinds) {
  Result<JobSpec> r = ParseJobSpec(Json{{"command", {"true"}}, {"after", {1, 2}}, {"after_any", {3}},
                                        {"after_not_ok", {4}}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->depends_on, (std::vector<JobId>{1, 2}));
  EXPECT_EQ(r->after_any, (std::vector<JobId>{3}));
  EXPECT_EQ(r->after_not_ok, (std::vector<JobId>{4}));
  Result<JobSpec> bad = ParseJobSpec(Json{{"command", {"true"}}, {"after_any", {0}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'after_any'"));
}

TEST(ParseJobSpecTest, FractionNeedsGpuMem) {
  Result<JobSpec> r = ParseWith("gpus", 0.5);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'gpu_mem': is required for a fraction"));
}

TEST(ParseJobSpecTest, BadValuesSayWhatToWrite) {
  struct Case {
    const char* key;
    Json value;
    const char* message;
  };
  const Case cases[] = {
      {"priority", 101, "from -100 to 100"},
      {"priority", 2.5, "whole number"},
      {"gpu_mem", "8 bananas", "unknown unit"},
      {"gpu_mem", "lots", "not a size"},
      {"gpu_mem", -4, "number of MiB"},
      {"min_cc", "eight", "major.minor"},
      {"min_cc", "8.10", "major.minor"},
      {"time_limit", "soon", "\"2h\""},
      {"checkpoint", Json{{"grace", "later"}}, "'checkpoint.grace'"},
      {"checkpoint", "60s", "{\"grace\": \"60s\"}"},
      {"preemptible", "yes", "true or false"},
      {"mixed_models", "true", "must be true"},
      {"mixed_models", 1, "must be true"},
      {"max_restarts", -1, "from 0"},
      {"depends_on", 4, "array of job ids"},
      {"depends_on", Json{0}, "from 1"},
      {"env", Json{{"A", Json::array()}}, "'env.A'"},
      {"labels", "x", "object"},
      {"cpus", "8", "whole number"},
  };
  for (const Case& c : cases) {
    Result<JobSpec> r = ParseWith(c.key, c.value);
    ASSERT_FALSE(r.ok()) << c.key << "=" << c.value.dump();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message)) << c.key << "=" << c.value.dump();
    EXPECT_THAT(r.status().message(), HasSubstr(std::string("'") + c.key)) << c.key;
  }
}

TEST(ParseMemorySizeTest, Units) {
  EXPECT_EQ(*ParseMemorySize("8GiB"), 8 * kGiB);
  EXPECT_EQ(*ParseMemorySize("8gib"), 8 * kGiB);
  EXPECT_EQ(*ParseMemorySize("20G"), 20 * kGiB);
  EXPECT_EQ(*ParseMemorySize("512MiB"), 512ull << 20);
  EXPECT_EQ(*ParseMemorySize("512"), 512ull << 20);
  EXPECT_EQ(*ParseMemorySize("1.5GiB"), 3 * kGiB / 2);
  EXPECT_EQ(*ParseMemorySize("10GB"), 10'000'000'000ull);
  EXPECT_EQ(*ParseMemorySize("1T"), 1ull << 40);
  EXPECT_FALSE(ParseMemorySize("").ok());
  EXPECT_FALSE(ParseMemorySize("G").ok());
  EXPECT_FALSE(ParseMemorySize("1.2.3G").ok());
}

TEST(ParseComputeCapabilityTest, Forms) {
  EXPECT_EQ(*ParseComputeCapability("8.0"), 80);
  EXPECT_EQ(*ParseComputeCapability("8.6"), 86);
  EXPECT_EQ(*ParseComputeCapability("9"), 90);
  EXPECT_EQ(*ParseComputeCapability("12.0"), 120);
  EXPECT_FALSE(ParseComputeCapability("8.").ok());
  EXPECT_FALSE(ParseComputeCapability("v8").ok());
  Result<JobSpec> r = ParseWith("min_cc", 8.6);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->min_cc, 86);
}

TEST(FormatTest, BytesTwentiethsAndCapability) {
  EXPECT_EQ(FormatBytes(24 * kGiB), "24 GiB");
  EXPECT_EQ(FormatBytes(512ull << 20), "512 MiB");
  EXPECT_EQ(FormatGpuTwentieths(1), "0.05");
  EXPECT_EQ(FormatGpuTwentieths(5), "0.25");
  EXPECT_EQ(FormatGpuTwentieths(10), "0.5");
  EXPECT_EQ(FormatGpuTwentieths(19), "0.95");
  EXPECT_EQ(FormatGpuTwentieths(40), "2");
  EXPECT_EQ(FormatComputeCapability(86), "8.6");
}

class CheckFitsTest : public ::testing::Test {
 protected:
  CheckFitsTest() : fleet_(testing::MakeFleet(4)) {
    fleet_.gpus[3].name = "NVIDIA A100-SXM4-40GB";
    fleet_.gpus[3].cc = 80;
    fleet_.gpus[3].memory_total_bytes = 40 * kGiB;
  }
  FleetState fleet_;
};

TEST_F(CheckFitsTest, FittingJobsPass) {
  EXPECT_TRUE(CheckFits(testing::Gpus(40), fleet_).ok());
  EXPECT_TRUE(CheckFits(testing::Gpus(5), fleet_).ok());
  JobSpec cpu_only = testing::Gpus(0);
  EXPECT_TRUE(CheckFits(cpu_only, fleet_).ok());
  JobSpec a100 = testing::Gpus(10);
  a100.model = "a100";
  EXPECT_TRUE(CheckFits(a100, fleet_).ok());
}

TEST_F(CheckFitsTest, MoreGpusThanTheMachineHas) {
  Status s = CheckFits(testing::Gpus(50), fleet_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("asks for 5 GPUs but this machine has 4"));
}

TEST_F(CheckFitsTest, MemoryBeyondTheBiggestCard) {
  JobSpec spec = testing::Gpus(10);
  spec.gpu_mem_bytes = 100 * kGiB;
  Status s = CheckFits(spec, fleet_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("gpu_mem 100 GiB is more than the largest GPU here has "
                                     "(80 GiB, NVIDIA H100 80GB HBM3)"));
}

TEST_F(CheckFitsTest, FractionWithoutMemory) {
  JobSpec spec = testing::Gpus(3);
  spec.gpu_mem_bytes = 0;
  Status s = CheckFits(spec, fleet_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("required for a fraction"));
}

TEST_F(CheckFitsTest, ModelAndCapabilityNothingMatches) {
  JobSpec spec = testing::Gpus(10);
  spec.model = "V100";
  Status s = CheckFits(spec, fleet_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("no GPU here matches model 'V100'"));
  EXPECT_THAT(s.message(), HasSubstr("NVIDIA A100-SXM4-40GB, NVIDIA H100 80GB HBM3"));

  spec.model.clear();
  spec.min_cc = 100;
  s = CheckFits(spec, fleet_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("compute capability 10.0 or higher (the highest is 9.0)"));
}

TEST_F(CheckFitsTest, FiltersTogetherLeaveTooFew) {
  JobSpec spec = testing::Gpus(20);
  spec.model = "A100";
  Status s = CheckFits(spec, fleet_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("only 1 GPU(s) here match"));
  spec = testing::Gpus(40);
  spec.gpu_mem_bytes = 60 * kGiB;  // the A100 is too small
  EXPECT_FALSE(CheckFits(spec, fleet_).ok());
}

// The typed spec written back as JSON reads as the same spec: what the queue
// stores for a spec it was handed typed (a pipeline node, a burn-in).
TEST(JobSpecToJsonTest, RoundTripsEveryField) {
  for (const char* text : {
           R"({"command": ["python", "train.py"]})",
           // 0.0001 MiB is 105 bytes: not a whole MiB.
           R"({"command": "echo hi | tee out", "gpus": 0.35, "gpu_mem": 0.0001, "time_limit": 7.001,
               "checkpoint": {"grace": 0}, "mem": "3.5GiB", "cpus": 3})",
           R"({"command": ["x"], "cwd": "/d", "env": {"A": "1"}, "gpus": 4, "model": "H100", "min_cc": "9.0",
               "priority": -7, "preemptible": true, "mixed_models": true, "max_restarts": 3, "after": [1, 2],
               "after_any": [3], "after_not_ok": [4], "name": "n", "labels": {"team": "v"}})"}) {
    auto a = ParseJobSpec(Json::parse(text));
    ASSERT_TRUE(a.ok()) << text << ": " << a.status().ToString();
    auto b = ParseJobSpec(JobSpecToJson(*a));
    ASSERT_TRUE(b.ok()) << JobSpecToJson(*a).dump() << ": " << b.status().ToString();
    EXPECT_EQ(JobSpecToJson(*b), JobSpecToJson(*a));
    EXPECT_EQ(b->argv, a->argv);
    EXPECT_EQ(b->env, a->env);
    EXPECT_EQ(b->gpu_twentieths, a->gpu_twentieths);
    EXPECT_EQ(b->gpu_mem_bytes, a->gpu_mem_bytes);
    EXPECT_EQ(b->mem_bytes, a->mem_bytes);
    EXPECT_EQ(b->min_cc, a->min_cc);
    EXPECT_EQ(b->time_limit, a->time_limit);
    EXPECT_EQ(b->checkpoint_grace, a->checkpoint_grace);
    EXPECT_EQ(b->depends_on, a->depends_on);
    EXPECT_EQ(b->after_any, a->after_any);
    EXPECT_EQ(b->after_not_ok, a->after_not_ok);
    EXPECT_EQ(b->labels, a->labels);
    EXPECT_EQ(std::tie(b->cwd, b->model, b->cpus, b->priority, b->preemptible, b->mixed_models, b->max_restarts,
                       b->name),
              std::tie(a->cwd, a->model, a->cpus, a->priority, a->preemptible, a->mixed_models, a->max_restarts,
                       a->name));
  }
}

}  // namespace
}  // namespace gpuherd::sched
