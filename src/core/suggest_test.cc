#include "core/suggest.h"

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

TEST(ClosestTest, FindsTyposAndOtherFormsOfTheSameWord) {
  const std::vector<std::string> keys = {"run", "needs", "retries", "matrix", "params"};
  EXPECT_EQ(Closest("retires", keys), "retries");
  EXPECT_EQ(Closest("need", keys), "needs");
  EXPECT_EQ(Closest("parameters", keys), "params");
  EXPECT_EQ(Closest("preprocess", {"prepare", "train"}), "prepare");
}

TEST(ClosestTest, SuggestsNothingForUnrelatedWords) {
  EXPECT_EQ(Closest("gpus", {"run", "needs"}), "");
  EXPECT_EQ(Closest("x", {"y", "z"}), "y");  // one letter off is still a likely typo
  EXPECT_EQ(Closest("anything", {}), "");
}

TEST(DidYouMeanTest, WrapsTheGuess) {
  EXPECT_EQ(DidYouMean("epoch", {"epochs", "data"}), " (did you mean 'epochs'?)");
  EXPECT_EQ(DidYouMean("zzz", {"epochs", "data"}), "");
  EXPECT_EQ(JoinNames({"a", "b", "c"}), "a, b, c");
}

}  // namespace
}  // namespace gpuherd
