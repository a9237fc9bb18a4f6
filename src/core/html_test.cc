#include "core/html.h"

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

TEST(HtmlEscapeTest, MarkupAndBothQuotesBecomeEntities) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\" title='y'>&</a>"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
}

TEST(HtmlEscapeTest, ControlCharactersBecomeTheReplacementCharacterButNewlineAndTabStay) {
  EXPECT_EQ(HtmlEscape(std::string("a\x1b[31mb\x00" "c\x7f" "d\n\te", 14)), "a&#xfffd;[31mb&#xfffd;c&#xfffd;d\n\te");
}

TEST(HtmlEscapeTest, C1ControlsBecomeTheReplacementCharacter) {
  EXPECT_EQ(HtmlEscape("a\xc2\x9b" "31mb\xc2\x85" "c\xc2\xa0"), "a&#xfffd;31mb&#xfffd;c\xc2\xa0");
}

TEST(HtmlEscapeTest, Utf8PassesThrough) { EXPECT_EQ(HtmlEscape("GPU — 温度"), "GPU — 温度"); }

}  // namespace
}  // namespace gpuherd
