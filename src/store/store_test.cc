#include "store/store.h"
#include "store/store_test_fixture.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include <SQLiteCpp/Database.h>
#include <SQLiteCpp/Statement.h>
#include <gtest/gtest.h>

#include "store/migrations.h"

namespace gpuherd::store {
namespace {

namespace fs = std::filesystem;

constexpr TimeMs kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

GpuRecord MakeGpu(const std::string& uuid, int index, TimeMs seen) {
  GpuRecord g;
  g.uuid = uuid;
  g.index = index;
  g.name = "NVIDIA GeForce GTX 1070 Ti";
  g.serial = "SN-" + uuid;
  g.pci_bus_id = "00000000:0" + std::to_string(index + 1) + ":00.0";
  g.memory_total_bytes = 8589934592ull;
  g.info_json = R"({"uuid":")" + uuid + R"(","cc":"6.1"})";
  g.first_seen = seen;
  g.last_seen = seen;
  return g;
}

// Every stat and counter present, each with a value of its own.
RollupRecord MakeFullRollup(const std::string& uuid, TimeMs minute) {
  RollupRecord r;
  r.uuid = uuid;
  r.minute = minute;
  r.samples = 12;
  r.failures = 1;
  for (int i = 0; i < kRollupMetricCount; ++i) {
    r.stats[i] = RollupStat{10.25 * i, 10.25 * i + 0.5, 10.25 * i + 1.125};
  }
  r.pcie_replay_count = 3;
  r.ecc_sbe = 0;  // present and zero is not absent
  r.ecc_dbe = 18446744073709551000ull;
  r.throttle_reasons_seen = (1ull << 63) | 0x44;
  r.xid_count = 2;
  return r;
}

EventRecord MakeEvent(const std::string& kind, TimeMs time, const std::string& gpu = "") {
  EventRecord e;
  e.kind = kind;
  e.time = time;
  e.gpu_uuid = gpu;
  e.severity = Severity::kWarning;
  e.message = kind + " at " + std::to_string(time);
  e.data_json = R"({"t":)" + std::to_string(time) + "}";
  return e;
}

void ExpectGpuEq(const GpuRecord& a, const GpuRecord& b) {
  EXPECT_EQ(a.uuid, b.uuid);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.serial, b.serial);
  EXPECT_EQ(a.pci_bus_id, b.pci_bus_id);
  EXPECT_EQ(a.memory_total_bytes, b.memory_total_bytes);
  EXPECT_EQ(a.info_json, b.info_json);
  EXPECT_EQ(a.first_seen, b.first_seen);
  EXPECT_EQ(a.last_seen, b.last_seen);
}

void ExpectRollupEq(const RollupRecord& a, const RollupRecord& b) {
  EXPECT_EQ(a.uuid, b.uuid);
  EXPECT_EQ(a.minute, b.minute);
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.failures, b.failures);
  for (int i = 0; i < kRollupMetricCount; ++i) {
    SCOPED_TRACE(RollupMetricName(static_cast<RollupMetric>(i)));
    ASSERT_EQ(a.stats[i].has_value(), b.stats[i].has_value());
    if (!a.stats[i]) continue;
    EXPECT_EQ(a.stats[i]->min, b.stats[i]->min);
    EXPECT_EQ(a.stats[i]->mean, b.stats[i]->mean);
    EXPECT_EQ(a.stats[i]->max, b.stats[i]->max);
  }
  EXPECT_EQ(a.pcie_replay_count, b.pcie_replay_count);
  EXPECT_EQ(a.ecc_sbe, b.ecc_sbe);
  EXPECT_EQ(a.ecc_dbe, b.ecc_dbe);
  EXPECT_EQ(a.throttle_reasons_seen, b.throttle_reasons_seen);
  EXPECT_EQ(a.xid_count, b.xid_count);
}

void ExpectEventEq(const EventRecord& a, const EventRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.time, b.time);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.severity, b.severity);
  EXPECT_EQ(a.gpu_uuid, b.gpu_uuid);
  EXPECT_EQ(a.message, b.message);
  EXPECT_EQ(a.data_json, b.data_json);
}

