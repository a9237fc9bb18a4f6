#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

constexpr TimeMs kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

class PassportStoreTest : public StoreFileTest {};

TEST_F(PassportStoreTest, HealthTransitionsKeepTheirOrderReasonAndEvidence) {
  auto store = Open();
  std::vector<HealthTransitionRecord> rows = {
      {0, kT0, "GPU-a", "in_service", "quarantined", "XID 48", R"([{"xid":48}])", false},
      {0, kT0 + 1000, "GPU-b", "in_service", "suspect", "XID 31 from 3 jobs", "[]", true},
      {0, kT0 + 2000, "GPU-a", "quarantined", "requalifying", "burn-in", "[]", false},
  };
  ASSERT_TRUE(store->AppendHealthTransitions(&rows).ok());
  EXPECT_GT(rows[0].id, 0);
  EXPECT_GT(rows[2].id, rows[0].id);
  auto a = store->ListHealthTransitions("GPU-a");
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].to_state, "quarantined");
  EXPECT_EQ((*a)[0].evidence_json, R"([{"xid":48}])");
  EXPECT_EQ((*a)[1].to_state, "requalifying");
  auto b = store->ListHealthTransitions("GPU-b");
  ASSERT_EQ(b->size(), 1u);
  EXPECT_TRUE((*b)[0].shadow);
  // A read-only store refuses to write.
  store.reset();
  auto ro = Open({.read_only = true});
  std::vector<HealthTransitionRecord> more = {rows[0]};
  EXPECT_FALSE(ro->AppendHealthTransitions(&more).ok());
  EXPECT_EQ(ro->ListHealthTransitions("GPU-a")->size(), 2u);
}

TEST_F(PassportStoreTest, ImportsAreKeptOncePerSource) {
  auto store = Open();
  ASSERT_TRUE(store->SavePassportImport({"SN1", "hostA@1", kT0, R"({"v":1})"}).ok());
  ASSERT_TRUE(store->SavePassportImport({"SN1", "hostA@1", kT0 + 5, R"({"v":2})"}).ok());
  ASSERT_TRUE(store->SavePassportImport({"SN1", "hostB@2", kT0 + 9, R"({"v":3})"}).ok());
  ASSERT_TRUE(store->SavePassportImport({"SN2", "hostA@1", kT0, "{}"}).ok());
  auto imports = store->ListPassportImports("SN1");
  ASSERT_TRUE(imports.ok());
  ASSERT_EQ(imports->size(), 2u);
  EXPECT_EQ((*imports)[0].passport_json, R"({"v":2})");
  EXPECT_EQ((*imports)[1].source, "hostB@2");
  EXPECT_TRUE(store->ListPassportImports("SN9")->empty());
}

TEST_F(PassportStoreTest, SampledMinutesCountOnlyMinutesWithReadings) {
  auto store = Open();
  WriteBatch batch;
  GpuRecord gpu;
  gpu.uuid = "GPU-a";
  gpu.name = "NVIDIA H100";
  gpu.serial = "SN1";
  gpu.info_json = "{}";
  gpu.first_seen = gpu.last_seen = kT0;
  batch.gpus.push_back(gpu);
  for (int m = 0; m < 5; ++m) {
    RollupRecord r;
    r.uuid = "GPU-a";
    r.minute = kT0 + m * 60000;
    r.samples = m == 2 ? 0 : 12;
    r.failures = m == 2 ? 12 : 0;
    batch.rollups.push_back(r);
  }
  ASSERT_TRUE(store->Commit(&batch).ok());
  EXPECT_EQ(*store->CountSampledMinutes("GPU-a"), 4);
  EXPECT_EQ(*store->CountSampledMinutes("GPU-z"), 0);
}

}  // namespace
}  // namespace gpuherd::store
