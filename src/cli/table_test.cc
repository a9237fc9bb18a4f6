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

namespace gpuherd::cli {
namespace {

TEST(PrintableTest, EscapesEveryControlCharacter) {
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\0b");
  EXPECT_EQ(Printable("x\x1b[2Jy"), "x\\e[2Jy");
  EXPECT_EQ(Printable("a\rb\nc\td"), "a\\rb\\nc\\td");
  EXPECT_EQ(Printable("\x07\x7f"), "\\x07\\x7f");
  EXPECT_EQ(Printable("\xc2\x9b" "31m"), "\\u009b31m");  // C1 CSI
  EXPECT_EQ(Printable("résumé 67°C λ"), "résumé 67°C λ");
}

// A NUL in a name hid every later row of `ps --all`; ESC sequences reached
// the terminal.
TEST(PrintableTest, TableCellsAreEscapedButColoursKept) {
  Table t({"ID", "NAME"});
  t.AddRow({"1", std::string("evil\0", 5)});
  t.AddRow({"2", "\x1b]0;pwned\x07\x1b[2J"});
  t.AddRow({"3", Colored("ok", kRed, true)});
  const std::string out = t.Render();
  EXPECT_EQ(out.find('\0'), std::string::npos);
  EXPECT_EQ(out.find("\x1b]"), std::string::npos);
  EXPECT_EQ(out.find("\x1b[2J"), std::string::npos);
  EXPECT_NE(out.find("\x1b[31mok\x1b[0m"), std::string::npos);
  EXPECT_NE(out.find("3  "), std::string::npos);  // the row after the NUL is there
  EXPECT_NE(out.find("evil\\0"), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::cli