std::vector<int64_t> Ids(const std::vector<EventRecord>& events) {
  std::vector<int64_t> ids;
  for (const EventRecord& e : events) ids.push_back(e.id);
  return ids;
}

class StoreTest : public StoreFileTest {
 protected:
  // The batch most tests start from: two GPUs, rollups with and without
  // stats, and events of every severity.
  WriteBatch SampleBatch() {
    WriteBatch b;
    b.gpus = {MakeGpu("GPU-a", 0, kT0), MakeGpu("GPU-b", 1, kT0)};
    RollupRecord sparse;
    sparse.uuid = "GPU-b";
    sparse.minute = kT0;
    sparse.samples = 0;
    sparse.failures = 12;
    sparse.stat(RollupMetric::kTempC) = RollupStat{-3.5, 0, 71.75};
    b.rollups = {MakeFullRollup("GPU-a", kT0), MakeFullRollup("GPU-a", kT0 + kMinuteMs), sparse};
    EventRecord info = MakeEvent("daemon.start", kT0);
    info.severity = Severity::kInfo;
    info.data_json = "";  // stored as an empty object
    EventRecord critical = MakeEvent("gpu.xid", kT0 + 5, "GPU-a");
    critical.severity = Severity::kCritical;
    b.events = {info, MakeEvent("gpu.found", kT0 + 1, "GPU-b"), critical};
    return b;
  }

  void ExpectSampleBatchStored(Store& store, const WriteBatch& written) {
    auto gpus = store.ListGpus();
    ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
    ASSERT_EQ(gpus->size(), 2u);
    ExpectGpuEq((*gpus)[0], written.gpus[0]);
    ExpectGpuEq((*gpus)[1], written.gpus[1]);

    auto a = store.QueryRollups("GPU-a", kT0, kT0 + kHourMs);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    ASSERT_EQ(a->size(), 2u);
    ExpectRollupEq((*a)[0], written.rollups[0]);
    ExpectRollupEq((*a)[1], written.rollups[1]);
    auto b = store.QueryRollups("GPU-b", kT0, kT0 + kHourMs);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    ASSERT_EQ(b->size(), 1u);
    ExpectRollupEq((*b)[0], written.rollups[2]);
    EXPECT_FALSE((*b)[0].pcie_replay_count.has_value());
    EXPECT_FALSE((*b)[0].stat(RollupMetric::kGpuUtil).has_value());

    auto events = store.ListEvents({});
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    ASSERT_EQ(events->size(), 3u);
    EventRecord expected_first = written.events[0];
    expected_first.data_json = "{}";
    ExpectEventEq((*events)[0], expected_first);
    ExpectEventEq((*events)[1], written.events[1]);
    ExpectEventEq((*events)[2], written.events[2]);
  }
};

TEST_F(StoreTest, RoundTripsEveryField) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  WriteBatch batch = SampleBatch();
  Status st = store->Commit(&batch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(Ids(batch.events), (std::vector<int64_t>{1, 2, 3}));
  ExpectSampleBatchStored(*store, batch);

  auto one = store->GetGpu("GPU-b");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(one->has_value());
  ExpectGpuEq(**one, batch.gpus[1]);
  auto none = store->GetGpu("GPU-zzz");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(StoreTest, ReopenKeepsEverythingAndTheSchemaVersion) {
  WriteBatch batch = SampleBatch();
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Commit(&batch).ok());
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->schema_version(), LatestSchemaVersion());
  ExpectSampleBatchStored(*store, batch);
  SQLite::Database raw(path_);
  EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), LatestSchemaVersion());
  EXPECT_EQ(raw.execAndGet("PRAGMA journal_mode").getString(), "wal");
}

