#include "core/printable.h"

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

// No byte of C0 (but those allowed), DEL, ESC or a C1 control in `text`.
bool HasControl(std::string_view text, bool newline_allowed = false) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n' && newline_allowed) continue;
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return true;
  }
  return false;
}

// What a job wrote in issue 29: a cwd that hides the rest of the line, and a
// metric name that colours it and retitles the window.
const std::string kHidden = "/x\x1b[8m\x1b[30;40mHIDDEN";
const std::string kTitle = "loss\x1b[31m\x1b]0;T\x07";

TEST(PrintableTest, EscapesEveryControlCharacter) {
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\0b");
  EXPECT_EQ(Printable("x\x1b[2Jy"), "x\\e[2Jy");
  EXPECT_EQ(Printable("a\rb\nc\td"), "a\\rb\\nc\\td");
  EXPECT_EQ(Printable("\x07\x7f\x01\x1f"), "\\x07\\x7f\\x01\\x1f");
  EXPECT_EQ(Printable("\xc2\x9b" "31m"), "\\u009b31m");  // C1 CSI
  EXPECT_EQ(Printable("\xc2\x80\xc2\x9f\xc2\xa0"), "\\u0080\\u009f\xc2\xa0");  // NBSP is not C1
  EXPECT_EQ(Printable(kHidden), "/x\\e[8m\\e[30;40mHIDDEN");
  EXPECT_EQ(Printable(kTitle), "loss\\e[31m\\e]0;T\\x07");
}

TEST(PrintableTest, KeepsUtf8AndPlainText) {
  EXPECT_EQ(Printable("résumé 67°C λ 温度 🚀"), "résumé 67°C λ 温度 🚀");
  EXPECT_EQ(Printable("train[lr=0.1] \\e"), "train[lr=0.1] \\e");
  EXPECT_EQ(Printable(""), "");
}

// A lone 0x9b is CSI to a terminal in an 8-bit mode.
TEST(PrintableTest, EscapesBytesThatAreNotUtf8) {
  EXPECT_EQ(Printable("a\x9b" "31mb"), "a\\x9b31mb");
  EXPECT_EQ(Printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(Printable("\xe2\x82"), "\\xe2\\x82");              // cut off
  EXPECT_EQ(Printable("\xc0\x9b"), "\\xc0\\x9b");              // overlong
  EXPECT_EQ(Printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");     // surrogate
}

TEST(PrintableTest, LinesKeepLineFeedsOnly) {
  EXPECT_EQ(PrintableLines("one\ntwo\r\x1b[2K"), "one\ntwo\\r\\e[2K");
}

TEST(PrintableTest, NeedsEscapeTellsWhetherPrintableChangesText) {
  EXPECT_FALSE(NeedsEscape("plain ascii"));
  EXPECT_FALSE(NeedsEscape("温度"));
  EXPECT_TRUE(NeedsEscape(kHidden));
  EXPECT_TRUE(NeedsEscape("\xc2\x9b"));
  EXPECT_TRUE(NeedsEscape("\xff"));
}

TEST(MarkdownTextTest, ControlCharactersPipesAndLineBreaksCannotBreakATable) {
  EXPECT_EQ(MarkdownText(kTitle), "loss\\e[31m\\e]0;T\\x07");
  EXPECT_EQ(MarkdownText("a|b"), "a\\|b");
  EXPECT_EQ(MarkdownText("a\\|b"), "a\\\\\\|b");  // the user's backslash cannot unescape our pipe
  EXPECT_EQ(MarkdownText("row\n| x | y |"), "row\\n\\| x \\| y \\|");
  const std::string out = MarkdownText(std::string("\x1b\x07\x00\r\n\x9b\xc2\x85|", 9));
  EXPECT_FALSE(HasControl(out));
  EXPECT_EQ(out.find('\n'), std::string::npos);
}

TEST(CsvFieldTest, QuotesPerRfc4180AndNeverWritesAControlCharacter) {
  EXPECT_EQ(CsvField("plain"), "plain");
  EXPECT_EQ(CsvField(""), "");
  EXPECT_EQ(CsvField("a,b"), "\"a,b\"");
  EXPECT_EQ(CsvField("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(CsvField("two\nlines"), "two\\nlines");
  EXPECT_EQ(CsvField("a\r\n,b"), "\"a\\r\\n,b\"");
  EXPECT_EQ(CsvField(kTitle), "loss\\e[31m\\e]0;T\\x07");
  EXPECT_FALSE(HasControl(CsvField(std::string("\x1b\x07\x00\r\n\t\xc2\x9b,\"", 10))));
}

}  // namespace
}  // namespace gpuherd
