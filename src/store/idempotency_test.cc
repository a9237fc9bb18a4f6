#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

class IdempotencyStoreTest : public StoreFileTest {
 protected:
  static IdempotencyRecord Key(uint32_t uid, const std::string& key, TimeMs created, const std::string& body) {
    return IdempotencyRecord{uid, key, "POST /v1/jobs 1234", created, 201, "application/json", body};
  }
};

TEST_F(IdempotencyStoreTest, KeysAreKeptPerUserAcrossReopen) {
  {
    auto store = Open();
    WriteBatch batch;
    batch.idempotency = {Key(1000, "k1", 500, R"({"id":7})"), Key(1001, "k1", 600, R"({"id":8})")};
    ASSERT_TRUE(store->Commit(&batch).ok());
  }
  auto store = Open();
  auto mine = store->GetIdempotency(1000, "k1");
  ASSERT_TRUE(mine.ok() && mine->has_value());
  EXPECT_EQ((*mine)->body, R"({"id":7})");
  EXPECT_EQ((*mine)->status, 201);
  EXPECT_EQ((*mine)->request, "POST /v1/jobs 1234");
  EXPECT_EQ((*mine)->created, 500);
  auto theirs = store->GetIdempotency(1001, "k1");
  ASSERT_TRUE(theirs.ok() && theirs->has_value());
  EXPECT_EQ((*theirs)->body, R"({"id":8})");
  auto none = store->GetIdempotency(1002, "k1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(IdempotencyStoreTest, ExpiryDeletesOnlyOlderKeys) {
  auto store = Open();
  WriteBatch batch;
  batch.idempotency = {Key(1, "old", 100, "a"), Key(1, "new", 900, "b")};
  ASSERT_TRUE(store->Commit(&batch).ok());
  WriteBatch expire;
  expire.idempotency_expire_before = 500;
  ASSERT_FALSE(expire.empty());
  ASSERT_TRUE(store->Commit(&expire).ok());
  EXPECT_FALSE(store->GetIdempotency(1, "old")->has_value());
  EXPECT_TRUE(store->GetIdempotency(1, "new")->has_value());
}

TEST_F(IdempotencyStoreTest, OverlongKeysAreRefusedByTheSchema) {
  auto store = Open();
  WriteBatch batch;
  batch.idempotency = {Key(1, std::string(129, 'k'), 100, "a")};
  EXPECT_FALSE(store->Commit(&batch).ok());
}

}  // namespace
}  // namespace gpuherd::store
