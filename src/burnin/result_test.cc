#include "burnin/result.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::burnin {
namespace {

using ::testing::HasSubstr;

BurnInRun FullRun() {
  BurnInRun run;
  run.id = 42;
  run.gpu_uuid = "GPU-1234";
  run.gpu_name = "NVIDIA A100-SXM4-40GB";
  run.pci_bus_id = "00000000:18:00.0";
  run.serial = "1320000000001";
  run.gpu_index = 3;
  run.level = 3;
  run.simulated = true;
  run.started = 1'700'000'000'000;
  run.finished = run.started + 16 * kMinuteMs;
  run.stress_duration = 15 * kMinuteMs;
  run.outcome = RunOutcome::kFaultsFound;
  Check check;
  check.name = "memtest.walking_ones";
  check.level = 2;
  check.outcome = CheckOutcome::kFail;
  check.reason = "memory_mismatch";
  check.message = "31 words read back wrong";
  check.values = {{"errors", 31}, {"gbs", 790.5}};
  run.checks.push_back(check);
  run.checks.push_back(Check{"driver", 1, CheckOutcome::kPass, "", "", {}});
  run.memory_errors = 31;
  run.memory_error_samples.push_back({"walking_ones", 0x7f4a40000000ull, 0x3fe00000, 0x1, 0x11, 0x10});
  run.compute_errors = 2;
  run.nan_count = 1;
  run.rates.fp32_tflops = 15.2;
  run.rates.bf16_tflops = 250.5;
  run.rates.mem_bandwidth_gbs = 1320;
  run.rates.h2d_gbs = 25.1;
  run.thermal.idle_temp_c = 35;
  run.thermal.max_temp_c = 71.5;
  run.thermal.time_to_steady_s = 410;
  run.thermal.throttled_fraction = 0.25;
  run.curve.push_back({0, 35.0, 60.0, 210, 1});
  run.curve.push_back({1000, 36.0, std::nullopt, std::nullopt, 0});
  run.health.score = 0;
  run.health.verdict = Verdict::kUnhealthy;
  run.health.disqualified = true;
  run.health.factors.push_back({"memory_errors", 100, "31 memory words read back wrong"});
  run.health.ratio_to_fleet = 0.97;
  run.health.fleet_reference_runs = 5;
  run.job_id = 7;
  return run;
}

TEST(ResultTest, NamesRoundTrip) {
  for (RunOutcome o : {RunOutcome::kPassed, RunOutcome::kFaultsFound, RunOutcome::kCouldNotRun,
                       RunOutcome::kAborted}) {
    EXPECT_EQ(ParseRunOutcome(RunOutcomeName(o)).value(), o);
  }
  for (CheckOutcome o : {CheckOutcome::kPass, CheckOutcome::kWarn, CheckOutcome::kFail,
                         CheckOutcome::kSkipped, CheckOutcome::kError}) {
    EXPECT_EQ(ParseCheckOutcome(CheckOutcomeName(o)).value(), o);
  }
  for (Verdict v : {Verdict::kHealthy, Verdict::kDegraded, Verdict::kUnhealthy, Verdict::kUnknown}) {
    EXPECT_EQ(ParseVerdict(VerdictName(v)).value(), v);
  }
  EXPECT_STREQ(RunOutcomeName(RunOutcome::kFaultsFound), "faults_found");
  auto bad = ParseVerdict("fine");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("healthy, degraded, unhealthy, unknown"));
}

TEST(ResultTest, JsonRoundTripKeepsEveryField) {
  const BurnInRun run = FullRun();
  const nlohmann::json j = ToJson(run);
  EXPECT_EQ(j["version"], kBurnInRecordVersion);
  EXPECT_EQ(j["memory_error_samples"][0]["address"], "0x7f4a40000000");
  EXPECT_EQ(j["memory_error_samples"][0]["xor"], "0x00000010");
  EXPECT_FALSE(j["rates"].contains("fp16_tflops"));  // absent, never 0
  EXPECT_EQ(j["rates"]["bf16_tflops"], 250.5);

  auto back = BurnInRunFromJson(nlohmann::json::parse(j.dump()));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_EQ(back->memory_error_samples[0].address, 0x7f4a40000000ull);
  EXPECT_EQ(back->memory_error_samples[0].xor_bits, 0x10u);
  EXPECT_EQ(back->checks[0].values.at("gbs"), 790.5);
  EXPECT_EQ(back->outcome, RunOutcome::kFaultsFound);
  EXPECT_EQ(back->health.verdict, Verdict::kUnhealthy);
  EXPECT_EQ(back->health.ratio_to_fleet, 0.97);
  EXPECT_EQ(back->rates.bf16_tflops, 250.5);
  EXPECT_FALSE(back->health.ratio_to_nominal.has_value());
  EXPECT_EQ(back->curve[0].sm_clock_mhz, 210);
  EXPECT_FALSE(back->curve[1].power_w.has_value());
}

TEST(ResultTest, MalformedRecordsNameTheField) {
  const nlohmann::json good = ToJson(FullRun());
  struct Case {
    const char* pointer;
    nlohmann::json value;
    const char* says;
  };
  const Case kCases[] = {
      {"/outcome", "fine", "outcome unknown run outcome \"fine\""},
      {"/level", "three", "level has the wrong type (string)"},
      {"/checks/0/outcome", 3, "checks[0].outcome has the wrong type"},
      {"/checks/1/values", nlohmann::json::array(), "checks[1].values must be an object"},
      {"/memory_error_samples/0/read", "17", "memory_error_samples[0].read must be a 0x hexadecimal"},
      {"/curve/1/t", -1.5, "curve[1].t has the wrong type"},
      {"/health/factors", "none", "health.factors must be an array"},
      {"/memory_errors", -3, "memory_errors has the wrong type"},
      {"/version", 99, "version 99 is not one this gpuherd reads"},
  };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.pointer);
    nlohmann::json bad = good;
    bad[nlohmann::json::json_pointer(c.pointer)] = c.value;
    auto run = BurnInRunFromJson(bad);
    ASSERT_FALSE(run.ok());
    EXPECT_EQ(run.status().code(), Code::kDataLoss);
    EXPECT_THAT(run.status().message(), HasSubstr(c.says));
  }
  nlohmann::json missing = good;
  missing.erase("gpu_uuid");
  EXPECT_THAT(BurnInRunFromJson(missing).status().message(), HasSubstr("gpu_uuid is missing"));
  EXPECT_THAT(BurnInRunFromJson(nlohmann::json::array()).status().message(),
              HasSubstr("must be an object"));
}

TEST(ResultTest, OptionalSectionsMayBeAbsent) {
  nlohmann::json minimal = {{"version", 1}, {"gpu_uuid", "GPU-x"}, {"level", 1},
                            {"outcome", "could_not_run"}};
  auto run = BurnInRunFromJson(minimal);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->outcome, RunOutcome::kCouldNotRun);
  EXPECT_TRUE(run->checks.empty());
  EXPECT_EQ(run->health.verdict, Verdict::kUnknown);
}

}  // namespace
}  // namespace gpuherd::burnin
