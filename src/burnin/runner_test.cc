// The burn-in end to end on the simulated fleet and a virtual clock: every
// injected fault is caught by the level and check that should catch it, and
// moves the score as documented (docs/gpu-health.md, "Health score").
#include "burnin/runner.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "burnin/report.h"
#include "gpu/catalog.h"
#include "gpu/sim/sim_compute.h"
#include "gpu/sim/sim_driver.h"
#include "host/virtual_clock.h"

namespace gpuherd::burnin {
namespace {

using ::testing::HasSubstr;

constexpr TimeMs kT0 = 1'700'000'000'000;

struct Outcome {
  std::vector<BurnInRun> runs;
  Status status;
};

// Runs a burn-in of every GPU of `scenario` on a virtual clock.
Outcome Burn(const std::string& scenario, BurnInOptions options,
             const std::function<void(gpu::sim::SimComputeBackend&)>& inject = {},
             std::stop_token stop = {}, const ProgressCallback& progress = {}) {
  host::VirtualClock clock(kT0);
  gpu::sim::SimOptions sim;
  sim.scenario_text = scenario;
  auto driver = gpu::sim::OpenSimDriver(sim);
  EXPECT_TRUE(driver.ok()) << driver.status().ToString();
  if (!driver.ok()) return {{}, driver.status()};
  auto backend = gpu::sim::NewSimComputeBackend(**driver, clock, sim);
  EXPECT_TRUE(backend.ok()) << backend.status().ToString();
  if (!backend.ok()) return {{}, backend.status()};
  if (inject) inject(static_cast<gpu::sim::SimComputeBackend&>(**backend));
  auto fleet = (*driver)->Discover();
  std::vector<int> all;
  for (const auto& gpu : fleet->gpus) all.push_back(gpu.index);
  auto runs = RunBurnIn(**driver, *fleet, all, **backend, clock, options, stop, progress);
  if (!runs.ok()) return {{}, runs.status()};
  return {std::move(runs).value(), Status::Ok()};
}

BurnInOptions Level(int level, DurationMs stress = 15 * kMinuteMs) {
  BurnInOptions options;
  options.level = level;
  options.stress_duration = stress;
  return options;
}

const Check* Find(const BurnInRun& run, const std::string& name) {
  for (const Check& c : run.checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

const HealthFactor* Factor(const BurnInRun& run, const std::string& name) {
  for (const HealthFactor& f : run.health.factors) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string Describe(const BurnInRun& run) {
  std::string out = std::string(RunOutcomeName(run.outcome)) + " score " +
                    std::to_string(run.health.score) + "\n";
  for (const Check& c : run.checks) {
    out += "  " + c.name + " " + CheckOutcomeName(c.outcome) + " " + c.reason + " " + c.message + "\n";
  }
  for (const HealthFactor& f : run.health.factors) {
    out += "  factor " + f.name + " -" + std::to_string(f.penalty) + " " + f.detail + "\n";
  }
  return out;
}

TEST(BurnInTest, CleanCardsOfEveryModelPassEveryCheckAndScoreHealthy) {
  std::string scenario = "gpus:\n";
  for (const gpu::GpuModel& model : gpu::Catalog()) {
    scenario += "  - {model: " + std::string(model.key) + "}\n";
  }
  const auto real_start = std::chrono::steady_clock::now();
  Outcome out = Burn(scenario, Level(3));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  // A 15-minute level 3 of nine GPUs on the virtual clock takes seconds at most.
  EXPECT_LT(std::chrono::steady_clock::now() - real_start, std::chrono::seconds(20));
  ASSERT_EQ(out.runs.size(), gpu::Catalog().size());
  for (const BurnInRun& run : out.runs) {
    SCOPED_TRACE(run.gpu_name + "\n" + Describe(run));
    EXPECT_EQ(run.outcome, RunOutcome::kPassed);
    for (const Check& c : run.checks) {
      EXPECT_TRUE(c.outcome == CheckOutcome::kPass || c.outcome == CheckOutcome::kSkipped) << c.name;
    }
    EXPECT_GE(run.health.score, 95);
    EXPECT_EQ(run.health.verdict, Verdict::kHealthy);
    EXPECT_FALSE(run.health.disqualified);
    ASSERT_TRUE(run.rates.fp32_tflops && run.rates.mem_bandwidth_gbs && run.rates.h2d_gbs &&
                run.rates.d2h_gbs && run.rates.d2d_gbs && run.rates.memtest_gbs);
    ASSERT_TRUE(run.health.ratio_to_nominal.has_value());
    EXPECT_GT(*run.health.ratio_to_nominal, 0.55);
    EXPECT_LT(*run.health.ratio_to_nominal, 0.92);
    // Level 3 ran its whole stress and level 2 tested 90 % of free memory.
    EXPECT_GE(run.finished - run.started, 15 * kMinuteMs);
    const Check* walking = Find(run, "memtest.walking_ones");
    ASSERT_TRUE(walking);
    EXPECT_NEAR(walking->values.at("free_fraction"), 0.9, 0.001);
    for (gpu::MemPattern p : gpu::AllMemPatterns()) {
      EXPECT_TRUE(Find(run, std::string("memtest.") + gpu::MemPatternName(p)));
    }
    // The card heated to a plateau under its slowdown temperature.
    ASSERT_TRUE(run.thermal.max_temp_c && run.thermal.idle_temp_c && run.thermal.time_to_steady_s);
    EXPECT_GT(*run.thermal.max_temp_c, *run.thermal.idle_temp_c + 20);
    EXPECT_LT(*run.thermal.time_to_steady_s, 10 * 60);
    EXPECT_GT(run.curve.size(), 15u * 60);  // about a point a second
    EXPECT_EQ(run.memory_errors + run.compute_errors + run.nan_count, 0u);
    // BF16 stress exactly where the card has it (Ampere and later).
    const gpu::GpuModel* model = gpu::FindModel(run.gpu_name);
    ASSERT_TRUE(model);
    EXPECT_EQ(run.rates.bf16_tflops.has_value(), model->cc_major >= 8);
    EXPECT_EQ(Find(run, "stress.bf16") != nullptr, model->cc_major >= 8);
  }
}

TEST(BurnInTest, StuckBitsFailTheMemoryTestAndDisqualify) {
  Outcome out = Burn(R"(gpus: [{model: a100-40gb}]
faults: [{at: 0s, gpu: 0, kind: stuck_bits, address: 0x40000000, mask: 0x10, value: 0x10}])",
                     Level(2));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& run = out.runs[0];
  SCOPED_TRACE(Describe(run));
  EXPECT_EQ(run.outcome, RunOutcome::kFaultsFound);
  for (const char* name : {"memtest.own_address", "memtest.walking_ones", "memtest.walking_zeros"}) {
    const Check* check = Find(run, name);
    ASSERT_TRUE(check) << name;
    EXPECT_EQ(check->outcome, CheckOutcome::kFail) << name;
    EXPECT_EQ(check->reason, "memory_mismatch") << name;
    EXPECT_THAT(check->message, HasSubstr("bits 0x00000010"));
  }
  ASSERT_FALSE(run.memory_error_samples.empty());
  const MemErrorRecord& first = run.memory_error_samples.front();
  EXPECT_EQ(first.pattern, "walking_ones");
  EXPECT_EQ(first.xor_bits, 0x10u);
  EXPECT_EQ(first.expected ^ first.read, first.xor_bits);
  EXPECT_EQ(first.read & 0x10u, 0x10u);
  EXPECT_EQ(first.address & 0xFFFFFFFFull, 0x40000000ull);  // the card's offset, mapped high
  EXPECT_GT(run.memory_errors, 0u);
  EXPECT_TRUE(run.health.disqualified);
  EXPECT_EQ(run.health.score, 0);
  EXPECT_EQ(run.health.verdict, Verdict::kUnhealthy);
  ASSERT_TRUE(Factor(run, "memory_errors"));
}

TEST(BurnInTest, ComputeErrorsFailTheStressAndDisqualify) {
  Outcome out = Burn(R"(gpus: [{model: rtx3090}]
faults: [{at: 0s, gpu: 0, kind: compute_errors, rate: 2/min}])",
                     Level(3, 5 * kMinuteMs));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& run = out.runs[0];
  SCOPED_TRACE(Describe(run));
  const Check* stress = Find(run, "stress.fp32");
  ASSERT_TRUE(stress);
  EXPECT_EQ(stress->outcome, CheckOutcome::kFail);
  EXPECT_EQ(stress->reason, "compute_mismatch");
  // Two a minute over the stress time (FP32's share of it, FP16/BF16 the rest).
  EXPECT_GE(run.compute_errors, 9u);
  EXPECT_LE(run.compute_errors, 10u);
  EXPECT_EQ(run.nan_count, 0u);
  EXPECT_EQ(Find(run, "gemm")->outcome, CheckOutcome::kPass);  // level 2 did not see it
  EXPECT_TRUE(run.health.disqualified);
  EXPECT_EQ(run.health.score, 0);
  EXPECT_EQ(run.health.verdict, Verdict::kUnhealthy);
  EXPECT_EQ(run.outcome, RunOutcome::kFaultsFound);
}

TEST(BurnInTest, Level3StressesBf16WhereTheCardHasItAndReportsItsRate) {
  Outcome out = Burn("gpus: [{model: a100-40gb}, {model: h100-sxm}, {model: gtx1070ti}, "
                     "{model: t4}]",
                     Level(3, 2 * kMinuteMs));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  ASSERT_EQ(out.runs.size(), 4u);
  const std::string html = RenderHtmlReport(out.runs);
  for (const BurnInRun& run : out.runs) {
    SCOPED_TRACE(run.gpu_name + "\n" + Describe(run));
    EXPECT_EQ(run.outcome, RunOutcome::kPassed);
    const gpu::GpuModel* model = gpu::FindModel(run.gpu_name);
    ASSERT_TRUE(model);
    const nlohmann::json rates = ToJson(run)["rates"];
    const Check* bf16 = Find(run, "stress.bf16");
    if (model->cc_major < 8) {
      // Pascal and Turing have no BF16: no phase, no rate, absent from the JSON.
      EXPECT_FALSE(bf16);
      EXPECT_FALSE(run.rates.bf16_tflops);
      EXPECT_FALSE(rates.contains("bf16_tflops"));
      EXPECT_EQ(run.rates.fp16_tflops.has_value(), model->cc_major >= 7);
      continue;
    }
    ASSERT_TRUE(bf16);
    EXPECT_EQ(bf16->outcome, CheckOutcome::kPass);
    EXPECT_GE(bf16->values.at("batches"), 1);
    EXPECT_EQ(bf16->values.at("mismatches"), 0);
    ASSERT_TRUE(run.rates.bf16_tflops && run.rates.fp16_tflops && run.rates.fp32_tflops);
    // The tensor-core rate, under the power cap's clock.
    EXPECT_GT(*run.rates.bf16_tflops, 0.5 * model->bf16_tflops);
    EXPECT_LT(*run.rates.bf16_tflops, 0.9 * model->bf16_tflops);
    EXPECT_GT(*run.rates.bf16_tflops, 5 * *run.rates.fp32_tflops);
    EXPECT_EQ(rates.at("bf16_tflops").get<double>(), *run.rates.bf16_tflops);
    // The report's rates row: FP32, FP16, BF16.
    EXPECT_THAT(html, HasSubstr(fmt::format("<td>{:.1f} TFLOPS</td><td>{:.1f} TFLOPS</td>"
                                            "<td>{:.1f} TFLOPS</td>",
                                            *run.rates.fp32_tflops, *run.rates.fp16_tflops,
                                            *run.rates.bf16_tflops)));
  }
}

TEST(BurnInTest, ComputeErrorsDuringTheBf16PhaseFailThatPhase) {
  // Where the BF16 phase begins, from a clean run's progress (one report per
  // sample interval): the same fleet runs the same timeline again.
  BurnInOptions options = Level(3, 4 * kMinuteMs);
  options.sample_interval = 500;
  int reports = 0, bf16_report = -1;
  Outcome clean = Burn("gpus: [{model: a100-40gb}]", options, {}, {},
                       [&](const std::vector<Progress>& p) {
                         if (bf16_report < 0 && p[0].phase == "stress.bf16") bf16_report = reports;
                         ++reports;
                       });
  ASSERT_TRUE(clean.status.ok()) << clean.status.ToString();
  ASSERT_GT(bf16_report, 0);
  ASSERT_TRUE(Find(clean.runs[0], "stress.bf16"));
  EXPECT_EQ(clean.runs[0].compute_errors, 0u);

  // Three wrong elements, 5 s into the 36 s BF16 phase.
  gpu::sim::Fault fault;
  fault.kind = gpu::sim::FaultKind::kComputeErrors;
  fault.gpu = 0;
  fault.at = bf16_report * options.sample_interval + 5'000;
  fault.count = 3;
  Outcome out = Burn("gpus: [{model: a100-40gb}]", options, [&](gpu::sim::SimComputeBackend& sim) {
    ASSERT_TRUE(sim.AddFault(fault).ok());
  });
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& run = out.runs[0];
  SCOPED_TRACE(Describe(run));
  for (const char* passed : {"stress.fp32", "stress.fp16"}) {
    const Check* check = Find(run, passed);
    ASSERT_TRUE(check) << passed;
    EXPECT_EQ(check->outcome, CheckOutcome::kPass) << passed;
  }
  const Check* bf16 = Find(run, "stress.bf16");
  ASSERT_TRUE(bf16);
  EXPECT_EQ(bf16->outcome, CheckOutcome::kFail);
  EXPECT_EQ(bf16->reason, "compute_mismatch");
  EXPECT_EQ(bf16->values.at("mismatches"), 3);
  EXPECT_EQ(run.compute_errors, 3u);
  EXPECT_TRUE(run.rates.bf16_tflops.has_value());
  EXPECT_TRUE(run.health.disqualified);
  EXPECT_EQ(run.health.score, 0);
  EXPECT_EQ(run.outcome, RunOutcome::kFaultsFound);
}

TEST(BurnInTest, NansAreCountedApart) {
  Outcome out = Burn(R"(gpus: [{model: h100-sxm}]
faults: [{at: 0s, gpu: 0, kind: nan, count: 5}])",
                     Level(3, 2 * kMinuteMs));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& run = out.runs[0];
  SCOPED_TRACE(Describe(run));
  EXPECT_EQ(run.nan_count, 5u);
  EXPECT_EQ(run.compute_errors, 0u);
  const Check* stress = Find(run, "stress.fp32");
  ASSERT_TRUE(stress);
  EXPECT_EQ(stress->outcome, CheckOutcome::kFail);
  EXPECT_EQ(stress->reason, "nan");
  EXPECT_EQ(stress->values.at("nans"), 5);
  EXPECT_EQ(stress->values.at("mismatches"), 0);
  ASSERT_TRUE(Factor(run, "nan"));
  EXPECT_FALSE(Factor(run, "compute_errors"));
  EXPECT_EQ(run.health.score, 0);
}

TEST(BurnInTest, ThermalRunawayIsCaughtAndCostsPoints) {
  // Two A100s; the second's cooling degrades by 1.5 °C a minute.
  Outcome out = Burn(R"(gpus: [{model: a100-40gb, count: 2}]
faults: [{at: 0s, gpu: 1, kind: temp_slope, rate: 1.5/min}])",
                     Level(3));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& clean = out.runs[0];
  const BurnInRun& hot = out.runs[1];
  SCOPED_TRACE(Describe(hot));
  const Check* trend = Find(hot, "thermal.trend");
  ASSERT_TRUE(trend);
  EXPECT_EQ(trend->outcome, CheckOutcome::kWarn);
  EXPECT_EQ(trend->reason, "thermal_runaway");
  EXPECT_NEAR(trend->values.at("end_trend_c_per_min"), 1.5, 0.5);
  EXPECT_FALSE(hot.thermal.time_to_steady_s.has_value());  // it never settled
  const Check* headroom = Find(hot, "thermal.headroom");
  ASSERT_TRUE(headroom);
  EXPECT_NE(headroom->outcome, CheckOutcome::kPass);
  ASSERT_TRUE(Factor(hot, "thermal_trend"));
  EXPECT_EQ(Factor(hot, "thermal_trend")->penalty, 15);
  ASSERT_TRUE(Factor(hot, "thermal_headroom"));
  EXPECT_GT(Factor(hot, "thermal_headroom")->penalty, 0);
  EXPECT_EQ(Find(clean, "thermal.trend")->outcome, CheckOutcome::kPass);
  EXPECT_LE(hot.health.score, clean.health.score - 20);
  EXPECT_GT(hot.health.score, 0);
}

TEST(BurnInTest, ASlowCardScoresAgainstTheFleetMedianOfCleanCards) {
  const std::string fleet = "gpus: [{model: rtx3090, count: 3}]\n";
  Outcome history = Burn(fleet, Level(3, 5 * kMinuteMs));
  ASSERT_TRUE(history.status.ok()) << history.status.ToString();
  BurnInOptions options = Level(3, 5 * kMinuteMs);
  options.references["NVIDIA GeForce RTX 3090"] =
      ReferenceFromHistory("NVIDIA GeForce RTX 3090", history.runs);
  Outcome out = Burn(fleet + "faults: [{at: 0s, gpu: 2, kind: slow, factor: 0.8}]\n", options);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& clean = out.runs[0];
  const BurnInRun& slow = out.runs[2];
  SCOPED_TRACE(Describe(slow));
  ASSERT_TRUE(slow.health.ratio_to_fleet && clean.health.ratio_to_fleet);
  EXPECT_NEAR(*slow.health.ratio_to_fleet, 0.8, 0.03);
  EXPECT_NEAR(*clean.health.ratio_to_fleet, 1.0, 0.03);
  EXPECT_EQ(slow.health.fleet_reference_runs, 3);
  EXPECT_NEAR(*slow.health.ratio_to_nominal / *clean.health.ratio_to_nominal, 0.8, 0.03);
  const HealthFactor* throughput = Factor(slow, "throughput");
  ASSERT_TRUE(throughput);
  EXPECT_NEAR(throughput->penalty, 22.5, 4.5);  // 1.5 points per percent below 95 %
  EXPECT_LE(slow.health.score, 79);
  EXPECT_NE(slow.health.verdict, Verdict::kHealthy);
  EXPECT_EQ(slow.outcome, RunOutcome::kPassed);  // nothing failed: slow, not broken
  EXPECT_GE(clean.health.score, 95);
}

TEST(BurnInTest, WithoutHistoryPeersOfTheSameModelAreTheReference) {
  Outcome out = Burn(R"(gpus: [{model: h100-sxm, count: 4}]
faults: [{at: 0s, gpu: 3, kind: slow, factor: 0.8}])",
                     Level(3, 3 * kMinuteMs));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& slow = out.runs[3];
  ASSERT_TRUE(slow.health.ratio_to_fleet);
  EXPECT_NEAR(*slow.health.ratio_to_fleet, 0.8, 0.03);
  EXPECT_EQ(slow.health.fleet_reference_runs, 4);
  EXPECT_NE(slow.health.verdict, Verdict::kHealthy);
  EXPECT_EQ(out.runs[0].health.verdict, Verdict::kHealthy);
}

