#include "cli/burnin_format.h"

#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

using burnin::BurnInRun;
using burnin::Check;
using burnin::CheckOutcome;
using burnin::RunOutcome;
using burnin::Verdict;

constexpr TimeMs kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

BurnInRun Passed(int index, int score, double tflops) {
  BurnInRun run;
  run.id = 10 + index;
  run.gpu_index = index;
  run.gpu_uuid = "GPU-" + std::to_string(index);
  run.gpu_name = "NVIDIA GeForce RTX 3090";
  run.level = 3;
  run.started = kT0;
  run.finished = kT0 + 90 * 60 * 1000;
  run.outcome = RunOutcome::kPassed;
  run.checks = {Check{"pcie_link", 1, CheckOutcome::kPass, "", "Gen4 x16", {}},
                Check{"stress.fp32", 3, CheckOutcome::kPass, "", "", {}}};
  run.rates.fp32_tflops = tflops;
  run.thermal.max_temp_c = 71.4;
  run.health.score = score;
  run.health.verdict = score >= 80 ? Verdict::kHealthy : score >= 60 ? Verdict::kDegraded : Verdict::kUnhealthy;
  run.health.ratio_to_fleet = 0.984;
  run.health.fleet_reference_runs = 3;
  run.health.ratio_to_nominal = 1.02;
  return run;
}

BurnInRun StuckBit(int index) {
  BurnInRun run = Passed(index, 0, 30.0);
  run.outcome = RunOutcome::kFaultsFound;
  run.memory_errors = 4096;
  run.health.verdict = Verdict::kUnhealthy;
  run.health.disqualified = true;
  run.checks.push_back(Check{"memtest.walking_ones", 2, CheckOutcome::kFail, "memory_mismatch",
                             "4096 words read back wrong, bit 7 stuck at 0", {}});
  return run;
}

BurnInRun NotRun(int index, RunOutcome outcome, const std::string& why) {
  BurnInRun run;
  run.gpu_index = index;
  run.gpu_name = "NVIDIA GeForce GTX 1070 Ti";
  run.outcome = outcome;
  run.outcome_reason = why;
  run.health.verdict = Verdict::kUnknown;
  return run;
}

TEST(BurnInExitCodeTest, TheMostSeriousOutcomeDecides) {
  const BurnInRun healthy = Passed(0, 97, 35);
  const BurnInRun degraded = Passed(1, 70, 25);
  const BurnInRun faults = StuckBit(2);
  const BurnInRun no_cuda = NotRun(3, RunOutcome::kCouldNotRun, "libcuda.so.1 not found");
  const BurnInRun stopped = NotRun(4, RunOutcome::kAborted, "stopped by SIGINT");

  EXPECT_EQ(BurnInExitCode({healthy, Passed(5, 80, 34)}), kBurnInExitPassed);
  EXPECT_EQ(BurnInExitCode({healthy, degraded}), kBurnInExitFaults);
  EXPECT_EQ(BurnInExitCode({healthy, faults}), kBurnInExitFaults);
  EXPECT_EQ(BurnInExitCode({healthy, no_cuda}), kBurnInExitCouldNotRun);
  EXPECT_EQ(BurnInExitCode({no_cuda, faults}), kBurnInExitFaults);
  EXPECT_EQ(BurnInExitCode({faults, stopped, no_cuda}), kBurnInExitAborted);
  EXPECT_EQ(BurnInExitCode({}), kBurnInExitCouldNotRun);
}

