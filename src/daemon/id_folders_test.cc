#include "daemon/id_folders.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;

class IdFoldersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = fs::temp_directory_path() / ("gpuherd_id_folders_test_" + std::to_string(getpid()));
    fs::remove_all(home_);
    dir_ = StateDir{home_.string()};
    ASSERT_TRUE(EnsureStateDir(dir_).ok());
  }
  void TearDown() override { fs::remove_all(home_); }

  std::unique_ptr<store::Store> OpenStore() {
    auto s = store::Store::Open(dir_.db_path());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }

  fs::path home_;
  StateDir dir_;
};

TEST_F(IdFoldersTest, CountsOnlyPositiveDecimalNames) {
  for (const char* name : {"3", "12", "017", "abc", "12x", "0", "-4", "99999999999999999999"}) {
    fs::create_directories(fs::path(dir_.jobs_dir()) / name);
  }
  fs::create_directories(fs::path(dir_.checkpoint_dir()) / "20");
  fs::create_directories(home_ / "pipelines" / "5");
  fs::create_directories(home_ / "pipelines" / "2");
  IdFolders found = ScanIdFolders(dir_);
  EXPECT_EQ(found.job_folders, 3);  // jobs/3, jobs/12, checkpoints/20
  EXPECT_EQ(found.max_job_id, 20);
  EXPECT_EQ(found.pipeline_folders, 2);
  EXPECT_EQ(found.max_pipeline_id, 5);
}

TEST_F(IdFoldersTest, AnEmptyHomeNeedsNothing) {
  auto store = OpenStore();
  ASSERT_TRUE(KeepIdsAboveFolders(dir_, store.get(), false).ok());
  EXPECT_EQ(*store->LastJobId(), 0);
}

TEST_F(IdFoldersTest, AnEmptyDatabaseBesideOldFoldersIsRefused) {
  fs::create_directories(fs::path(dir_.jobs_dir()) / "7" / "1");
  auto store = OpenStore();
  Status s = KeepIdsAboveFolders(dir_, store.get(), /*adopt_empty_state=*/false);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("--adopt-empty-state"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("up to id 7"), std::string::npos) << s.message();
  EXPECT_EQ(*store->LastJobId(), 0);  // nothing reserved on refusal
}

TEST_F(IdFoldersTest, AdoptingContinuesAboveEveryFolder) {
  fs::create_directories(fs::path(dir_.jobs_dir()) / "7" / "1");
  fs::create_directories(fs::path(dir_.checkpoint_dir()) / "9");
  fs::create_directories(home_ / "pipelines" / "4");
  auto store = OpenStore();
  ASSERT_TRUE(KeepIdsAboveFolders(dir_, store.get(), /*adopt_empty_state=*/true).ok());
  EXPECT_EQ(*store->LastJobId(), 9);
  EXPECT_EQ(*store->LastPipelineRunId(), 4);
  // Once ids were assigned the database is no longer empty: a later start
  // needs no flag.
  EXPECT_TRUE(KeepIdsAboveFolders(dir_, store.get(), false).ok());
}

TEST_F(IdFoldersTest, AnOlderDatabaseBehindItsFoldersIsRaisedWithoutTheFlag) {
  auto store = OpenStore();
  ASSERT_TRUE(store->ReserveIdsThrough(3, 0).ok());  // a restored copy from earlier
  fs::create_directories(fs::path(dir_.jobs_dir()) / "8");
  ASSERT_TRUE(KeepIdsAboveFolders(dir_, store.get(), false).ok());
  EXPECT_EQ(*store->LastJobId(), 8);
}

}  // namespace
}  // namespace gpuherd::daemon
