#include "core/private_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

namespace fs = std::filesystem;

class PrivateDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-private-dirs-XXXXXX";  // 0700, the test's user
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/run");
    ::chmod((root_ + "/run").c_str(), 0700);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
};

TEST_F(PrivateDirsTest, APrivateFolderBelowTheStickyTmpOpens) {
  auto dir = OpenPrivateDir(root_ + "/run");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  EXPECT_GE(dir->get(), 0);
}

TEST_F(PrivateDirsTest, AFolderOthersMayWriteIsRefusedWhereverItIsOnTheWay) {
  ::chmod((root_ + "/run").c_str(), 0777);
  auto dir = OpenPrivateDir(root_ + "/run");
  ASSERT_EQ(dir.status().code(), Code::kPermissionDenied);
  EXPECT_NE(dir.status().message().find("mode 0777"), std::string::npos) << dir.status().message();
  fs::create_directories(root_ + "/run/jobs");
  ::chmod((root_ + "/run/jobs").c_str(), 0700);
  // The folder itself is fine, one above it is not.
  EXPECT_EQ(OpenPrivateDir(root_ + "/run/jobs").status().code(), Code::kPermissionDenied);
  // Sticky is enough on the way (root's /tmp), never for the folder itself.
  ::chmod((root_ + "/run").c_str(), 01777);
  if (::geteuid() == 0) {
    EXPECT_TRUE(OpenPrivateDir(root_ + "/run/jobs").ok());
  }
  EXPECT_EQ(OpenPrivateDir(root_ + "/run").status().code(), Code::kPermissionDenied);
}

TEST_F(PrivateDirsTest, ALinkOnTheWayIsNotFollowed) {
  fs::create_directory_symlink(root_ + "/run", root_ + "/link");
  EXPECT_EQ(OpenPrivateDir(root_ + "/link").status().code(), Code::kPermissionDenied);
  EXPECT_EQ(OpenPrivateDir(root_ + "/missing").status().code(), Code::kNotFound);
  EXPECT_EQ(OpenPrivateDir(root_ + "/run/../run").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(OpenPrivateDir("relative").status().code(), Code::kInvalidArgument);
}

TEST_F(PrivateDirsTest, MakesEachFolderPrivateAndTakesAnExistingOneOfItsOwn) {
  auto base = OpenPrivateDir(root_ + "/run");
  ASSERT_TRUE(base.ok());
  auto made = MakePrivateDirs(base->get(), root_ + "/run", "jobs/7/1");
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  struct stat st {};
  ASSERT_EQ(::stat((root_ + "/run/jobs/7/1").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0u);  // nobody else may even look
  EXPECT_EQ(st.st_uid, ::geteuid());
  // Again (a launch retried after its launcher died): the same folders.
  EXPECT_TRUE(MakePrivateDirs(base->get(), root_ + "/run", "jobs/7/1").ok());
}

TEST_F(PrivateDirsTest, APlantedLinkFileOrSharedFolderIsRefusedNotFollowed) {
  auto base = OpenPrivateDir(root_ + "/run");
  ASSERT_TRUE(base.ok());
  fs::create_directories(root_ + "/elsewhere");
  fs::create_directory_symlink(root_ + "/elsewhere", root_ + "/run/linked");
  auto linked = MakePrivateDirs(base->get(), root_ + "/run", "linked/1");
  EXPECT_EQ(linked.status().code(), Code::kPermissionDenied);
  EXPECT_FALSE(fs::exists(root_ + "/elsewhere/1"));
  { std::FILE* f = std::fopen((root_ + "/run/file").c_str(), "w"); std::fclose(f); }
  EXPECT_EQ(MakePrivateDirs(base->get(), root_ + "/run", "file/1").status().code(), Code::kPermissionDenied);
  fs::create_directories(root_ + "/run/open");
  ::chmod((root_ + "/run/open").c_str(), 0777);
  EXPECT_EQ(MakePrivateDirs(base->get(), root_ + "/run", "open/1").status().code(), Code::kPermissionDenied);
  EXPECT_FALSE(fs::exists(root_ + "/run/open/1"));
  if (::geteuid() == 0) {
    fs::create_directories(root_ + "/run/theirs");
    ASSERT_EQ(::chown((root_ + "/run/theirs").c_str(), 65534, 65534), 0);
    auto theirs = MakePrivateDirs(base->get(), root_ + "/run", "theirs/1");
    EXPECT_EQ(theirs.status().code(), Code::kPermissionDenied);
    EXPECT_NE(theirs.status().message().find("uid 65534"), std::string::npos);
  }
  EXPECT_EQ(MakePrivateDirs(base->get(), root_ + "/run", "a/../b").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace gpuherd
