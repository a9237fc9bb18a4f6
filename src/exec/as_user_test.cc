#include "exec/as_user.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace gpuherd::exec {
namespace {

namespace fs = std::filesystem;

class AsUserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuherd-as-user-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    chmod(root_.c_str(), 0755);
    fs::create_directories(root_ + "/run");
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string root_;
};

TEST_F(AsUserTest, MakesEachFolderParentsFirst) {
  const UserSwitch self = UserFor(std::nullopt, std::nullopt);
  ASSERT_TRUE(MakeDirsAsUser(root_ + "/run", {"train", "train/0", ".checkpoints/train/0"}, self).ok());
  EXPECT_TRUE(fs::is_directory(root_ + "/run/train/0"));
  EXPECT_TRUE(fs::is_directory(root_ + "/run/.checkpoints/train/0"));
  EXPECT_TRUE(MakeDirsAsUser(root_ + "/run", {"train/0"}, self).ok());  // again: taken as it is
  EXPECT_EQ(MakeDirsAsUser(root_ + "/run", {"a/../b"}, self).code(), Code::kInvalidArgument);
}

TEST_F(AsUserTest, ALinkOnTheWayIsNotFollowed) {
  fs::create_directories(root_ + "/elsewhere");
  fs::create_directory_symlink(root_ + "/elsewhere", root_ + "/run/linked");
  Status made = MakeDirsAsUser(root_ + "/run", {"linked/x"}, UserFor(std::nullopt, std::nullopt));
  EXPECT_EQ(made.code(), Code::kPermissionDenied) << made.ToString();
  EXPECT_FALSE(fs::exists(root_ + "/elsewhere/x"));
}

// Root makes the folders as the user: they are the user's, and where the
// user may not write, nothing is made (the kernel's own check).
TEST_F(AsUserTest, FoldersAreMadeAsTheUserWithTheUsersPermissions) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  ASSERT_EQ(chown((root_ + "/run").c_str(), 65534, 65534), 0);
  const UserSwitch nobody = UserFor(65534u, 65534u);
  ASSERT_TRUE(nobody.error.empty()) << nobody.error;
  ASSERT_TRUE(MakeDirsAsUser(root_ + "/run", {"step/0"}, nobody).ok());
  struct stat st {};
  ASSERT_EQ(stat((root_ + "/run/step/0").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
  // A folder of root's inside (planted by no one the user could be): refused.
  fs::create_directories(root_ + "/run/roots");
  chmod((root_ + "/run/roots").c_str(), 0755);
  Status made = MakeDirsAsUser(root_ + "/run", {"roots/x"}, nobody);
  EXPECT_FALSE(made.ok());
  EXPECT_NE(made.message().find("Permission denied"), std::string::npos) << made.message();
  EXPECT_FALSE(fs::exists(root_ + "/run/roots/x"));
}

}  // namespace
}  // namespace gpuherd::exec