TEST(BurnInTest, ADownTrainedLinkIsFlaggedAndSlowsCopies) {
  const std::string scenario = R"(gpus: [{model: rtx3090, count: 2}]
faults: [{at: 0s, gpu: 1, kind: pcie_downtrain, width: 8}])";
  Outcome quick = Burn(scenario, Level(1));
  ASSERT_TRUE(quick.status.ok()) << quick.status.ToString();
  const Check* link = Find(quick.runs[1], "pcie_link");
  ASSERT_TRUE(link);
  EXPECT_EQ(link->outcome, CheckOutcome::kWarn);
  EXPECT_EQ(link->reason, "pcie_downtrained");
  EXPECT_THAT(link->message, HasSubstr("x8 of x16"));
  EXPECT_EQ(Find(quick.runs[0], "pcie_link")->outcome, CheckOutcome::kPass);

  Outcome out = Burn(scenario, Level(2));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& narrow = out.runs[1];
  SCOPED_TRACE(Describe(narrow));
  for (const char* name : {"copy.h2d", "copy.d2h"}) {
    const Check* copy = Find(narrow, name);
    ASSERT_TRUE(copy);
    EXPECT_EQ(copy->outcome, CheckOutcome::kWarn) << name;
    EXPECT_EQ(copy->reason, "copy_bandwidth_low") << name;
    EXPECT_LT(copy->values.at("gbs"), copy->values.at("expected_min_gbs"));
    EXPECT_EQ(Find(out.runs[0], name)->outcome, CheckOutcome::kPass) << name;
  }
  EXPECT_NEAR(*narrow.rates.h2d_gbs / *out.runs[0].rates.h2d_gbs, 0.5, 0.03);
  EXPECT_EQ(Find(narrow, "pcie_link")->values.at("gen"), 4);  // under load: full gen
  const HealthFactor* pcie = Factor(narrow, "pcie");
  ASSERT_TRUE(pcie);
  EXPECT_EQ(pcie->penalty, 10);  // the slow copies are the link's doing: counted once
  EXPECT_EQ(narrow.health.score, out.runs[0].health.score - 10);
  EXPECT_EQ(narrow.outcome, RunOutcome::kPassed);
}

