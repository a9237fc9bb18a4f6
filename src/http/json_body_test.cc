#include "http/json_body.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::http {
namespace {

using ::testing::HasSubstr;

TEST(JsonBodyTest, ParsesOrdinaryJson) {
  auto value = ParseJson(R"({"command": ["echo", "a [ b"], "n": {"x": [1, 2]}})");
  ASSERT_TRUE(value.ok()) << value.status().message();
  EXPECT_EQ((*value)["command"][1], "a [ b");
  EXPECT_EQ(JsonDepth(R"({"a": "[[[[", "b": [[1]]})", 100), 3);
  EXPECT_EQ(JsonDepth(R"(["\"[[[["])", 100), 1);
}

// 200,000 nested arrays: refused before any recursive use of the value, with
// a short message that does not quote the input.
TEST(JsonBodyTest, RefusesDeepNestingWithAShortMessage) {
  std::string text = R"({"command": )" + std::string(200000, '[') + std::string(200000, ']') + "}";
  auto value = ParseJson(text, JsonLimits{.max_bytes = 1 << 20, .max_depth = 64});
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("more than 64 deep"));
  EXPECT_LT(value.status().message().size(), 200u);
}

TEST(JsonBodyTest, RefusesOversizeAndQuotesLittleOfBadInput) {
  EXPECT_THAT(ParseJson(std::string(100, ' '), JsonLimits{.max_bytes = 10}).status().message(),
              HasSubstr("more than the limit of 10"));
  std::string bad = R"({"a": ")" + std::string(100000, 'x') + "\x01";
  auto value = ParseJson(bad);
  ASSERT_FALSE(value.ok());
  EXPECT_THAT(value.status().message(), HasSubstr("invalid JSON at byte"));
  EXPECT_LT(value.status().message().size(), 200u);
}

TEST(JsonBodyTest, ExcerptEscapesAndCuts) {
  EXPECT_EQ(Excerpt("a\x1b[31mb", 80), "a\\x1b[31mb");
  EXPECT_EQ(Excerpt(std::string(10, 'y'), 4), "yyyy...");
  EXPECT_EQ(DumpCapped(nlohmann::json(std::string(10, 'z')), 5), "\"zzzz...");
}

}  // namespace
}  // namespace gpuherd::http
