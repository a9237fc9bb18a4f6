#include "host/cpulist.h"

#include <gtest/gtest.h>

namespace gpuherd::host {
namespace {

TEST(CpuListTest, ParsesAndFormats) {
  auto cpus = ParseCpuList("0-3,8,10-11\n");
  ASSERT_TRUE(cpus.ok()) << cpus.status().ToString();
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(FormatCpuList(*cpus), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({5, 4, 4, 0}), "0,4-5");
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_TRUE(ParseCpuList("")->empty());
}

TEST(CpuListTest, RejectsMalformedLists) {
  for (const char* bad : {"3-1", "a", "1,,2", "-4", "0-", "0-2000000000", "99999999999"}) {
    auto cpus = ParseCpuList(bad);
    ASSERT_FALSE(cpus.ok()) << bad;
    EXPECT_NE(cpus.status().message().find("0-31,64-95"), std::string::npos) << "says what a list looks like";
  }
}

}  // namespace
}  // namespace gpuherd::host
