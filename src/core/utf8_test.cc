#include "core/utf8.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuherd {
namespace {

TEST(Utf8Test, AcceptsWellFormedText) {
  EXPECT_TRUE(IsUtf8(""));
  EXPECT_TRUE(IsUtf8("plain ascii\n"));
  EXPECT_TRUE(IsUtf8("lr \xC3\x97 seed"));             // U+00D7
  EXPECT_TRUE(IsUtf8("\xE2\x82\xAC"));                 // U+20AC
  EXPECT_TRUE(IsUtf8("\xED\x9F\xBF"));                 // U+D7FF, below the surrogates
  EXPECT_TRUE(IsUtf8("\xF0\x9F\x98\x80"));             // U+1F600
  EXPECT_TRUE(IsUtf8("\xF4\x8F\xBF\xBF"));             // U+10FFFF
  EXPECT_TRUE(IsUtf8(std::string("a\0b", 3)));         // NUL is valid UTF-8
}

TEST(Utf8Test, RefusesWhatJsonCannotWriteAndSaysWhere) {
  EXPECT_EQ(FirstInvalidUtf8("ab\xFF"), 2u);             // never a UTF-8 byte
  EXPECT_EQ(FirstInvalidUtf8("a\xC3"), 1u);              // cut off
  EXPECT_EQ(FirstInvalidUtf8("\xC0\xAF"), 0u);           // overlong '/'
  EXPECT_EQ(FirstInvalidUtf8("\xE0\x80\xAF"), 0u);       // overlong
  EXPECT_EQ(FirstInvalidUtf8("\xF0\x80\x80\xAF"), 0u);   // overlong
  EXPECT_EQ(FirstInvalidUtf8("x\xED\xA0\x80"), 1u);      // U+D800, a surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xF4\x90\x80\x80"), 0u);   // above U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("\xE2\x28\xA1"), 0u);       // bad continuation
  EXPECT_EQ(FirstInvalidUtf8("\x80"), 0u);               // lone continuation
}

// The point of the check: what passes, nlohmann::json writes; what fails, it
// would throw on.
TEST(Utf8Test, AgreesWithJsonDump) {
  const std::string samples[] = {"ok", "\xC3\x97", "\xFF", "\xED\xA0\x80", "\xC0\xAF",
                                 "\xF4\x90\x80\x80", "a\xC3", "\xF0\x9F\x98\x80", "\xE0\xA0\x80"};
  for (const std::string& s : samples) {
    bool dumped = true;
    try {
      (void)nlohmann::json(s).dump();
    } catch (const nlohmann::json::exception&) {
      dumped = false;
    }
    EXPECT_EQ(IsUtf8(s), dumped) << nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

}  // namespace
}  // namespace gpuherd