TEST_F(StoreTest, ReadOnlyOpenReadsButNeverWrites) {
  WriteBatch batch = SampleBatch();
  auto writer = Open();
  ASSERT_NE(writer, nullptr);
  ASSERT_TRUE(writer->Commit(&batch).ok());

  auto reader = Open({.read_only = true});
  ASSERT_NE(reader, nullptr);
  ExpectSampleBatchStored(*reader, batch);
  WriteBatch more;
  more.events = {MakeEvent("gpu.lost", kT0 + 9)};
  Status st = reader->Commit(&more);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("read-only"), std::string::npos) << st.message();
  EXPECT_EQ(reader->PruneRollups(kT0 + kHourMs).code(), Code::kFailedPrecondition);
  EXPECT_EQ(*reader->LastEventId(), 3);
}

TEST_F(StoreTest, ReadOnlyOpenOfAMissingFileFailsClearly) {
  auto store = Store::Open(path_, {.read_only = true});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kNotFound);
  EXPECT_NE(store.status().message().find(path_), std::string::npos);
  EXPECT_NE(store.status().message().find("no such file"), std::string::npos);
  EXPECT_FALSE(fs::exists(path_));
}

TEST_F(StoreTest, ReadOnlyOpenNeverMigrates) {
  { SQLite::Database raw(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE); }
  auto store = Store::Open(path_, {.read_only = true});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("open it once read-write"), std::string::npos)
      << store.status().message();
  SQLite::Database raw(path_);
  EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), 0);
  EXPECT_FALSE(raw.tableExists("events"));
}

TEST_F(StoreTest, RefusesAFileFromANewerGpuherd) {
  const int newer = LatestSchemaVersion() + 6;
  {
    SQLite::Database raw(path_, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    raw.exec("PRAGMA user_version = " + std::to_string(newer));
  }
  for (bool read_only : {false, true}) {
    auto store = Store::Open(path_, {.read_only = read_only});
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
    EXPECT_EQ(store.status().message(),
              "database " + path_ + " has schema version " + std::to_string(newer) +
                  " but this gpuherd knows up to " + std::to_string(LatestSchemaVersion()) +
                  "; upgrade gpuherd");
  }
  SQLite::Database raw(path_);
  EXPECT_EQ(raw.execAndGet("PRAGMA user_version").getInt(), newer);
  EXPECT_FALSE(raw.tableExists("gpus"));
}

TEST_F(StoreTest, AFileThatIsNotADatabaseGivesAClearError) {
  std::ofstream(path_) << "gpus:\n  - GPU-a\nthis is a YAML file, not a database\n";
  for (bool read_only : {false, true}) {
    auto store = Store::Open(path_, {.read_only = read_only});
    ASSERT_FALSE(store.ok());
    EXPECT_EQ(store.status().code(), Code::kFailedPrecondition);
    EXPECT_EQ(store.status().message(), "cannot open " + path_ +
                                            ": file is not a database; move it aside or choose "
                                            "another --home");
  }
}

TEST_F(StoreTest, AMissingDirectoryGivesAClearError) {
  const std::string path = (dir_ / "no" / "such" / "state.db").string();
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Code::kIoError);
  EXPECT_EQ(store.status().message(), "cannot open " + path +
                                          ": unable to open database file; check that the "
                                          "directory exists and is writable");
}

TEST_F(StoreTest, UpsertKeepsFirstSeen) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch first;
  first.gpus = {MakeGpu("GPU-a", 0, kT0)};
  ASSERT_TRUE(store->Commit(&first).ok());

  WriteBatch again;
  GpuRecord moved = MakeGpu("GPU-a", 3, kT0 + kHourMs);
  moved.pci_bus_id = "00000000:81:00.0";
  moved.info_json = R"({"moved":true})";
  again.gpus = {moved};
  ASSERT_TRUE(store->Commit(&again).ok());

  auto got = store->GetGpu("GPU-a");
  ASSERT_TRUE(got.ok() && got->has_value());
  GpuRecord expected = moved;
  expected.first_seen = kT0;
  ExpectGpuEq(**got, expected);
  EXPECT_EQ(store->ListGpus()->size(), 1u);
}

