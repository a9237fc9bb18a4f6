#include "alerts/rules.h"

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::alerts {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(ParseConditionTest, ValueAndFunctions) {
  auto c = ParseCondition("temp_c > 85");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->function, Function::kValue);
  EXPECT_EQ(c->series, "temp_c");
  EXPECT_EQ(c->comparison, Comparison::kGreater);
  EXPECT_EQ(c->threshold, 85);

  c = ParseCondition("  slope( temp_c [5m] ) >= 1.5 ");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->function, Function::kSlope);
  EXPECT_EQ(c->window, 5 * kMinuteMs);
  EXPECT_EQ(c->comparison, Comparison::kGreaterEqual);
  EXPECT_EQ(c->threshold, 1.5);

  c = ParseCondition("ratio(pcie_replays, pcie_packets[5m]) > 1e-3");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->function, Function::kRatio);
  EXPECT_EQ(c->per, "pcie_packets");
  EXPECT_DOUBLE_EQ(c->threshold, 0.001);

  c = ParseCondition("increase(ib_port_rcv_errors[1m]) != 0");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(SeriesScope(c->series), Scope::kIbPort);
}

TEST(ParseConditionTest, TextRoundTrips) {
  for (const char* text : {"gpu_util_pct < 30", "slope(temp_c[5m]) > 1.5", "ratio(pcie_replays, pcie_packets[5m]) > 0.001",
                           "drop(health_score[30d]) >= 15"}) {
    auto c = ParseCondition(text);
    ASSERT_TRUE(c.ok()) << text;
    EXPECT_EQ(ConditionText(*c), text);
  }
}

TEST(ParseConditionTest, TheValueHasTheUnitOfItsSeriesAndFunction) {
  auto unit = [](const char* text) {
    auto c = ParseCondition(text);
    EXPECT_TRUE(c.ok()) << text;
    return c.ok() ? ConditionUnit(*c) : std::string("?");
  };
  EXPECT_EQ(unit("slope(temp_c[10m]) > 0.5"), "°C/min");
  EXPECT_EQ(unit("temp_over_slowdown_c > 0"), "°C");
  EXPECT_EQ(unit("gpu_util_pct < 30"), "%");
  EXPECT_EQ(unit("mem_used_pct > 90"), "%");
  EXPECT_EQ(unit("power_w > 300"), "W");
  EXPECT_EQ(unit("sm_clock_mhz < 900"), "MHz");
  EXPECT_EQ(unit("increase(ecc_sbe[1h]) > 10"), "");
  EXPECT_EQ(unit("rate(pcie_replays[5m]) > 1"), "/min");
  EXPECT_EQ(unit("ratio(pcie_replays, pcie_packets[5m]) > 0.001"), "");
}

TEST(ParseConditionTest, ErrorsSayWhatToFix) {
  EXPECT_THAT(ParseCondition("temp_c is hot").status().message(), HasSubstr("series op number"));
  EXPECT_THAT(ParseCondition("median(temp_c[5m]) > 3").status().message(), HasSubstr("unknown function 'median'"));
  EXPECT_THAT(ParseCondition("gpu_temp > 3").status().message(), HasSubstr("unknown series 'gpu_temp'"));
  EXPECT_THAT(ParseCondition("slope(temp_c[soon]) > 3").status().message(), HasSubstr("window '[soon]'"));
  EXPECT_THAT(ParseCondition("ratio(pcie_replays[5m]) > 3").status().message(), HasSubstr("two series"));
  EXPECT_THAT(ParseCondition("ratio(pcie_replays, ib_symbol_error[5m]) > 3").status().message(),
              HasSubstr("another scope"));
  EXPECT_THAT(ParseCondition("temp_c > hot").status().message(), HasSubstr("threshold 'hot'"));
}

TEST(ParseRulesTest, ReadsEveryField) {
  auto rules = ParseRules(R"(rules:
  - name: hot
    expr: temp_over_slowdown_c > 0
    for: 30s
    severity: critical
    action: drain
    while_job: true
    summary: too hot
  - name: bare
    expr: ecc_dbe > 0
)", "r.yaml");
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  ASSERT_EQ(rules->size(), 2u);
  const Rule& hot = (*rules)[0];
  EXPECT_EQ(hot.name, "hot");
  EXPECT_EQ(hot.for_duration, 30 * kSecondMs);
  EXPECT_EQ(hot.severity, store::Severity::kCritical);
  EXPECT_EQ(hot.action, Action::kDrain);
  EXPECT_TRUE(hot.while_job);
  EXPECT_EQ(hot.summary, "too hot");
  EXPECT_EQ(hot.origin, "r.yaml:2");
  const Rule& bare = (*rules)[1];
  EXPECT_EQ(bare.for_duration, 0);
  EXPECT_EQ(bare.severity, store::Severity::kWarning);
  EXPECT_EQ(bare.action, Action::kNotify);
  EXPECT_EQ(bare.summary, "ecc_dbe > 0");
  EXPECT_EQ(bare.origin, "r.yaml:9");
}