TEST(BurnInTest, EccDoubleBitHistoryFailsLevelOne) {
  Outcome out = Burn(R"(gpus: [{model: a100-40gb}, {model: v100-sxm2}]
faults:
  - {at: 0s, gpu: 0, kind: ecc_dbe}
  - {at: 0s, gpu: 1, kind: ecc_dbe}
)", Level(1));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  for (const BurnInRun& run : out.runs) {
    SCOPED_TRACE(Describe(run));
    const Check* ecc = Find(run, "ecc");
    ASSERT_TRUE(ecc);
    EXPECT_EQ(ecc->outcome, CheckOutcome::kFail);
    EXPECT_EQ(ecc->reason, "ecc_dbe");
    EXPECT_EQ(ecc->level, 1);
    const Check* repair = Find(run, "memory_repair");  // remapped row (A100), retired page (V100)
    ASSERT_TRUE(repair);
    EXPECT_EQ(repair->outcome, CheckOutcome::kFail);
    EXPECT_EQ(repair->reason, "repair_pending");
    EXPECT_EQ(run.outcome, RunOutcome::kFaultsFound);
    EXPECT_EQ(run.health.score, 100 - 25 - 10);
    EXPECT_EQ(run.health.verdict, Verdict::kDegraded);
  }
}

TEST(BurnInTest, AnUnresponsiveGpuCouldNotRunWhileTheOthersGoOn) {
  Outcome out = Burn(R"(gpus: [{model: t4, count: 4}]
faults: [{at: 0s, gpu: 1, kind: unresponsive}])",
                     Level(2), [](gpu::sim::SimComputeBackend& backend) {
                       backend.DisableCompute(3, "CUDA_ERROR_NO_DEVICE");
                     });
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  ASSERT_EQ(out.runs.size(), 4u);
  EXPECT_EQ(out.runs[1].outcome, RunOutcome::kCouldNotRun);
  EXPECT_THAT(out.runs[1].outcome_reason, HasSubstr("does not answer"));
  EXPECT_EQ(out.runs[1].health.verdict, Verdict::kUnknown);
  EXPECT_EQ(out.runs[3].outcome, RunOutcome::kCouldNotRun);
  EXPECT_THAT(out.runs[3].outcome_reason, HasSubstr("CUDA_ERROR_NO_DEVICE"));
  EXPECT_EQ(out.runs[3].health.verdict, Verdict::kUnknown);
  for (int i : {0, 2}) {
    EXPECT_EQ(out.runs[i].outcome, RunOutcome::kPassed) << Describe(out.runs[i]);
    EXPECT_EQ(out.runs[i].health.verdict, Verdict::kHealthy);
  }
}

