#include "pipeline/metric_line.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

using ::testing::HasSubstr;

TEST(ParseMetricLineTest, ParsesAPlainLine) {
  auto line = ParseMetricLine(R"({"step": 120, "loss": 0.41, "tag": "warmup"})");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ((*line)["step"], 120);
  EXPECT_DOUBLE_EQ((*line)["loss"].get<double>(), 0.41);
  EXPECT_EQ((*line)["tag"], "warmup");
}

// What Python's json.dumps writes for float('nan') and float('inf').
TEST(ParseMetricLineTest, AcceptsPythonsNonFiniteTokens) {
  auto line = ParseMetricLine(
      R"({"step": -3, "loss": NaN, "grad": [1.5, Infinity, -2e3, -Infinity], "lr": 0.1})");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ((*line)["step"], -3);
  EXPECT_TRUE(std::isnan((*line)["loss"].get<double>()));
  const auto& grad = (*line)["grad"];
  EXPECT_DOUBLE_EQ(grad[0].get<double>(), 1.5);
  EXPECT_TRUE(std::isinf(grad[1].get<double>()) && grad[1].get<double>() > 0);
  EXPECT_DOUBLE_EQ(grad[2].get<double>(), -2000);
  EXPECT_TRUE(std::isinf(grad[3].get<double>()) && grad[3].get<double>() < 0);
  EXPECT_DOUBLE_EQ((*line)["lr"].get<double>(), 0.1);
}

TEST(ParseMetricLineTest, LeavesTokensInsideStringsAlone) {
  auto line = ParseMetricLine(R"({"note": "NaN \"Infinity\" 12", "NaN": 1, "x": NaN})");
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  EXPECT_EQ((*line)["note"], "NaN \"Infinity\" 12");
  EXPECT_EQ((*line)["NaN"], 1);
  EXPECT_TRUE(std::isnan((*line)["x"].get<double>()));
}

TEST(ParseMetricLineTest, RefusesWhatIsNotAnObject) {
  EXPECT_THAT(ParseMetricLine("[1, 2]").status().message(), HasSubstr("must be a JSON object"));
  EXPECT_THAT(ParseMetricLine("{\"loss\": 0.4").status().message(),
              HasSubstr("must be one JSON object"));
  EXPECT_FALSE(ParseMetricLine("").ok());
  EXPECT_FALSE(ParseMetricLine("{\"loss\": nan}").ok());  // only Python's spelling
}

}  // namespace
}  // namespace gpuherd::pipeline

namespace gpuherd::pipeline {
namespace {

// One such line killed the daemon (and every restart) with a stack overflow.
TEST(MetricLineLimitsTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string line = "{\"a\": " + std::string(20000, '[') + std::string(20000, ']') + "}";
  auto parsed = ParseMetricLine(line);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("deeper than 16 levels"));
  const std::string top = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(ParseMetricLine(top).ok());
}

TEST(MetricLineLimitsTest, BracketsInsideStringsDoNotCount) {
  auto parsed = ParseMetricLine("{\"tag\": \"" + std::string(100, '[') + "\", \"x\": {\"y\": [1]}}");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ((*parsed)["x"]["y"][0], 1);
}

TEST(MetricLineLimitsTest, LongLineIsRefused) {
  const std::string line = "{\"tag\": \"" + std::string(70000, 'x') + "\"}";
  auto parsed = ParseMetricLine(line);
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), ::testing::HasSubstr("at most 65536 are read"));
}

TEST(MetricLineLimitsTest, ErrorsDoNotQuoteTheWholeLine) {
  auto parsed = ParseMetricLine("[" + std::string(60000, '1') + "]");
  ASSERT_FALSE(parsed.ok());
  EXPECT_LT(parsed.status().message().size(), 400u);
}

}  // namespace
}  // namespace gpuherd::pipeline
