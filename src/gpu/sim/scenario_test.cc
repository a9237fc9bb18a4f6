#include "gpu/sim/scenario.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/types.h"

namespace gpuherd::gpu::sim {
namespace {

using ::testing::HasSubstr;

Status ParseError(const std::string& text) {
  auto result = ParseScenario(text, "test.yaml");
  EXPECT_FALSE(result.ok()) << "parsed without error:\n" << text;
  return result.ok() ? Status::Ok() : result.status();
}

TEST(ScenarioTest, ParsesTheDocumentedExample) {
  auto s = ParseScenario(R"(seed: 7
gpus: [{model: h100-sxm, count: 4}, {model: rtx3090, count: 4}]
faults:
  - {at: 2m, gpu: 3, kind: pcie_downtrain, width: 8}
  - {at: 5m, gpu: 1, kind: xid, xid: 79}    # falls off the bus
  - {at: 1m, gpu: 0, kind: temp_slope, rate: 3/min, duration: 10m}
)", "example.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->seed, 7u);
  ASSERT_EQ(s->gpus.size(), 2u);
  EXPECT_EQ(ScenarioGpuCount(*s), 8);
  ASSERT_EQ(s->faults.size(), 3u);
  EXPECT_EQ(s->faults[0].kind, FaultKind::kPcieDownTrain);
  EXPECT_EQ(s->faults[0].at, 2 * kMinuteMs);
  EXPECT_EQ(s->faults[0].gpu, 3);
  EXPECT_EQ(s->faults[0].pcie_width, 8);
  EXPECT_FALSE(s->faults[0].pcie_gen.has_value());
  EXPECT_EQ(s->faults[0].line, 4);
  EXPECT_EQ(s->faults[1].xid, 79);
  EXPECT_FALSE(s->faults[1].duration.has_value());
  EXPECT_EQ(s->faults[2].rate_per_min, 3.0);
  EXPECT_EQ(s->faults[2].duration, 10 * kMinuteMs);
}

TEST(ScenarioTest, ParsesEveryKindAndItsFields) {
  auto s = ParseScenario(R"(
description: all of them
ambient: 25
gpus: [{model: a100-40gb, count: 2, thermal_scale: 1.4}]
faults:
  - {at: 10s, gpu: 0, kind: overheat, temp: 95, duration: 1m}
  - {at: 10s, gpu: 0, kind: temp_slope, rate: 0.1/s}
  - {at: 10s, gpu: 0, kind: ecc_sbe, count: 12}
  - {at: 10s, gpu: 1, kind: ecc_sbe, rate: 30/h, duration: 2h}
  - {at: 10s, gpu: 0, kind: ecc_dbe}
  - {at: 10s, gpu: 0, kind: pcie_downtrain, gen: 3, width: 8}
  - {at: 10s, gpu: 1, kind: pcie_replay, rate: 50}
  - {at: 10s, gpu: 1, kind: xid, xid: 13}
  - {at: 10s, gpu: 1, kind: fan_failure}
  - {at: 10s, gpu: 1, kind: throttle, reason: hw_slowdown, duration: 30s}
  - {at: 10s, gpu: 1, kind: unresponsive, duration: 500ms}
)", "all.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->description, "all of them");
  EXPECT_EQ(s->ambient_c, 25.0);
  EXPECT_EQ(s->gpus[0].thermal_scale, 1.4);
  const auto& f = s->faults;
  ASSERT_EQ(f.size(), 11u);
  EXPECT_EQ(f[0].temp_c, 95.0);
  EXPECT_EQ(f[1].rate_per_min, 6.0);
  EXPECT_EQ(f[2].count, 12u);
  EXPECT_DOUBLE_EQ(f[3].rate_per_min, 0.5);
  EXPECT_EQ(f[4].kind, FaultKind::kEccDbe);
  EXPECT_EQ(f[5].pcie_gen, 3);
  EXPECT_EQ(f[6].rate_per_min, 50.0);  // a bare number is per minute
  EXPECT_EQ(f[7].xid, 13);
  EXPECT_EQ(f[8].kind, FaultKind::kFanFailure);
  EXPECT_EQ(f[9].throttle_reason, throttle::kHwSlowdown);
  EXPECT_EQ(f[10].duration, 500);
  for (const Fault& fault : f) EXPECT_EQ(fault.at, 10 * kSecondMs);
}

TEST(ScenarioTest, EmptyScenarioHasNoFaults) {
  auto s = ParseScenario("", "empty.yaml");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->faults.empty());
  EXPECT_TRUE(s->gpus.empty());
}

struct BadCase {
  const char* text;
  int line;
  const char* says;  // part of the message that tells what to fix
};