TEST(BurnInTest, AGpuThatFallsOffTheBusMidRunIsFound) {
  Outcome out = Burn(R"(gpus: [{model: h100-sxm, count: 2}]
faults: [{at: 5m, gpu: 0, kind: xid, xid: 79}])",
                     Level(3, 10 * kMinuteMs));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& lost = out.runs[0];
  SCOPED_TRACE(Describe(lost));
  EXPECT_EQ(lost.outcome, RunOutcome::kFaultsFound);
  ASSERT_TRUE(Factor(lost, "gpu_lost"));
  EXPECT_EQ(lost.health.verdict, Verdict::kUnhealthy);
  EXPECT_EQ(out.runs[1].outcome, RunOutcome::kPassed);
}

// Seconds from the start of a level-2 burn-in of `gpus` to its square wave
// (a clean run on the same seed: the virtual clock makes it repeatable).
DurationMs WaveStart(const std::string& gpus) {
  int reports = 0, at_wave = -1;
  Outcome out = Burn(gpus, Level(2), {}, {}, [&](const std::vector<Progress>& p) {
    ++reports;
    if (at_wave < 0 && p[0].phase == "power_transients") at_wave = reports;
  });
  EXPECT_GT(at_wave, 0);
  return at_wave * kSecondMs;
}

