#include "core/owned_dirs.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

namespace fs = std::filesystem;

class OwnedDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-owned-dirs-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ + "/base");
    fs::create_directories(root_ + "/victim");
  }
  void TearDown() override { fs::remove_all(root_); }

  static struct stat Stat(const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
    return st;
  }

  std::string root_;
};

TEST_F(OwnedDirsTest, MakesEveryFolderBelowTheBaseForItsOwner) {
  const std::string base = root_ + "/base";
  ASSERT_TRUE(MakeDirsBeneath(base, base + "/run/step//0/", DirOwner{65534, 65534}).ok());
  ASSERT_TRUE(fs::is_directory(base + "/run/step/0"));
  if (::geteuid() == 0) {
    for (const char* d : {"/run", "/run/step", "/run/step/0"}) {
      EXPECT_EQ(Stat(base + d).st_uid, 65534u) << d;
      EXPECT_EQ(Stat(base + d).st_gid, 65534u) << d;
    }
    EXPECT_EQ(Stat(base).st_uid, 0u);  // the base is never given away
  }
  // Again: nothing to do, no error.
  EXPECT_TRUE(MakeDirsBeneath(base, base + "/run/step/0", DirOwner{65534, 65534}).ok());
}

// The owner of a run folder plants a link where the daemon is about to make
// a node's folder: nothing is made or given away where it points.
TEST_F(OwnedDirsTest, PlantedSymlinkIsRefusedNotFollowed) {
  const std::string base = root_ + "/base";
  fs::create_directories(base + "/run");
  fs::create_directory_symlink(root_ + "/victim", base + "/run/step");
  Status made = MakeDirsBeneath(base, base + "/run/step/0", DirOwner{65534, 65534});
  EXPECT_EQ(made.code(), Code::kFailedPrecondition) << made.ToString();
  EXPECT_NE(made.message().find("symbolic link"), std::string::npos) << made.message();
  EXPECT_TRUE(fs::is_empty(root_ + "/victim"));
  EXPECT_EQ(Stat(root_ + "/victim").st_uid, ::geteuid());
  // A link as the last component, and a file where a folder should be.
  fs::create_symlink(root_ + "/victim", base + "/run/last");
  EXPECT_EQ(MakeDirsBeneath(base, base + "/run/last", DirOwner{65534, 65534}).code(), Code::kFailedPrecondition);
  EXPECT_EQ(Stat(root_ + "/victim").st_uid, ::geteuid());
}

TEST_F(OwnedDirsTest, PathsOutsideTheBaseAndDotDotAreRefused) {
  const std::string base = root_ + "/base";
  EXPECT_EQ(MakeDirsBeneath(base, root_ + "/victim/x", std::nullopt).code(), Code::kInvalidArgument);
  EXPECT_EQ(MakeDirsBeneath(base, base + "x/y", std::nullopt).code(), Code::kInvalidArgument);
  EXPECT_EQ(MakeDirsBeneath(base, base + "/a/../../victim/x", std::nullopt).code(), Code::kInvalidArgument);
  EXPECT_FALSE(fs::exists(root_ + "/victim/x"));
  StateDir home{root_ + "/base"};
  EXPECT_EQ(MakeHomeDirs(home, root_ + "/victim/y", std::nullopt).code(), Code::kInvalidArgument);
  fs::create_directories(home.jobs_dir());
  EXPECT_TRUE(MakeHomeDirs(home, home.jobs_dir() + "/7", std::nullopt).ok());
  EXPECT_TRUE(fs::is_directory(home.jobs_dir() + "/7"));
}

TEST_F(OwnedDirsTest, FolderOfAThirdUserIsNotTakenOver) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a folder of another user";
  const std::string base = root_ + "/base";
  fs::create_directories(base + "/theirs");
  ASSERT_EQ(::chown((base + "/theirs").c_str(), 4242, 4242), 0);
  EXPECT_EQ(MakeDirsBeneath(base, base + "/theirs/x", DirOwner{65534, 65534}).code(), Code::kPermissionDenied);
  EXPECT_EQ(Stat(base + "/theirs").st_uid, 4242u);
}

}  // namespace
}  // namespace gpuherd
