#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_fixture.h"

namespace gpuherd::store {
namespace {

constexpr TimeMs kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

class AlertStoreTest : public StoreFileTest {
 protected:
  static AlertRecord Alert(const std::string& rule, const std::string& subject, TimeMs since,
                           const std::string& state) {
    AlertRecord a;
    a.rule = rule;
    a.subject = subject;
    a.gpu_index = subject == "mlx5_0/1" ? -1 : 3;
    a.state = state;
    a.pending_since = since;
    a.value = 12.5;
    a.severity = Severity::kCritical;
    a.action = "drain";
    a.summary = "too hot";
    return a;
  }

  static void Commit(Store& store, std::vector<AlertRecord> alerts) {
    WriteBatch batch;
    batch.alerts = std::move(alerts);
    Status s = store.Commit(&batch);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
};

TEST_F(AlertStoreTest, TransitionsUpsertOneRowPerEpisode) {
  auto store = Open();
  ASSERT_TRUE(store);
  EXPECT_GE(store->schema_version(), 4);
  AlertRecord a = Alert("gpu_temp_over_limit", "GPU-a", kT0, "pending");
  Commit(*store, {a});
  a.state = "firing";
  a.fired_at = kT0 + 15000;
  a.value = 3;
  Commit(*store, {a});

  auto active = store->ListActiveAlerts();
  ASSERT_TRUE(active.ok()) << active.status().ToString();
  ASSERT_EQ(active->size(), 1u);
  const AlertRecord& got = (*active)[0];
  EXPECT_EQ(got.rule, "gpu_temp_over_limit");
  EXPECT_EQ(got.subject, "GPU-a");
  EXPECT_EQ(got.gpu_index, 3);
  EXPECT_EQ(got.state, "firing");
  EXPECT_EQ(got.pending_since, kT0);
  EXPECT_EQ(got.fired_at, kT0 + 15000);
  EXPECT_DOUBLE_EQ(got.value, 3);
  EXPECT_EQ(got.severity, Severity::kCritical);
  EXPECT_EQ(got.action, "drain");
  EXPECT_EQ(got.summary, "too hot");

  a.state = "resolved";
  a.resolved_at = kT0 + 60000;
  Commit(*store, {a});
  EXPECT_TRUE(store->ListActiveAlerts()->empty());
  auto resolved = store->ListResolvedAlerts(kT0, 10);
  ASSERT_TRUE(resolved.ok());
  ASSERT_EQ(resolved->size(), 1u);
  EXPECT_EQ((*resolved)[0].resolved_at, kT0 + 60000);

  // The next episode of the same rule on the same GPU is a row of its own.
  Commit(*store, {Alert("gpu_temp_over_limit", "GPU-a", kT0 + 120000, "firing")});
  EXPECT_EQ(store->ListActiveAlerts()->size(), 1u);
  EXPECT_EQ(store->ListResolvedAlerts(kT0, 10)->size(), 1u);
}

TEST_F(AlertStoreTest, PendingThatNeverFiredLeavesNoRow) {
  auto store = Open();
  ASSERT_TRUE(store);
  AlertRecord a = Alert("gpu_memory_high", "GPU-b", kT0, "pending");
  Commit(*store, {a, Alert("ib_packet_loss", "mlx5_0/1", kT0, "firing")});
  a.state = "inactive";
  Commit(*store, {a});
  auto active = store->ListActiveAlerts();
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].rule, "ib_packet_loss");
  EXPECT_EQ((*active)[0].gpu_index, -1);
  EXPECT_TRUE(store->ListResolvedAlerts(0, 10)->empty());
}

TEST_F(AlertStoreTest, ResolvedAreNewestFirstWithinTheWindowAndPruned) {
  auto store = Open();
  ASSERT_TRUE(store);
  std::vector<AlertRecord> alerts;
  for (int i = 0; i < 5; ++i) {
    AlertRecord a = Alert("gpu_xid", "GPU-" + std::to_string(i), kT0 + i * 1000, "resolved");
    a.resolved_at = kT0 + 100000 + i * 1000;
    alerts.push_back(a);
  }
  Commit(*store, alerts);
  auto recent = store->ListResolvedAlerts(kT0 + 102000, 2);
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 2u);
  EXPECT_EQ((*recent)[0].subject, "GPU-4");
  EXPECT_EQ((*recent)[1].subject, "GPU-3");
  EXPECT_FALSE(store->ListResolvedAlerts(0, 0).ok());

  ASSERT_TRUE(store->PruneResolvedAlerts(kT0 + 103000).ok());
  auto left = store->ListResolvedAlerts(0, 100);
  ASSERT_TRUE(left.ok());
  ASSERT_EQ(left->size(), 2u);
  EXPECT_EQ((*left)[1].subject, "GPU-3");
}

TEST_F(AlertStoreTest, BadAlertRefusesTheWholeBatch) {
  auto store = Open();
  ASSERT_TRUE(store);
  WriteBatch batch;
  batch.events.push_back({0, kT0, "alert.firing", Severity::kWarning, "", "x", "{}"});
  batch.alerts = {Alert("gpu_xid", "GPU-a", kT0, "burning")};
  Status s = store->Commit(&batch);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("burning"), std::string::npos);
  EventFilter all;
  EXPECT_TRUE(store->ListEvents(all)->empty());

  auto read_only = Open({.read_only = true});
  ASSERT_TRUE(read_only);
  EXPECT_FALSE(read_only->PruneResolvedAlerts(kT0).ok());
}

}  // namespace
}  // namespace gpuherd::store