TEST(BurnInTest, ACardThatDropsUnderLoadSwingsFailsPowerTransients) {
  // The weak power stage is there from just before the wave: the memory
  // test's own load changes come earlier and are not what is tested here.
  const std::string gpus = "gpus: [{model: rtx3090, count: 2}]\n";
  const DurationMs wave = WaveStart(gpus);
  Outcome out = Burn(gpus + fmt::format("faults: [{{at: {}ms, gpu: 0, kind: transient_drop, count: 6}}]",
                                        wave - 2 * kSecondMs),
                     Level(2));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  const BurnInRun& weak = out.runs[0];
  SCOPED_TRACE(Describe(weak));
  EXPECT_EQ(weak.outcome, RunOutcome::kFaultsFound);
  const Check* swings = Find(weak, "power_transients");
  ASSERT_TRUE(swings);
  EXPECT_EQ(swings->outcome, CheckOutcome::kFail);
  EXPECT_THAT(swings->reason, ::testing::AnyOf("lost_under_transients", "xid_under_transients"));
  EXPECT_EQ(weak.health.verdict, Verdict::kUnhealthy);
  // Its steady sibling held the same wave, and the power did swing.
  const BurnInRun& good = out.runs[1];
  SCOPED_TRACE(Describe(good));
  EXPECT_EQ(good.outcome, RunOutcome::kPassed);
  const Check* held = Find(good, "power_transients");
  ASSERT_TRUE(held);
  EXPECT_EQ(held->outcome, CheckOutcome::kPass);
  EXPECT_LT(held->values.at("min_power_w"), 0.5 * held->values.at("max_power_w"));
}

