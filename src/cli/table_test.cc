#include "cli/table.h"

#include <cstdio>

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

TEST(TableTest, RowsMadeOnDemandRenderAsStoredRows) {
  // Cells that need escaping are measured escaped, as Table measures them.
  const std::vector<std::vector<std::string>> rows = {
      {"7", "a\x1b]0;x\x07" "b", "-"}, {"12", "plain", Colored("run", kGreen, true)}, {"3"}};
  Table t({"ID", "NAME", "STATE"});
  for (const auto& r : rows) t.AddRow(r);
  int calls = 0;
  std::vector<std::string> cells;
  const std::string made = RenderRows({"ID", "NAME", "STATE"}, rows.size(), [&](size_t i) -> const std::vector<std::string>& {
    ++calls;
    cells = rows[i];
    return cells;
  }, {0});
  EXPECT_EQ(made, t.Render({0}));
  EXPECT_EQ(calls, 6);  // each row twice: measured, then written
  EXPECT_NE(made.find("a\\e]0;x\\x07b"), std::string::npos) << made;
  // Written line by line, the same text.
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  WriteRows(file, {"ID", "NAME", "STATE"}, rows.size(), [&](size_t i) -> const std::vector<std::string>& {
    cells = rows[i];
    return cells;
  }, {0});
  std::rewind(file);
  std::string written(made.size() + 16, '\0');
  written.resize(std::fread(written.data(), 1, written.size(), file));
  std::fclose(file);
  EXPECT_EQ(written, made);
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

// Issue 29: a cwd of "/x ESC[8m ESC[30;40m HIDDEN" in `ps --all` hid itself;
// only the exact sequences Colored writes survive in a cell.
TEST(PrintableTest, OnlyColoredsOwnSequencesAreKeptInACell) {
  EXPECT_EQ(PrintableCell("/x\x1b[8m\x1b[30;40mHIDDEN"), "/x\\e[8m\\e[30;40mHIDDEN");
  EXPECT_EQ(PrintableCell("\x1b[31;1m\x1b[3\x1b[31"), "\\e[31;1m\\e[3\\e[31");
  EXPECT_EQ(PrintableCell(Colored("failed", kRed, true) + " \x07" + Colored("x", kBold, true)),
            "\x1b[31mfailed\x1b[0m \\x07\x1b[1mx\x1b[0m");
  EXPECT_EQ(PrintableCell("温度 \xc2\x9b"), "温度 \\u009b");
  Table t({"CWD"});
  t.AddRow({"/x\x1b[8m\x1b[30;40mHIDDEN"});
  EXPECT_EQ(t.Render(), "CWD\n/x\\e[8m\\e[30;40mHIDDEN\n");
}

}  // namespace
}  // namespace gpuherd::cli