TEST(MainReasonTest, AFailureComesFirstThenWhyItDidNotRunThenWarningsThenTheHeaviestFactor) {
  BurnInRun run = StuckBit(0);
  run.checks.insert(run.checks.begin(), Check{"pcie_link", 1, CheckOutcome::kWarn, "pcie_downtrained",
                                              "running at x8 of x16", {}});
  EXPECT_EQ(MainReason(run), "memtest.walking_ones: 4096 words read back wrong, bit 7 stuck at 0");

  EXPECT_EQ(MainReason(NotRun(1, RunOutcome::kCouldNotRun, "libcuda.so.1 not found")), "libcuda.so.1 not found");

  BurnInRun warned = Passed(2, 88, 33);
  warned.checks.push_back(Check{"thermal", 3, CheckOutcome::kWarn, "hot", "", {}});
  EXPECT_EQ(MainReason(warned), "thermal: hot");  // no message: the reason code

  BurnInRun factors = Passed(3, 90, 33);
  factors.health.factors = {{"throughput", 4, "96% of the fleet median"},
                            {"thermal_headroom", 6, "peak 83°C, 4°C below slowdown"},
                            {"ecc", 0, "no errors"}};
  EXPECT_EQ(MainReason(factors), "thermal_headroom: peak 83°C, 4°C below slowdown (-6)");
  EXPECT_EQ(MainReason(Passed(4, 100, 35)), "");
}

TEST(VerdictTextTest, AShortLevel3SaysTheThermalTrendWasNotChecked) {
  BurnInRun run = Passed(0, 95, 35.0);
  EXPECT_EQ(VerdictText(run), "healthy");
  run.checks.push_back(Check{"thermal.trend", 3, CheckOutcome::kSkipped, "too_short",
                             "a stress of 1m is too short", {}});
  EXPECT_EQ(VerdictText(run), "passed; thermal not checked");
  EXPECT_NE(RenderBurnInTable({run}, false).find("passed; thermal not checked"), std::string::npos);
  EXPECT_NE(RenderRunDetail(run, false).find("passed; thermal not checked"), std::string::npos);
  EXPECT_EQ(MainReason(run), "thermal.trend: a stress of 1m is too short");
  // Nor are peer checks where the machine has too few cards of the model.
  BurnInRun alone = Passed(2, 95, 35.0);
  alone.checks.push_back(Check{"peer_clock", 2, CheckOutcome::kSkipped, "too_few_peers",
                               "1 card(s) of this model ran; a median needs 3", {}});
  EXPECT_EQ(VerdictText(alone), "healthy");
  // What the card cannot answer (no ECC on a GeForce) is not a check left out.
  BurnInRun geforce = Passed(1, 95, 35.0);
  geforce.checks.push_back(Check{"ecc", 1, CheckOutcome::kSkipped, "not_supported", "", {}});
  EXPECT_EQ(VerdictText(geforce), "healthy");
  // A degraded verdict stays what it is.
  BurnInRun degraded = Passed(2, 70, 30.0);
  degraded.checks = run.checks;
  EXPECT_EQ(VerdictText(degraded), "degraded");
}

TEST(RankRunsTest, FinishedRunsByScoreThenRateAndUnfinishedLast) {
  std::vector<BurnInRun> ranked = RankRuns({NotRun(0, RunOutcome::kAborted, "stopped"), Passed(1, 90, 30),
                                            StuckBit(2), Passed(3, 97, 31), Passed(4, 90, 34),
                                            NotRun(5, RunOutcome::kCouldNotRun, "no context")});
  std::vector<int> order;
  for (const BurnInRun& r : ranked) order.push_back(r.gpu_index);
  EXPECT_EQ(order, (std::vector<int>{3, 4, 1, 2, 0, 5}));
}