TEST(BurnInTest, ACardClockingUnderItsPeersIsHeldBack) {
  Outcome out = Burn(R"(gpus: [{model: rtx3090, count: 4}]
faults: [{at: 0s, gpu: 2, kind: underclock, factor: 0.85}])",
                     Level(2));
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  for (int i = 0; i < 4; ++i) {
    const BurnInRun& run = out.runs[i];
    SCOPED_TRACE(Describe(run));
    const Check* clock = Find(run, "peer_clock");
    const Check* power = Find(run, "peer_power");
    ASSERT_TRUE(clock && power);
    if (i == 2) {
      // 15 % under its peers: below the tolerance in power (and in clock
      // where the power cap does not hold the peers' clocks down too).
      EXPECT_EQ(power->outcome, CheckOutcome::kWarn);
      EXPECT_EQ(power->reason, "below_peers_power");
      EXPECT_NEAR(power->values.at("ratio"), 0.85, 0.04);
      EXPECT_LT(clock->values.at("ratio"), 0.95);
      EXPECT_EQ(run.health.verdict, Verdict::kDegraded);
      ASSERT_TRUE(Factor(run, "peers"));
      EXPECT_EQ(Factor(run, "peers")->penalty, 25);
    } else {
      EXPECT_EQ(clock->outcome, CheckOutcome::kPass);
      EXPECT_EQ(power->outcome, CheckOutcome::kPass);
      EXPECT_NEAR(clock->values.at("ratio"), 1, 0.03);
      EXPECT_EQ(run.health.verdict, Verdict::kHealthy);
    }
  }
}

