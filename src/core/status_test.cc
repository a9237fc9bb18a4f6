#include "core/status.h"

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("odd number " + std::to_string(x));
  return x / 2;
}

Status Chain(int x) {
  GPUHERD_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(StatusTest, ResultCarriesValueOrStatus) {
  auto ok = Half(4);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 2);
  auto bad = Half(3);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.status().ToString(), "invalid argument: odd number 3");
}

TEST(StatusTest, ReturnIfErrorPropagatesAndAnnotates) {
  EXPECT_TRUE(Chain(2).ok());
  Status s = Chain(5).Annotate("halving");
  EXPECT_EQ(s.message(), "halving: odd number 5");
  EXPECT_TRUE(Status::Ok().Annotate("x").ok());
}

}  // namespace
}  // namespace gpuherd
