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