TEST(BurnInTest, StopMidStressAbortsQuickly) {
  std::stop_source stop;
  int calls = 0, calls_at_stop = 0;
  Outcome out = Burn("gpus: [{model: rtx4090, count: 2}]", Level(3), {}, stop.get_token(),
                     [&](const std::vector<Progress>& progress) {
                       ++calls;
                       if (!stop.stop_requested() && progress[0].phase == "stress.fp32" &&
                           progress[0].fraction > 0.4) {
                         calls_at_stop = calls;
                         stop.request_stop();
                       }
                     });
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  ASSERT_TRUE(stop.stop_requested());
  // Progress comes once a sample interval (a second): every GPU had stopped
  // by the next one.
  EXPECT_LE(calls - calls_at_stop, 1);
  for (const BurnInRun& run : out.runs) {
    EXPECT_EQ(run.outcome, RunOutcome::kAborted);
    EXPECT_THAT(run.outcome_reason, HasSubstr("stress.fp32"));
    EXPECT_EQ(run.health.verdict, Verdict::kUnknown);
    EXPECT_LT(run.finished - run.started, 15 * kMinuteMs);
    EXPECT_GT(run.finished - run.started, 5 * kMinuteMs);
  }
}

TEST(BurnInTest, ProgressComesEverySampleIntervalAndEndsDone) {
  BurnInOptions options = Level(3, 2 * kMinuteMs);
  options.sample_interval = 500;
  std::vector<std::vector<Progress>> seen;
  Outcome out = Burn("gpus: [{model: l40s}]", options, {}, {},
                     [&](const std::vector<Progress>& p) { seen.push_back(p); });
  ASSERT_TRUE(out.status.ok());
  const BurnInRun& run = out.runs[0];
  EXPECT_NEAR(static_cast<double>(seen.size()), (run.finished - run.started) / 500.0, 2);
  double last = 0;
  bool saw_rate = false;
  for (const auto& p : seen) {
    ASSERT_EQ(p.size(), 1u);
    EXPECT_GE(p[0].fraction, last);
    last = p[0].fraction;
    if (p[0].rate && p[0].rate_unit == "TFLOPS") saw_rate = true;
  }
  EXPECT_TRUE(saw_rate);
  EXPECT_EQ(seen.back()[0].phase, "done");
  EXPECT_EQ(seen.back()[0].fraction, 1.0);
}

