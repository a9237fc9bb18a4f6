// What the store's tests share: a fresh folder of their own with the path of
// a database in it (not yet made), and opening that database.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "store/store.h"

namespace gpuherd::store {

class StoreFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("gpuherd_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name()) +
            "_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "state.db").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The database at path_ (made and migrated unless read-only); null, with
  // a failed expectation, when it cannot be opened.
  std::unique_ptr<Store> Open(const StoreOptions& options = {}) {
    auto store = Store::Open(path_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  std::filesystem::path dir_;
  std::string path_;
};

}  // namespace gpuherd::store
