// What a job spec may not smuggle in: control characters, values that wrap
// around, numbers outside their range. Every refusal states the range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/job_spec.h"

namespace gpuherd::sched {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

Result<JobSpec> ParseWith(const std::string& key, Json value) {
  Json j = {{"command", {"python", "train.py"}}};
  j[key] = std::move(value);
  return ParseJobSpec(j);
}

std::string Error(const std::string& key, Json value) {
  auto spec = ParseWith(key, std::move(value));
  EXPECT_FALSE(spec.ok()) << key << " was accepted";
  return spec.ok() ? "" : spec.status().message();
}

TEST(JobSpecLimitsTest, HugePriorityIsRefusedNotWrapped) {
  // Was stored as -1.
  EXPECT_THAT(Error("priority", Json::parse("18446744073709551615")),
              HasSubstr("must be from -100 to 100, got 18446744073709551615"));
  EXPECT_THAT(Error("priority", Json::parse("9223372036854775808")), HasSubstr("-100 to 100"));
  EXPECT_THAT(Error("max_restarts", Json::parse("18446744073709551615")), HasSubstr("0 to 1000"));
  EXPECT_THAT(Error("cpus", Json::parse("18446744073709551615")), HasSubstr("0 to 4096"));
  EXPECT_THAT(Error("depends_on", Json::parse("[18446744073709551615]")), HasSubstr("from 1 to"));
}

TEST(JobSpecLimitsTest, TinyGpuCountIsNotZero) {
  // Was taken as 0 GPUs.
  EXPECT_THAT(Error("gpus", 1e-308), HasSubstr("not a multiple of 0.05"));
  EXPECT_THAT(Error("gpus", "1e-308"), HasSubstr("up to 4096"));
  EXPECT_THAT(Error("gpus", 1e300), HasSubstr("up to 4096"));
  EXPECT_TRUE(ParseWith("gpus", 0).ok());
}

TEST(JobSpecLimitsTest, DurationsAndSizesStateTheirRange) {
  EXPECT_THAT(Error("time_limit", "106751991167d"), HasSubstr("from 0 to 366d"));
  EXPECT_THAT(Error("time_limit", 1e12), HasSubstr("from 0 to 31622400"));
  EXPECT_THAT(Error("checkpoint", Json{{"grace", "106751991167d"}}), HasSubstr("from 0 to 366d"));
  EXPECT_TRUE(ParseWith("time_limit", "30d").ok());
  EXPECT_THAT(Error("mem", "9000TiB"), HasSubstr("at most 1 PiB"));
  EXPECT_THAT(Error("mem", 1e15), HasSubstr("from 0 to"));
}

TEST(JobSpecLimitsTest, ControlCharactersInNamesAreRefused) {
  for (const std::string& bad : {std::string("a\0b", 3), std::string("x\x1b[2J"), std::string("a\rb"),
                                std::string("a\nb"), std::string("a\x7f")}) {
    EXPECT_THAT(Error("name", bad), HasSubstr("control character")) << Json(bad).dump();
    EXPECT_THAT(Error("labels", Json{{"team", bad}}), HasSubstr("control character"));
    EXPECT_THAT(Error("labels", Json{{bad, "x"}}), HasSubstr("control character"));
    EXPECT_THAT(Error("env", Json{{bad, "x"}}), HasSubstr("control character"));
  }
  EXPECT_TRUE(ParseWith("name", "résumé-λ run 1").ok());  // UTF-8 is text
}

TEST(JobSpecLimitsTest, EnvKeyWithEqualsAndNulInTheCommandAreRefusedAtSubmit) {
  EXPECT_THAT(Error("env", Json{{"A=B", "x"}}), HasSubstr("without '='"));
  EXPECT_THAT(Error("env", Json{{"A", std::string("x\0y", 3)}}), HasSubstr("NUL"));
  EXPECT_THAT(Error("command", Json::array({"echo", std::string("a\0b", 3)})), HasSubstr("NUL"));
  // Other control characters are a program's own business in its arguments.
  EXPECT_TRUE(ParseWith("command", Json::array({"printf", "a\tb\n"})).ok());
}

TEST(JobSpecLimitsTest, SpecsBuiltFromFlagsAreCheckedToo) {
  JobSpec spec;
  spec.argv = {"true"};
  spec.name = "evil\x1b]0;title\x07";
  EXPECT_FALSE(ValidateJobSpec(spec).ok());
  spec.name = "ok";
  spec.env["A=B"] = "1";
  EXPECT_FALSE(ValidateJobSpec(spec).ok());
}

TEST(JobSpecLimitsTest, MessagesQuoteOnlyAShortValue) {
  const std::string message = Error("cwd", Json::array({std::string(100000, 'x')}));
  EXPECT_LT(message.size(), 300u);
}

}  // namespace
}  // namespace gpuherd::sched
