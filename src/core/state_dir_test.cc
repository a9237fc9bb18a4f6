#include "core/state_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace gpuherd {
namespace {

namespace fs = std::filesystem;

TEST(StateDirTest, FlagWinsOverEnvironment) {
  setenv("GPUHERD_HOME", "/env/home", 1);
  EXPECT_EQ(ResolveStateDir("/flag/home").root, "/flag/home");
  EXPECT_EQ(ResolveStateDir("").root, "/env/home");
  unsetenv("GPUHERD_HOME");
  EXPECT_NE(ResolveStateDir("").root, "");
}

TEST(StateDirTest, CreatesPrivateDirectoryAndAtomicFiles) {
  fs::path root = fs::temp_directory_path() / ("gpuherd_sd_" + std::to_string(getpid()));
  StateDir dir{root.string()};
  ASSERT_TRUE(EnsureStateDir(dir).ok());
  EXPECT_TRUE(fs::is_directory(dir.log_dir()));
  EXPECT_TRUE(fs::is_directory(dir.checkpoint_dir()));
  struct stat st{};
  ASSERT_EQ(stat(root.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0711u);  // traversable, not listable
  ASSERT_EQ(stat(dir.log_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  ASSERT_TRUE(WriteFileAtomically(dir.token_path(), "secret\n", 0600).ok());
  ASSERT_EQ(stat(dir.token_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  std::stringstream text;
  text << std::ifstream(dir.token_path()).rdbuf();
  EXPECT_EQ(text.str(), "secret\n");
  for (const auto& entry : fs::directory_iterator(root)) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
  }
  fs::remove_all(root);
}

TEST(StateDirTest, UnwritableLocationSaysWhatToDo) {
  Status s = EnsureStateDir(StateDir{"/proc/gpuherd-cannot-exist"});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("--home"), std::string::npos);
}

TEST(StateDirTest, FileUnderMissingDirectoryIsAnError) {
  Status s = WriteFileAtomically("/nonexistent-dir-gpuherd/x", "y", 0600);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kIoError);
}

}  // namespace
}  // namespace gpuherd
