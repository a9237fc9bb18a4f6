// How job commands take ids (JobRef).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/command.h"

namespace gpuherd::cli {
namespace {

using ::testing::HasSubstr;

std::string Check(const std::string& text) {
  std::string input = text;
  return JobRef()(input);
}

TEST(JobRefTest, TakesJobIdsAndTasksOfArrays) {
  EXPECT_EQ(Check("12"), "");
  EXPECT_EQ(Check("12_0"), "");
  EXPECT_EQ(Check("12_31"), "");
  for (const char* bad : {"0", "-1", "12_", "_3", "12_-1", "12_3_4", "x", "12.5", "0_1", ""}) {
    EXPECT_THAT(Check(bad), HasSubstr("a task of an array such as 12_3")) << bad;
  }
}

}  // namespace
}  // namespace gpuherd::cli