TEST(RenderBurnInTableTest, OneRankedRowPerRunWithTheFiguresThatMatter) {
  std::vector<BurnInRun> runs = {Passed(0, 97, 35.56), StuckBit(1),
                                 NotRun(2, RunOutcome::kCouldNotRun, "libcuda.so.1 not found")};
  runs[1].checks.back().message = std::string(100, 'x');  // long messages are cut to one cell
  const std::string text = RenderBurnInTable(runs, /*color=*/false);
  EXPECT_EQ(text,
            "#  GPU  MODEL                       OUTCOME        SCORE  VERDICT    TFLOPS  MEM GB/s  VS FLEET  "
            "VS SPEC  MAX TEMP  ERRORS  REASON\n"
            "1    0  NVIDIA GeForce RTX 3090     passed            97  healthy      35.6         -       98%     "
            "102%      71°C       0\n"
            "2    1  NVIDIA GeForce RTX 3090     faults_found       0  unhealthy    30.0         -       98%     "
            "102%      71°C    4096  memtest.walking_ones: " +
                std::string(49, 'x') + "…\n"
            "3    2  NVIDIA GeForce GTX 1070 Ti  could_not_run      -  unknown         -         -         -        "
            "-         -       0  libcuda.so.1 not found\n");
  const std::string colored = RenderBurnInTable(runs, /*color=*/true);
  EXPECT_NE(colored.find("\x1b[31mfaults_found\x1b[0m"), std::string::npos);
  EXPECT_NE(colored.find("\x1b[32mhealthy\x1b[0m"), std::string::npos);
}

TEST(RenderHistoryTest, HistoryRowsAndTheLatestRunsChecksAndFactors) {
  BurnInRun older = Passed(0, 97, 35);
  older.id = 3;
  older.finished = kT0;
  BurnInRun latest = StuckBit(0);
  latest.id = 9;
  latest.health.factors = {{"memory_errors", 100, "4096 words wrong"}};
  EXPECT_EQ(RenderHistoryTable({latest, older}, false),
            "FINISHED (UTC)    ID  LEVEL  OUTCOME       SCORE  VERDICT    TFLOPS  MAX TEMP  ERRORS\n"
            "2026-01-01 01:30   9      3  faults_found      0  unhealthy    30.0      71°C    4096\n"
            "2026-01-01 00:00   3      3  passed           97  healthy      35.0      71°C       0\n");

  const std::string detail = RenderRunDetail(latest, false);
  EXPECT_EQ(detail.substr(0, detail.find('\n')), "Run 9 (level 3, faults_found, 2026-01-01 01:30 UTC): unhealthy, score 0");
  EXPECT_NE(detail.find("memtest.walking_ones      2  fail     memory_mismatch: 4096 words read back wrong"),
            std::string::npos)
      << detail;
  EXPECT_NE(detail.find("disqualified"), std::string::npos);
  EXPECT_NE(detail.find("  -100  memory_errors: 4096 words wrong\n"), std::string::npos) << detail;
  EXPECT_NE(detail.find("throughput: 98% of the fleet median (3 earlier runs), 102% of the specification\n"),
            std::string::npos)
      << detail;
  // Only the rates the run measured: no FP16/BF16 line items for a card without them.
  EXPECT_NE(detail.find("  rates: FP32 30.0 TFLOPS"), std::string::npos) << detail;
  EXPECT_EQ(detail.find("BF16"), std::string::npos) << detail;
  latest.rates.fp16_tflops = 120;
  latest.rates.bf16_tflops = 118.5;
  EXPECT_NE(RenderRunDetail(latest, false).find("FP32 30.0 TFLOPS, FP16 120.0 TFLOPS, BF16 118.5 TFLOPS"),
            std::string::npos)
      << RenderRunDetail(latest, false);
}

TEST(RenderFleetHealthTest, LatestVerdictPerGpuThenTheUntestedOnes) {
  const std::string text = RenderFleetHealth({Passed(0, 97, 35), StuckBit(1)},
                                             {UntestedGpu{2, "GPU-2", "NVIDIA GeForce GTX 1070 Ti"}}, false);
  EXPECT_NE(text.find("  0  NVIDIA GeForce RTX 3090     GPU-0  healthy       97      3  2026-01-01 01:30\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  1  NVIDIA GeForce RTX 3090     GPU-1  unhealthy      0      3  2026-01-01 01:30  memtest.walking_ones: 4096"), std::string::npos) << text;
  EXPECT_NE(text.find("  2  NVIDIA GeForce GTX 1070 Ti  GPU-2  untested       -      -  -                 no finished burn-in"), std::string::npos) << text;
  EXPECT_NE(text.find("run `gpuherd burnin --gpu 2 --level 1`"), std::string::npos) << text;
}