TEST_F(StoreTest, FailingBatchLeavesNothingBehind) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch orphan;
  orphan.gpus = {MakeGpu("GPU-a", 0, kT0)};
  orphan.events = {MakeEvent("gpu.found", kT0, "GPU-a")};
  orphan.rollups = {MakeFullRollup("GPU-a", kT0), MakeFullRollup("GPU-unknown", kT0)};
  Status st = store->Commit(&orphan);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("GPU-unknown"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("WriteBatch::gpus"), std::string::npos) << st.message();
  EXPECT_EQ(orphan.events[0].id, 0);
  EXPECT_TRUE(store->ListGpus()->empty());
  EXPECT_TRUE(store->ListEvents({})->empty());
  EXPECT_TRUE(store->QueryRollups("GPU-a", 0, kT0 + kHourMs)->empty());
  EXPECT_EQ(*store->LastEventId(), 0);

  // The same statements work again after the failure.
  WriteBatch good;
  good.gpus = {MakeGpu("GPU-a", 0, kT0)};
  good.rollups = {MakeFullRollup("GPU-a", kT0)};
  good.events = {MakeEvent("gpu.found", kT0, "GPU-a")};
  st = store->Commit(&good);
  ASSERT_TRUE(st.ok()) << st.ToString();

  // A failure in the last row takes the GPUs, rollups and events before it along.
  WriteBatch late_failure;
  late_failure.gpus = {MakeGpu("GPU-b", 1, kT0)};
  late_failure.rollups = {MakeFullRollup("GPU-b", kT0)};
  late_failure.events = {MakeEvent("gpu.found", kT0 + 1, "GPU-b"),
                         MakeEvent("gpu.xid", kT0 + 2, "GPU-b")};
  late_failure.events[1].severity = static_cast<Severity>(7);
  st = store->Commit(&late_failure);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("while storing event 'gpu.xid'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("nothing of the batch was kept"), std::string::npos) << st.message();
  EXPECT_EQ(late_failure.events[0].id, 0);
  EXPECT_EQ(Ids(*store->ListEvents({})), (std::vector<int64_t>{good.events[0].id}));
  EXPECT_FALSE(store->GetGpu("GPU-b")->has_value());
  EXPECT_TRUE(store->QueryRollups("GPU-b", 0, kT0 + kHourMs)->empty());
}

TEST_F(StoreTest, ARollupOfAStoredMinuteIsMergedIntoIt) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  // Before a restart: 20 s of the minute; temperature only, no ECC yet.
  RollupRecord before;
  before.uuid = "GPU-a";
  before.minute = kT0;
  before.samples = 4;
  before.failures = 1;
  before.stat(RollupMetric::kTempC) = RollupStat{60, 62, 64};
  before.stat(RollupMetric::kPowerW) = RollupStat{100, 150, 200};
  before.pcie_replay_count = 5;
  before.throttle_reasons_seen = 0x4;
  before.xid_count = 1;
  // After it: the rest of the minute; power not read, ECC now known.
  RollupRecord after = before;
  after.samples = 12;
  after.failures = 0;
  after.stat(RollupMetric::kTempC) = RollupStat{58, 66, 70};
  after.stat(RollupMetric::kPowerW).reset();
  after.stat(RollupMetric::kFanPct) = RollupStat{30, 35, 40};
  after.pcie_replay_count = 9;
  after.ecc_dbe = 2;
  after.throttle_reasons_seen = 0x40;
  after.xid_count = 2;

  WriteBatch first;
  first.gpus = {MakeGpu("GPU-a", 0, kT0)};
  first.rollups = {before};
  ASSERT_TRUE(store->Commit(&first).ok());
  WriteBatch second;
  second.rollups = {after};
  second.events = {MakeEvent("daemon.start", kT0 + 30 * kSecondMs)};
  Status st = store->Commit(&second);
  ASSERT_TRUE(st.ok()) << st.ToString();

  auto got = store->QueryRollups("GPU-a", kT0, kT0 + kMinuteMs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  const RollupRecord& r = got->front();
  EXPECT_EQ(r.samples, 16);
  EXPECT_EQ(r.failures, 1);
  ASSERT_TRUE(r.stat(RollupMetric::kTempC).has_value());
  EXPECT_EQ(r.stat(RollupMetric::kTempC)->min, 58);
  EXPECT_EQ(r.stat(RollupMetric::kTempC)->max, 70);
  EXPECT_DOUBLE_EQ(r.stat(RollupMetric::kTempC)->mean, (62.0 * 4 + 66.0 * 12) / 16);
  ASSERT_TRUE(r.stat(RollupMetric::kPowerW).has_value());  // kept from before
  EXPECT_EQ(r.stat(RollupMetric::kPowerW)->mean, 150);
  ASSERT_TRUE(r.stat(RollupMetric::kFanPct).has_value());  // new after
  EXPECT_EQ(r.stat(RollupMetric::kFanPct)->min, 30);
  EXPECT_FALSE(r.stat(RollupMetric::kGpuUtil).has_value());
  EXPECT_EQ(r.pcie_replay_count, 9u);
  EXPECT_EQ(r.ecc_dbe, 2u);
  EXPECT_FALSE(r.ecc_sbe.has_value());
  EXPECT_EQ(r.throttle_reasons_seen, 0x44u);
  EXPECT_EQ(r.xid_count, 3);
  EXPECT_EQ(store->ListEvents({})->size(), 1u);
}

