#include "burnin/report.h"

#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::burnin {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

BurnInRun ScoredRun(int index, int score, Verdict verdict) {
  BurnInRun run;
  run.gpu_index = index;
  run.gpu_uuid = "GPU-" + std::to_string(index);
  run.gpu_name = "NVIDIA A100-SXM4-40GB";
  run.level = 3;
  run.simulated = true;
  run.started = 1'700'000'000'000;
  run.finished = run.started + 16 * kMinuteMs;
  run.stress_duration = 15 * kMinuteMs;
  run.outcome = RunOutcome::kPassed;
  run.health.score = score;
  run.health.verdict = verdict;
  for (DurationMs t = 0; t <= 16 * kMinuteMs; t += 10 * kSecondMs) {
    run.curve.push_back({t, 35.0 + 30.0 * t / (16 * kMinuteMs), 60.0 + 300.0 * (t > kMinuteMs), 1400, 0});
  }
  run.checks.push_back({"idle_temp", 1, CheckOutcome::kPass, "", "", {{"slowdown_c", 89}, {"temp_c", 35}}});
  return run;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportTest, CurveChartHasBothSeriesTheLimitAndTimeLabels) {
  const std::string svg = TemperatureCurveSvg(ScoredRun(0, 100, Verdict::kHealthy), 720, 240);
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"240\""));
  EXPECT_THAT(svg, HasSubstr("class=\"temperature\""));
  EXPECT_THAT(svg, HasSubstr("class=\"power\""));
  EXPECT_THAT(svg, HasSubstr("slowdown 89 °C"));
  EXPECT_THAT(svg, HasSubstr(">2m<"));  // 16 minutes in steps of 2
  EXPECT_THAT(svg, HasSubstr(">16m<"));
  EXPECT_THAT(svg, HasSubstr(" W<"));
  EXPECT_THAT(svg, HasSubstr(" °C<"));
  // Every point of the series is drawn, inside the plot area.
  std::smatch m;
  const std::string& text = svg;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("class=\"temperature\"[^>]*points=\"([^\"]*)\"")));
  const std::string points = m[1];
  EXPECT_EQ(Count(points, ","), 97);  // 16 minutes every 10 s, both ends
  std::regex pair("([0-9.]+),([0-9.]+)");
  for (auto it = std::sregex_iterator(points.begin(), points.end(), pair); it != std::sregex_iterator(); ++it) {
    const double x = std::stod((*it)[1]), y = std::stod((*it)[2]);
    EXPECT_GE(x, 52);
    EXPECT_LE(x, 720 - 56);
    EXPECT_GE(y, 22);
    EXPECT_LE(y, 240 - 30);
  }
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

TEST(ReportTest, CurveChartWithoutReadingsSaysSo) {
  BurnInRun run = ScoredRun(0, 0, Verdict::kUnknown);
  run.curve.clear();
  const std::string svg = TemperatureCurveSvg(run);
  EXPECT_THAT(svg, HasSubstr("no temperature readings"));
  EXPECT_THAT(svg, Not(HasSubstr("polyline")));
}

TEST(ReportTest, HtmlRanksRunsAndShowsEachGpu) {
  BurnInRun good = ScoredRun(0, 98, Verdict::kHealthy);
  BurnInRun bad = ScoredRun(1, 0, Verdict::kUnhealthy);
  bad.outcome = RunOutcome::kFaultsFound;
  bad.memory_errors = 31;
  bad.health.disqualified = true;
  bad.health.factors.push_back({"memory_errors", 100, "31 reads of memory came back wrong"});
  bad.checks.push_back({"memtest.walking_ones", 2, CheckOutcome::kFail, "memory_mismatch",
                        "31 reads <wrong>", {{"errors", 31}}});
  bad.memory_error_samples.push_back({"walking_ones", 0x7f4a40000000ull, 0x3fe00000, 0x1, 0x11, 0x10});
  BurnInRun lost = ScoredRun(2, 0, Verdict::kUnknown);
  lost.outcome = RunOutcome::kCouldNotRun;
  lost.outcome_reason = "the driver does not answer";
  BurnInRun middling = ScoredRun(3, 72, Verdict::kDegraded);
  middling.gpu_name = "Card & <Co>";
  middling.rates.fp32_tflops = 12.5;
  middling.health.ratio_to_fleet = 0.8;

  const std::string html = RenderHtmlReport({lost, bad, good, middling});
  EXPECT_THAT(html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(html, HasSubstr("SIMULATED FLEET"));
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("http://www.w3.org/1999")));  // nothing fetched from outside
  // Ranked: best score first, the unscored last.
  const size_t g0 = html.find("href=\"#gpu-0\""), g3 = html.find("href=\"#gpu-3\""),
               g1 = html.find("href=\"#gpu-1\""), g2 = html.find("href=\"#gpu-2\"");
  ASSERT_NE(g2, std::string::npos);
  EXPECT_LT(g0, g3);
  EXPECT_LT(g3, g1);
  EXPECT_LT(g1, g2);
  for (int i = 0; i < 4; ++i) EXPECT_THAT(html, HasSubstr("<section id=\"gpu-" + std::to_string(i) + "\">"));
  EXPECT_EQ(Count(html, "<svg"), 4);
  EXPECT_THAT(html, HasSubstr("Card &amp; &lt;Co&gt;"));
  EXPECT_THAT(html, HasSubstr("31 reads &lt;wrong&gt;"));
  EXPECT_THAT(html, Not(HasSubstr("<Co>")));
  EXPECT_THAT(html, HasSubstr("<code>0x7f4a40000000</code>"));
  EXPECT_THAT(html, HasSubstr("<code>0x00000010</code>"));
  EXPECT_THAT(html, HasSubstr("memory_errors"));
  EXPECT_THAT(html, HasSubstr("80 %"));
  EXPECT_THAT(html, HasSubstr("the driver does not answer"));
  EXPECT_THAT(html, HasSubstr("disqualified"));
}

}  // namespace
}  // namespace gpuherd::burnin