TEST(BurnInTest, BadOptionsAndIndicesAreRefused) {
  BurnInOptions options;
  options.level = 4;
  EXPECT_THAT(ValidateOptions(options).message(), HasSubstr("level must be 1"));
  options = BurnInOptions();
  options.memtest_fraction = 1.2;
  EXPECT_THAT(ValidateOptions(options).message(), HasSubstr("share of free memory"));
  options = BurnInOptions();
  options.stress_duration = 0;
  EXPECT_THAT(ValidateOptions(options).message(), HasSubstr("between 1s and 30d"));
  EXPECT_TRUE(ValidateOptions(BurnInOptions()).ok());

  host::VirtualClock clock(kT0);
  gpu::sim::SimOptions sim;
  sim.count = 2;
  auto driver = gpu::sim::OpenSimDriver(sim);
  ASSERT_TRUE(driver.ok());
  auto backend = gpu::sim::NewSimComputeBackend(**driver, clock);
  auto fleet = (*driver)->Discover();
  auto runs = RunBurnIn(**driver, *fleet, {0, 2}, *backend, clock, BurnInOptions(), {}, {});
  ASSERT_FALSE(runs.ok());
  EXPECT_EQ(runs.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(runs.status().message(), HasSubstr("no GPU 2 in a fleet of 2"));
}

}  // namespace
}  // namespace gpuherd::burnin