TEST(ScenarioTest, ErrorsNameFileLineAndFix) {
  const BadCase kCases[] = {
      {"seed: 1\nfautls: []\n", 2, "unknown key 'fautls'"},
      {"gpus:\n  - {model: rtx9090}\n", 2, "unknown GPU model \"rtx9090\"; known models: gtx1070ti"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: meltdown}\n", 2, "unknown fault kind \"meltdown\""},
      {"faults:\n  - {at: 1m, gpu: 0, kind: xid, xid: 79, width: 8}\n", 2,
       "unknown key 'width' in a xid fault"},
      {"gpus: [{model: t4, count: 2}]\nfaults:\n  - {at: 1m, gpu: 2, kind: ecc_dbe}\n", 3,
       "gpu 2 is outside the fleet of 2 GPUs"},
      {"faults:\n\n  - {at: soon, gpu: 0, kind: ecc_dbe}\n", 3, "is not a duration"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: overheat, duration: 0s}\n", 2,
       "duration must be longer than 0"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: temp_slope, rate: fast}\n", 2, "is not a rate"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: temp_slope}\n", 2, "needs rate:"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: ecc_sbe, count: 2, rate: 1/min}\n", 2,
       "either count:"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: pcie_downtrain}\n", 2, "needs width:"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: pcie_downtrain, width: 3}\n", 2, "1, 2, 4, 8 or 16"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: throttle, reason: tired}\n", 2,
       "unknown throttle reason \"tired\""},
      {"faults:\n  - {gpu: 0, kind: xid, xid: 79}\n", 2, "needs at:"},
      {"faults:\n  - {at: 1m, kind: xid, xid: 79}\n", 2, "needs gpu:"},
      {"faults:\n  - {at: 1m, gpu: -1, kind: xid, xid: 79}\n", 2, "gpu must be an index"},
      {"faults:\n  - {at: 1m, gpu: zero, kind: xid, xid: 79}\n", 2, "must be a whole number"},
      {"faults:\n  - {at: 1m, gpu: 0, kind: xid, xid: 79, xid: 48}\n", 2, "appears twice"},
      {"faults: {at: 1m}\n", 1, "faults must be a list"},
      {"seed: 1\ngpus: [{model: h200\n", 3, "not valid YAML"},
      {"- 1\n- 2\n", 1, "must be a mapping"},
  };
  for (const BadCase& c : kCases) {
    SCOPED_TRACE(c.text);
    Status st = ParseError(c.text);
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("test.yaml:" + std::to_string(c.line) + ": "));
    EXPECT_THAT(st.message(), HasSubstr(c.says));
  }
}

TEST(ScenarioTest, ParsesComputeFaults) {
  auto s = ParseScenario(R"(
gpus: [{model: a100-40gb, count: 4}]
faults:
  - {at: 0s, gpu: 0, kind: stuck_bits, address: 0x12340, mask: 0x00010000, value: 0x10000}
  - {at: 0s, gpu: 1, kind: stuck_bits, address: 4096, mask: 0x3}
  - {at: 0s, gpu: 1, kind: compute_errors, rate: 2/min, duration: 5m}
  - {at: 1m, gpu: 2, kind: nan, count: 3}
  - {at: 0s, gpu: 3, kind: slow, factor: 0.8}
)", "compute.yaml");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const auto& f = s->faults;
  ASSERT_EQ(f.size(), 5u);
  EXPECT_EQ(f[0].kind, FaultKind::kStuckBits);
  EXPECT_EQ(f[0].address, 0x12340u);
  EXPECT_EQ(f[0].mask, 0x10000u);
  EXPECT_EQ(f[0].value, 0x10000u);
  EXPECT_EQ(f[1].address, 4096u);
  EXPECT_EQ(f[1].value, 0u);  // stuck at 0 unless told
  EXPECT_EQ(f[2].kind, FaultKind::kComputeErrors);
  EXPECT_EQ(f[2].rate_per_min, 2.0);
  EXPECT_EQ(f[2].duration, 5 * kMinuteMs);
  EXPECT_EQ(f[3].kind, FaultKind::kNan);
  EXPECT_EQ(f[3].count, 3u);
  EXPECT_EQ(f[4].kind, FaultKind::kSlow);
  EXPECT_EQ(f[4].factor, 0.8);
  EXPECT_STREQ(FaultKindName(FaultKind::kComputeErrors), "compute_errors");
  std::vector<const GpuModel*> fleet(4, FindModel("a100-40gb"));
  EXPECT_TRUE(CheckFaultsFitFleet(*s, fleet).ok());
}

TEST(ScenarioTest, ComputeFaultErrorsNameLineAndFix) {
  const BadCase kCases[] = {
      {"faults:\n  - {at: 0s, gpu: 0, kind: stuck_bits, mask: 1}\n", 2, "needs address:"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: stuck_bits, address: 6, mask: 1}\n", 2,
       "multiple of 4"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: stuck_bits, address: 0xzz, mask: 1}\n", 2,
       "decimal or 0x hex"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: stuck_bits, address: 8, mask: 0x100000000}\n", 2,
       "mask must name 1 to 32 bits"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: stuck_bits, address: 8, mask: 1, value: 2}\n", 2,
       "value sets bits outside mask"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: compute_errors}\n", 2, "either count:"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: nan, count: 0}\n", 2, "count must be at least 1"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: slow}\n", 2, "needs factor:"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: slow, factor: 1.2}\n", 2, "below 1"},
      {"faults:\n  - {at: 0s, gpu: 0, kind: slow, factor: 0.8, mask: 1}\n", 2,
       "unknown key 'mask' in a slow fault"},
  };
  for (const BadCase& c : kCases) {
    SCOPED_TRACE(c.text);
    Status st = ParseError(c.text);
    EXPECT_EQ(st.code(), Code::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("test.yaml:" + std::to_string(c.line) + ": "));
    EXPECT_THAT(st.message(), HasSubstr(c.says));
  }
}

