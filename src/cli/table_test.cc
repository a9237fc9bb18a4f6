#include "cli/table.h"

#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

TEST(TableTest, AlignsColumnsIgnoringColourCodes) {
  Table t({"IDX", "MODEL", "TEMP"});
  t.AddRow({"0", Colored("H100", kRed, true), "67°C"});
  t.AddRow({"10", "RTX 3090", "35°C"});
  EXPECT_EQ(t.Render({0, 2}),
            "IDX  MODEL     TEMP\n"
            "  0  \x1b[31mH100\x1b[0m      67°C\n"
            " 10  RTX 3090  35°C\n");
}

TEST(TableTest, WidthCountsCodePoints) {
  EXPECT_EQ(DisplayWidth("67°C"), 4u);
  EXPECT_EQ(DisplayWidth(Colored("ab", kBold, true)), 2u);
  EXPECT_EQ(Colored("ab", kBold, false), "ab");
}

}  // namespace
}  // namespace gpuherd::cli