TEST(ParseRulesTest, ErrorsNameFileAndLine) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"rules:\n  - name: a\n    expr: temp_c > 1\n    colour: red\n", "f.yaml:4: unknown key 'colour'"},
      {"rules:\n  - name: a\n    expr: temp_c >\n", "f.yaml:3: rule 'a': cannot read expr"},
      {"rules:\n  - name: a\n    expr: temp_c > 1\n    severity: loud\n", "f.yaml:4: rule 'a': severity must be"},
      {"rules:\n  - name: a\n    expr: temp_c > 1\n    action: reboot\n", "f.yaml:4: rule 'a': action must be"},
      {"rules:\n  - name: a\n    expr: temp_c > 1\n    for: soon\n", "f.yaml:4: rule 'a': for: 'soon'"},
      {"rules:\n  - name: a\n    expr: temp_c > 1\n  - name: a\n    expr: temp_c > 2\n",
       "f.yaml:4: a second rule named 'a'"},
      {"rules:\n  - name: Bad Name\n    expr: temp_c > 1\n", "f.yaml:2: rule name 'Bad Name'"},
      {"rules:\n  - name: a\n", "f.yaml:2: rule 'a' has no expr"},
      {"rules:\n  - name: a\n    expr: increase(ib_packet_loss[5m]) > 0\n    while_job: true\n",
       "f.yaml:4: rule 'a': while_job applies to GPU series only"},
      {"alerts: []\n", "f.yaml:1: expected a top-level 'rules:' list"},
      {"rules: []\nextra: 1\n", "f.yaml:2: unknown top-level key 'extra'"},
      {"rules:\n  - name: [a\n", "f.yaml:"},
      {"rules:\n  - name: a\n    expr: temp_c > 1\n    summary: {hot: 1}\n",
       "f.yaml:4: rule 'a': summary must be a single value"},
      {"rules:\n  - name: [a, b]\n    expr: temp_c > 1\n", "f.yaml:2: name must be a single value"},
  };
  for (const Case& c : cases) {
    auto rules = ParseRules(c.yaml, "f.yaml");
    ASSERT_FALSE(rules.ok()) << c.yaml;
    EXPECT_EQ(rules.status().code(), Code::kInvalidArgument);
    EXPECT_THAT(rules.status().message(), StartsWith(c.expected)) << c.yaml;
  }
}

TEST(ParseRulesTest, LoadsFileAndReportsAMissingOne) {
  std::string path = ::testing::TempDir() + "/rules_test.yaml";
  {
    std::ofstream out(path);
    out << "rules:\n  - name: a\n    expr: temp_c > 1\n";
  }
  auto rules = LoadRulesFile(path);
  ASSERT_TRUE(rules.ok()) << rules.status().ToString();
  EXPECT_EQ((*rules)[0].origin, path + ":2");

  auto missing = LoadRulesFile(path + ".absent");
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(".absent"));
}

TEST(ActionTest, NamesRoundTrip) {
  for (Action a : {Action::kNone, Action::kNotify, Action::kDrain, Action::kCheckpointAndMove}) {
    EXPECT_EQ(ParseAction(ActionName(a)), a);
  }
  EXPECT_FALSE(ParseAction("reboot"));
}

}  // namespace
}  // namespace gpuherd::alerts

namespace gpuherd::alerts {
namespace {

// Alert rules are read with the same bounded reader as pipelines.
TEST(RulesLimitsTest, AliasBombIsRefusedWithTheFile) {
  std::string text = "x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n";
  for (int i = 1; i <= 9; ++i) {
    text += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) text += (j ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  text += "rules: []\n";
  auto rules = ParseRules(text, "rules.yaml");
  ASSERT_FALSE(rules.ok());
  EXPECT_THAT(rules.status().message(), HasSubstr("rules.yaml:"));
  EXPECT_THAT(rules.status().message(), HasSubstr("alias"));
}

}  // namespace
}  // namespace gpuherd::alerts
