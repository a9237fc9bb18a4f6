#include "pipeline/template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SplitCommandTest, SplitsOnBlanksAndKeepsQuotedText) {
  auto argv =
      SplitCommand(R"(python3  train.py --name 'two words' --note "say \"hi\" \$HOME" a\ b)");
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_THAT(*argv, ElementsAre("python3", "train.py", "--name", "two words", "--note",
                                 "say \"hi\" $HOME", "a b"));
}

TEST(SplitCommandTest, KeepsAReferenceWholeAndJoinsAdjacentText) {
  auto argv = SplitCommand("train.py --lr ${{ matrix.lr }} --out=${{ workspace }}/ckpt ''");
  ASSERT_TRUE(argv.ok()) << argv.status().ToString();
  EXPECT_THAT(*argv, ElementsAre("train.py", "--lr", "${{ matrix.lr }}",
                                 "--out=${{ workspace }}/ckpt", ""));
}

TEST(SplitCommandTest, SingleQuotesKeepBackslashesLiterally) {
  auto argv = SplitCommand(R"(sh -c 'echo \n "$1"')");
  ASSERT_TRUE(argv.ok());
  EXPECT_THAT(*argv, ElementsAre("sh", "-c", R"(echo \n "$1")"));
}

TEST(SplitCommandTest, RefusesUnclosedQuotesAndReferences) {
  EXPECT_THAT(SplitCommand("a 'b").status().message(), HasSubstr("unclosed ' quote"));
  EXPECT_THAT(SplitCommand("a \"b").status().message(), HasSubstr("unclosed \" quote"));
  EXPECT_THAT(SplitCommand("a b\\").status().message(), HasSubstr("lone backslash"));
  EXPECT_THAT(SplitCommand("a ${{ matrix.lr").status().message(),
              HasSubstr("without a closing }}"));
}

TEST(FindReferencesTest, ListsNamesWithoutBlanks) {
  auto refs = FindReferences("${{params.a}}-${{  matrix.b  }}/${{ workspace }}");
  ASSERT_TRUE(refs.ok());
  EXPECT_THAT(*refs, ElementsAre("params.a", "matrix.b", "workspace"));
  EXPECT_THAT(FindReferences("plain text").value(), ElementsAre());
}

TEST(FindReferencesTest, RefusesEmptyAndUnclosedReferences) {
  EXPECT_THAT(FindReferences("x ${{ }}").status().message(), HasSubstr("empty ${{ }}"));
  EXPECT_THAT(FindReferences("${{ point").status().message(), HasSubstr("without a closing"));
}

TEST(SubstituteTest, ReplacesEveryReference) {
  auto text = Substitute("--lr=${{ matrix.lr }} ${{matrix.lr}}x${{ point }}",
                         {{"matrix.lr", "0.1"}, {"point", "lr=0.1"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "--lr=0.1 0.1xlr=0.1");
}

TEST(SubstituteTest, NamesAnUndefinedReference) {
  auto text = Substitute("${{ params.x }}", {{"params.y", "1"}});
  EXPECT_THAT(text.status().message(), HasSubstr("${{ params.x }} is not defined"));
}

}  // namespace
}  // namespace gpuherd::pipeline
