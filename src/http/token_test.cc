#include "http/token.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace gpuherd::http {
namespace {

namespace fs = std::filesystem;

TEST(AuthTest, TokenIsCreatedOncePrivateAndStable) {
  StateDir dir{(fs::temp_directory_path() / ("gpuherd_auth_" + std::to_string(getpid()))).string()};
  ASSERT_TRUE(EnsureStateDir(dir).ok());
  EXPECT_EQ(ReadToken(dir).status().code(), Code::kNotFound);
  auto first = LoadOrCreateToken(dir);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->size(), 64u);
  struct stat st{};
  ASSERT_EQ(stat(dir.token_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto second = LoadOrCreateToken(dir);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(*ReadToken(dir), *first);
  fs::remove_all(dir.root);
}

TEST(AuthTest, OnlyTheExactBearerTokenIsAccepted) {
  const std::string token(64, 'a');
  EXPECT_TRUE(HasValidToken({{"authorization", "Bearer " + token}}, token));
  EXPECT_FALSE(HasValidToken({}, token));
  EXPECT_FALSE(HasValidToken({{"authorization", token}}, token));
  EXPECT_FALSE(HasValidToken({{"authorization", "Bearer " + std::string(64, 'b')}}, token));
  EXPECT_FALSE(HasValidToken({{"authorization", "Bearer " + token + "a"}}, token));
  EXPECT_FALSE(HasValidToken({{"authorization", "Bearer "}}, ""));
}

}  // namespace
}  // namespace gpuherd::http