TEST_F(StoreTest, BadInputIsRefusedBeforeWriting) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch no_kind;
  no_kind.events = {MakeEvent("gpu.found", kT0), MakeEvent("", kT0)};
  Status st = store->Commit(&no_kind);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "event 1 of the batch has an empty kind");

  WriteBatch negative;
  negative.gpus = {MakeGpu("GPU-a", 0, kT0)};
  negative.rollups = {MakeFullRollup("GPU-a", kT0)};
  negative.rollups[0].samples = -1;
  st = store->Commit(&negative);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("negative"), std::string::npos) << st.message();
  EXPECT_TRUE(store->ListGpus()->empty());
  EXPECT_TRUE(store->ListEvents({})->empty());
}

TEST_F(StoreTest, EventFilters) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.events = {
      MakeEvent("daemon.start", kT0),            // 1
      MakeEvent("gpu.found", kT0 + 1, "GPU-a"),  // 2
      MakeEvent("gpu.found", kT0 + 2, "GPU-b"),  // 3
      MakeEvent("gpu.xid", kT0 + 3, "GPU-a"),    // 4
      MakeEvent("gpux.other", kT0 + 4),          // 5: not under "gpu."
      MakeEvent("gpu.lost", kT0 + 5, "GPU-b"),   // 6
      MakeEvent("gpu.found", kT0 + 6, "GPU-b"),  // 7
  };
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto ids = [&](int64_t after_id, TimeMs since, const std::string& gpu, const std::string& prefix,
                 int limit) {
    auto events = store->ListEvents(EventFilter{after_id, since, gpu, prefix, limit});
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    return events.ok() ? Ids(*events) : std::vector<int64_t>{-1};
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(ids(0, 0, "", "", 1000), (V{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(ids(4, 0, "", "", 1000), (V{5, 6, 7}));
  EXPECT_EQ(ids(0, kT0 + 3, "", "", 1000), (V{4, 5, 6, 7}));
  EXPECT_EQ(ids(0, 0, "GPU-b", "", 1000), (V{3, 6, 7}));
  EXPECT_EQ(ids(0, 0, "", "gpu.", 1000), (V{2, 3, 4, 6, 7}));
  EXPECT_EQ(ids(0, 0, "", "gpu.found", 1000), (V{2, 3, 7}));
  EXPECT_EQ(ids(0, 0, "", "nothing", 1000), V{});
  EXPECT_EQ(ids(0, 0, "", "", 2), (V{6, 7}));  // the newest two, oldest first
  EXPECT_EQ(ids(2, 0, "GPU-b", "gpu.found", 1), (V{7}));
  EXPECT_EQ(ids(1, kT0 + 5, "", "gpu.", 1000), (V{6, 7}));

  EventFilter zero;
  zero.limit = 0;
  auto bad = store->ListEvents(zero);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, EventIdsAreMonotonicAcrossReopenAndNeverReused) {
  std::vector<int64_t> first_ids;
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(*store->LastEventId(), 0);
    WriteBatch batch;
    batch.events = {MakeEvent("a.one", kT0), MakeEvent("a.two", kT0), MakeEvent("a.three", kT0)};
    ASSERT_TRUE(store->Commit(&batch).ok());
    first_ids = Ids(batch.events);
    ASSERT_TRUE(std::is_sorted(first_ids.begin(), first_ids.end()));
    EXPECT_EQ(*store->LastEventId(), first_ids.back());
  }
  {
    // Even if the newest row goes away, its id is not handed out again.
    SQLite::Database raw(path_, SQLite::OPEN_READWRITE);
    raw.exec("DELETE FROM events WHERE id = " + std::to_string(first_ids.back()));
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch later;
  later.events = {MakeEvent("b.one", kT0 + 1), MakeEvent("b.two", kT0 + 1)};
  ASSERT_TRUE(store->Commit(&later).ok());
  EXPECT_GT(later.events[0].id, first_ids.back());
  EXPECT_GT(later.events[1].id, later.events[0].id);
  EXPECT_EQ(*store->LastEventId(), later.events[1].id);
}

TEST_F(StoreTest, QueryRollupsIsAHalfOpenRangeOldestFirst) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.gpus = {MakeGpu("GPU-a", 0, kT0), MakeGpu("GPU-b", 1, kT0)};
  for (int m = 9; m >= 0; --m) {  // written newest first; read back oldest first
    batch.rollups.push_back(MakeFullRollup("GPU-a", kT0 + m * kMinuteMs));
    batch.rollups.push_back(MakeFullRollup("GPU-b", kT0 + m * kMinuteMs));
  }
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto minutes = [&](TimeMs from, TimeMs to, int limit) {
    std::vector<TimeMs> out;
    auto rollups = store->QueryRollups("GPU-a", from, to, limit);
    EXPECT_TRUE(rollups.ok()) << rollups.status().ToString();
    if (rollups.ok()) {
      for (const RollupRecord& r : *rollups) {
        EXPECT_EQ(r.uuid, "GPU-a");
        out.push_back((r.minute - kT0) / kMinuteMs);
      }
    }
    return out;
  };
  using V = std::vector<TimeMs>;
  EXPECT_EQ(minutes(kT0 + 2 * kMinuteMs, kT0 + 5 * kMinuteMs, 100), (V{2, 3, 4}));
  EXPECT_EQ(minutes(kT0 + 2 * kMinuteMs + 1, kT0 + 5 * kMinuteMs + 1, 100), (V{3, 4, 5}));
  EXPECT_EQ(minutes(0, kT0 + kHourMs, 3), (V{0, 1, 2}));
  EXPECT_EQ(store->QueryRollups("GPU-a", 0, kT0, 0).status().code(), Code::kInvalidArgument);
}

// Buckets of minutes for the dashboard's long ranges: each the mean of its
// minutes' means, a metric none of its minutes has absent, empty buckets left out.
TEST_F(StoreTest, QueryRollupBucketsAveragesMinutesInBuckets) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.gpus = {MakeGpu("GPU-a", 0, kT0), MakeGpu("GPU-b", 1, kT0)};
  for (int m : {0, 1, 2, 7}) {
    RollupRecord r = MakeFullRollup("GPU-a", kT0 + m * kMinuteMs);
    r.stat(RollupMetric::kGpuUtil) = RollupStat{0, 10.0 * m, 100};
    if (m != 0) r.stat(RollupMetric::kTempC).reset();
    if (m == 7) r.stat(RollupMetric::kPowerW).reset();
    batch.rollups.push_back(r);
  }
  batch.rollups.push_back(MakeFullRollup("GPU-b", kT0 + 3 * kMinuteMs));
  ASSERT_TRUE(store->Commit(&batch).ok());
  auto buckets = store->QueryRollupBuckets("GPU-a", kT0, kT0 + 9 * kMinuteMs, 3 * kMinuteMs);
  ASSERT_TRUE(buckets.ok()) << buckets.status().ToString();
  ASSERT_EQ(buckets->size(), 2u);  // minutes 0-2 and 6-8; 3-5 has none
  const auto& first = (*buckets)[0];
  EXPECT_EQ(first.start, kT0);
  EXPECT_EQ(first.minutes, 3);
  EXPECT_DOUBLE_EQ(*first.means[static_cast<int>(RollupMetric::kGpuUtil)], 10.0);  // (0 + 10 + 20) / 3
  EXPECT_DOUBLE_EQ(*first.means[static_cast<int>(RollupMetric::kTempC)], 10.25 * static_cast<int>(RollupMetric::kTempC) + 0.5);
  const auto& second = (*buckets)[1];
  EXPECT_EQ(second.start, kT0 + 6 * kMinuteMs);
  EXPECT_EQ(second.minutes, 1);
  EXPECT_DOUBLE_EQ(*second.means[static_cast<int>(RollupMetric::kGpuUtil)], 70.0);
  EXPECT_FALSE(second.means[static_cast<int>(RollupMetric::kTempC)].has_value());
  EXPECT_FALSE(second.means[static_cast<int>(RollupMetric::kPowerW)].has_value());
  // The range is half-open, and a bucket must be positive.
  EXPECT_EQ(store->QueryRollupBuckets("GPU-a", kT0, kT0 + 7 * kMinuteMs, 3 * kMinuteMs)->size(), 1u);
  EXPECT_EQ(store->QueryRollupBuckets("GPU-a", kT0, kT0 + kHourMs, 0).status().code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, PruneRollupsDropsOnlyOlderMinutes) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  WriteBatch batch;
  batch.gpus = {MakeGpu("GPU-a", 0, kT0), MakeGpu("GPU-b", 1, kT0)};
  for (int m = 0; m < 10; ++m) {
    batch.rollups.push_back(MakeFullRollup("GPU-a", kT0 + m * kMinuteMs));
    batch.rollups.push_back(MakeFullRollup("GPU-b", kT0 + m * kMinuteMs));
  }
  batch.events = {MakeEvent("gpu.found", kT0, "GPU-a")};
  ASSERT_TRUE(store->Commit(&batch).ok());

  Status st = store->PruneRollups(kT0 + 6 * kMinuteMs);
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (const char* uuid : {"GPU-a", "GPU-b"}) {
    auto left = store->QueryRollups(uuid, 0, kT0 + kHourMs);
    ASSERT_TRUE(left.ok());
    ASSERT_EQ(left->size(), 4u) << uuid;
    EXPECT_EQ(left->front().minute, kT0 + 6 * kMinuteMs);
  }
  EXPECT_EQ(store->ListGpus()->size(), 2u);
  EXPECT_EQ(store->ListEvents({})->size(), 1u);
}

// The child side of the crash test: commits numbered batches for ever and
// reports each number on `fd` once Commit has returned.
[[noreturn]] void CommitBatchesUntilKilled(const std::string& path, int fd) {
  auto store = Store::Open(path);
  if (!store.ok()) _exit(2);
  WriteBatch setup;
  setup.gpus = {MakeGpu("GPU-crash", 0, kT0)};
  if (!(*store)->Commit(&setup).ok()) _exit(3);
  for (int32_t n = 1;; ++n) {
    WriteBatch batch;
    batch.gpus = {MakeGpu("GPU-crash", 0, kT0 + n)};
    for (int j = 0; j < 8; ++j) {
      batch.rollups.push_back(MakeFullRollup("GPU-crash", (n * 8 + j) * kMinuteMs));
    }
    for (int j = 0; j < 16; ++j) batch.events.push_back(MakeEvent("test.batch", n));
    if (!(*store)->Commit(&batch).ok()) _exit(4);
    if (write(fd, &n, sizeof n) != sizeof n) _exit(5);
  }
}

TEST_F(StoreTest, CrashMidWriteKeepsEveryAcknowledgedBatch) {
  const unsigned seed = std::random_device()();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    path_ = (dir_ / ("crash" + std::to_string(round) + ".db")).string();
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      CommitBatchesUntilKilled(path_, fds[1]);
    }
    close(fds[1]);
    int32_t acked = 0;
    ASSERT_EQ(read(fds[0], &acked, sizeof acked), static_cast<ssize_t>(sizeof acked))
        << "the writer died before its first commit";
    std::this_thread::sleep_for(
        std::chrono::microseconds(std::uniform_int_distribution<int>(0, 150000)(rng)));
    kill(pid, SIGKILL);
    int wstatus = 0;
    ASSERT_EQ(waitpid(pid, &wstatus, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the writer exited by itself: " << WEXITSTATUS(wstatus);
    for (int32_t n; read(fds[0], &n, sizeof n) == static_cast<ssize_t>(sizeof n);) acked = n;
    close(fds[0]);

    auto store = Open();
    ASSERT_NE(store, nullptr);
    {
      SQLite::Database raw(path_);
      EXPECT_EQ(raw.execAndGet("PRAGMA integrity_check").getString(), "ok");
      SQLite::Statement fk(raw, "PRAGMA foreign_key_check");
      EXPECT_FALSE(fk.executeStep());
    }
    // Batch n's events carry time n; its rollups are minutes 8n .. 8n+7.
    std::map<TimeMs, int> events_per_batch;
    EventFilter all;
    all.limit = 1 << 30;
    auto events = store->ListEvents(all);
    ASSERT_TRUE(events.ok()) << events.status().ToString();
    for (const EventRecord& e : *events) ++events_per_batch[e.time];
    const int stored = static_cast<int>(events_per_batch.size());
    EXPECT_TRUE(stored == acked || stored == acked + 1)
        << "acknowledged " << acked << ", stored " << stored;
    for (int n = 1; n <= stored; ++n) {
      EXPECT_EQ(events_per_batch[n], 16) << "batch " << n;
      auto rollups = store->QueryRollups("GPU-crash", n * 8 * kMinuteMs, (n + 1) * 8 * kMinuteMs);
      ASSERT_TRUE(rollups.ok());
      EXPECT_EQ(rollups->size(), 8u) << "batch " << n;
    }
    auto beyond = store->QueryRollups("GPU-crash", (stored + 1) * 8 * kMinuteMs, kT0);
    ASSERT_TRUE(beyond.ok());
    EXPECT_TRUE(beyond->empty()) << "rollups of an unstored batch";
    auto gpu = store->GetGpu("GPU-crash");
    ASSERT_TRUE(gpu.ok() && gpu->has_value());
    EXPECT_EQ((*gpu)->last_seen, kT0 + stored);
  }
}

TEST(StoreFullDiskTest, ACommitOnAFullDiskKeepsNothingAndSaysSo) {
  const std::string dir = ::testing::TempDir() + "/gpuherd_store_full_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  auto store = Store::Open(dir + "/state.db");
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->SimulateFullDiskForTest(true).ok());
  WriteBatch batch;
  for (int i = 0; i < 2000; ++i) {
    EventRecord e;
    e.time = 1000 + i;
    e.kind = "test.fill";
    e.message = std::string(200, 'x');
    batch.events.push_back(e);
  }
  Status full = (*store)->Commit(&batch);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.code(), Code::kIoError);
  EXPECT_NE(full.message().find("disk is full"), std::string::npos) << full.message();
  EXPECT_EQ(*(*store)->LastEventId(), 0);
  ASSERT_TRUE((*store)->SimulateFullDiskForTest(false).ok());
  ASSERT_TRUE((*store)->Commit(&batch).ok());
  EXPECT_EQ(*(*store)->LastEventId(), 2000);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpuherd::store