TEST(ScenarioTest, FleetCheckKeepsStuckBitsInsideTheCardsMemory) {
  auto s = ParseScenario("faults:\n  - {at: 0s, gpu: 0, kind: stuck_bits, address: 0x200000000, "
                         "mask: 1}\n", "big.yaml");
  ASSERT_TRUE(s.ok());
  std::vector<const GpuModel*> small = {FindModel("gtx1070ti")};  // 8 GiB
  EXPECT_THAT(CheckFaultsFitFleet(*s, small).message(),
              HasSubstr("big.yaml:2: GPU 0 (gtx1070ti) has 8589934592 bytes of memory"));
  std::vector<const GpuModel*> large = {FindModel("a100-40gb")};
  EXPECT_TRUE(CheckFaultsFitFleet(*s, large).ok());
}

TEST(ScenarioTest, FleetCheckRejectsFaultsTheCardCannotHave) {
  auto s = ParseScenario(R"(faults:
  - {at: 1m, gpu: 1, kind: ecc_sbe, count: 3}
)", "wear.yaml");
  ASSERT_TRUE(s.ok());
  const GpuModel* h100 = FindModel("h100-sxm");
  const GpuModel* pascal = FindModel("gtx1070ti");
  std::vector<const GpuModel*> ecc_fleet = {h100, h100};
  EXPECT_TRUE(CheckFaultsFitFleet(*s, ecc_fleet).ok());

  std::vector<const GpuModel*> geforce_fleet = {h100, pascal};
  Status st = CheckFaultsFitFleet(*s, geforce_fleet);
  EXPECT_THAT(st.message(), HasSubstr("wear.yaml:2: GPU 1 (gtx1070ti) has no ECC memory"));

  std::vector<const GpuModel*> small_fleet = {h100};
  st = CheckFaultsFitFleet(*s, small_fleet);
  EXPECT_THAT(st.message(), HasSubstr("wear.yaml:2: gpu 1 is outside the fleet of 1 GPUs"));
}

TEST(ScenarioTest, FleetCheckRejectsDownTrainAtOrAboveTheMaximum) {
  auto s = ParseScenario("faults:\n  - {at: 1m, gpu: 0, kind: pcie_downtrain, gen: 4}\n", "t.yaml");
  ASSERT_TRUE(s.ok());
  std::vector<const GpuModel*> gen3 = {FindModel("gtx1070ti")};
  EXPECT_THAT(CheckFaultsFitFleet(*s, gen3).message(), HasSubstr("links at most at gen 3 x16"));
  std::vector<const GpuModel*> gen5 = {FindModel("h100-sxm")};
  EXPECT_TRUE(CheckFaultsFitFleet(*s, gen5).ok());
}

TEST(ScenarioTest, LoadReportsAMissingFile) {
  auto s = LoadScenario("/nonexistent/scenario.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Code::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("/nonexistent/scenario.yaml"));
}

TEST(ScenarioTest, LoadNamesTheFileInErrors) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("gpuherd-scenario-" + std::to_string(::testing::UnitTest::GetInstance()
                                                              ->random_seed()) + ".yaml");
  {
    std::ofstream out(path);
    out << "gpus:\n  - {model: h100-sxm, count: 2}\nfaults:\n  - {at: 1m, gpu: 5, kind: xid, xid: 79}\n";
  }
  auto s = LoadScenario(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr(path.string() + ":4: gpu 5 is outside"));
}

TEST(ScenarioTest, ExampleScenariosParse) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(GPUHERD_EXAMPLES_DIR)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    auto s = LoadScenario(entry.path().string());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    ++seen;
  }
  EXPECT_GE(seen, 3);
}

}  // namespace
}  // namespace gpuherd::gpu::sim

namespace gpuherd::gpu::sim {
namespace {

// Scenarios are read with the same bounded reader as pipelines.
TEST(ScenarioLimitsTest, AliasBombAndDeepNestingAreRefusedWithTheFile) {
  std::string text = "x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i <= 9; ++i) {
    text += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  auto laughs = ParseScenario(text, "bomb.yaml");
  ASSERT_FALSE(laughs.ok());
  EXPECT_THAT(laughs.status().message(), ::testing::HasSubstr("bomb.yaml:"));
  EXPECT_THAT(laughs.status().message(), ::testing::HasSubstr("alias"));
  auto deep = ParseScenario("gpus: " + std::string(100, '[') + std::string(100, ']') + "\n", "deep.yaml");
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), ::testing::HasSubstr("deep.yaml:1: lists and mappings nest deeper"));
}

}  // namespace
}  // namespace gpuherd::gpu::sim
