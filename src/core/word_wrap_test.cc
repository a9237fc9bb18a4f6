#include "core/word_wrap.h"

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

using Lines = std::vector<std::string>;

TEST(WordWrapTest, FillsEachLineUpToTheWidth) {
  EXPECT_EQ(WrapWords("one two three four", 9), (Lines{"one two", "three", "four"}));
  // Exactly the width still fits; one more character does not.
  EXPECT_EQ(WrapWords("abcd efgh", 9), (Lines{"abcd efgh"}));
  EXPECT_EQ(WrapWords("abcd efghi", 9), (Lines{"abcd", "efghi"}));
}

TEST(WordWrapTest, ALongWordStandsAlone) {
  EXPECT_EQ(WrapWords("a supercalifragilistic b", 5), (Lines{"a", "supercalifragilistic", "b"}));
}

TEST(WordWrapTest, EmptyTextIsOneEmptyLine) {
  EXPECT_EQ(WrapWords("", 10), (Lines{""}));
  EXPECT_EQ(WrapWords("word", 10), (Lines{"word"}));
}

}  // namespace
}  // namespace gpuherd