// A GPU off the bus is not told to run a burn-in that cannot run.
TEST(RenderFleetHealthTest, ALostGpuIsNotAdvisedABurnIn) {
  const std::string text =
      RenderFleetHealth({}, {UntestedGpu{5, "GPU-5", "NVIDIA A100", /*lost=*/true}, UntestedGpu{6, "GPU-6", "NVIDIA A100"}},
                        false);
  EXPECT_NE(text.find("lost (off the bus or not answering): reset or reboot it, then burn it in"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("burnin --gpu 5"), std::string::npos) << text;
  EXPECT_NE(text.find("burnin --gpu 6"), std::string::npos) << text;
}

burnin::Progress At(int index, const std::string& phase, double fraction) {
  burnin::Progress p;
  p.gpu_index = index;
  p.phase = phase;
  p.fraction = fraction;
  return p;
}

TEST(ProgressTest, LineShowsPhaseBarRateTemperatureAndErrors) {
  burnin::Progress p = At(0, "memtest.walking_ones", 0.52);
  p.rate = 410.25;
  p.rate_unit = "GB/s";
  p.temp_c = 63.4;
  p.errors = 1;
  EXPECT_EQ(ProgressLine(p, 10),
            "memtest.walking_ones             [#####-----]  52%     410.2 GB/s     63°C  1 error");
  EXPECT_EQ(ProgressLine(At(1, "level1", 1.5), 4),
            "level1                           [####] 100%" + std::string(17 + 6, ' ') + "-  0 errors");
}

TEST(ProgressTest, PlainOutputWritesOnAPhaseChangeOrAfterTheInterval) {
  ProgressDisplay display(/*redraw=*/false, {{0, "GPU 0"}, {1, "GPU 10"}}, 10000);
  std::string first = display.Update({At(0, "level1", 0.1), At(1, "level1", 0.1)}, kT0);
  EXPECT_EQ(first.substr(0, first.find('\n')), "GPU 0   " + ProgressLine(At(0, "level1", 0.1)));
  EXPECT_EQ(std::count(first.begin(), first.end(), '\n'), 2);

  EXPECT_EQ(display.Update({At(0, "level1", 0.2), At(1, "level1", 0.2)}, kT0 + 5000), "");
  EXPECT_EQ(display.Update({At(0, "level1", 0.3), At(1, "memtest.walking_ones", 0.3)}, kT0 + 6000),
            "GPU 10  " + ProgressLine(At(1, "memtest.walking_ones", 0.3)) + "\n");
  std::string later = display.Update({At(0, "level1", 0.4), At(1, "memtest.walking_ones", 0.4)}, kT0 + 10000);
  EXPECT_EQ(later, "GPU 0   " + ProgressLine(At(0, "level1", 0.4)) + "\n");
}

TEST(ProgressTest, TerminalOutputRedrawsEveryLineInPlace) {
  ProgressDisplay display(/*redraw=*/true, {{0, "GPU 0"}, {1, "GPU 1"}}, 10000);
  const std::string first = display.Update({At(0, "level1", 0.1), At(1, "level1", 0.1)}, kT0);
  EXPECT_EQ(first, "\r\x1b[2KGPU 0  " + ProgressLine(At(0, "level1", 0.1)) + "\n\r\x1b[2KGPU 1  " +
                       ProgressLine(At(1, "level1", 0.1)) + "\n");
  const std::string second = display.Update({At(0, "level1", 0.2), At(1, "level1", 0.2)}, kT0 + 1);
  EXPECT_EQ(second.substr(0, 4), "\x1b[2A");
  EXPECT_NE(second.find(ProgressLine(At(1, "level1", 0.2))), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::cli
