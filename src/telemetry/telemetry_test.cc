#include "telemetry/telemetry.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "telemetry/records_convert.h"

namespace gpuherd::telemetry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using store::Severity;

constexpr TimeMs kT0 = 1'699'999'980'000;  // the start of a minute
constexpr DurationMs kStep = 5000;

gpu::GpuInfo Info(int index) {
  gpu::GpuInfo info;
  info.index = index;
  info.uuid = "GPU-" + std::to_string(index);
  info.name = "NVIDIA Test";
  info.pci_bus_id = "00000000:1" + std::to_string(index) + ":00.0";
  info.max_pcie_gen = 4;
  info.max_pcie_width = 16;
  info.temp_slowdown_c = 85;
  return info;
}

gpu::Fleet TwoGpus() {
  gpu::Fleet fleet;
  fleet.gpus = {Info(0), Info(1)};
  return fleet;
}

// A healthy, busy card.
gpu::GpuSample Healthy(TimeMs t) {
  gpu::GpuSample s;
  s.time = t;
  s.gpu_util_pct = 80;
  s.temp_c = 65;
  s.fan_pct = 40;
  s.pcie_gen = 4;
  s.pcie_width = 16;
  s.pcie_replay_count = 0;
  s.ecc_sbe_volatile = 0;
  s.ecc_dbe_volatile = 0;
  s.throttle_reasons = 0;
  s.retired_pages_pending = false;
  s.remapped_rows_pending = false;
  s.remapped_rows_failure = false;
  return s;
}

SampleRound Round(TimeMs t, std::vector<GpuReading> readings) {
  SampleRound round;
  round.time = t;
  round.readings = std::move(readings);
  return round;
}

// A round in which GPU 0 reports `s` and GPU 1 is healthy.
SampleRound RoundOf(const gpu::GpuSample& s) {
  return Round(s.time, {{0, s}, {1, Healthy(s.time)}});
}

std::vector<std::string> Kinds(const IngestResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.events) out.push_back(e.kind);
  return out;
}

class TelemetryTest : public ::testing::Test {
 protected:
  TelemetryTest() { telemetry_.SetFleet(TwoGpus()); }

  // Ingests GPU 0's sample at the next step and returns the result.
  IngestResult Feed(gpu::GpuSample s) {
    s.time = now_;
    now_ += kStep;
    return telemetry_.Ingest(RoundOf(s));
  }
  IngestResult FeedFailure(const std::string& error) {
    SampleRound round = Round(now_, {{0, Unavailable(error)}, {1, Healthy(now_)}});
    now_ += kStep;
    return telemetry_.Ingest(round);
  }

  Telemetry telemetry_;
  TimeMs now_ = kT0;
};

TEST_F(TelemetryTest, HealthyReadingsRaiseNoEvents) {
  for (int i = 0; i < 20; ++i) EXPECT_THAT(Feed(Healthy(0)).events, IsEmpty());
  EXPECT_EQ(telemetry_.State(0), GpuState::kOk);
}

TEST_F(TelemetryTest, LostOnceWithTheDriversErrorThenFoundOnce) {
  Feed(Healthy(0));
  IngestResult lost = FeedFailure("GPU is lost (NVML_ERROR_GPU_IS_LOST)");
  ASSERT_EQ(lost.events.size(), 1u);
  const store::EventRecord& e = lost.events[0];
  EXPECT_EQ(e.kind, "gpu.lost");
  EXPECT_EQ(e.severity, Severity::kCritical);
  EXPECT_EQ(e.gpu_uuid, "GPU-0");
  EXPECT_EQ(e.time, kT0 + kStep);
  EXPECT_THAT(e.message, HasSubstr("NVML_ERROR_GPU_IS_LOST"));
  EXPECT_THAT(nlohmann::json::parse(e.data_json)["error"].get<std::string>(),
              HasSubstr("NVML_ERROR_GPU_IS_LOST"));
  EXPECT_EQ(telemetry_.State(0), GpuState::kLost);
  EXPECT_STREQ(GpuStateName(telemetry_.State(0)), "lost");
  EXPECT_EQ(telemetry_.State(1), GpuState::kOk);
  EXPECT_THAT(telemetry_.LostReason(0), HasSubstr("NVML_ERROR_GPU_IS_LOST"));

  EXPECT_THAT(FeedFailure("still gone").events, IsEmpty());
  EXPECT_THAT(FeedFailure("still gone").events, IsEmpty());

  IngestResult found = Feed(Healthy(0));
  ASSERT_THAT(Kinds(found), ElementsAre("gpu.found"));
  EXPECT_EQ(found.events[0].severity, Severity::kInfo);
  EXPECT_EQ(nlohmann::json::parse(found.events[0].data_json)["lost_ms"], 3 * kStep);
  EXPECT_EQ(telemetry_.State(0), GpuState::kOk);
  EXPECT_EQ(telemetry_.LostReason(0), "");
  EXPECT_THAT(Feed(Healthy(0)).events, IsEmpty());
}

TEST_F(TelemetryTest, EveryXidIsAnEventFatalOnesCritical) {
  gpu::GpuSample s = Healthy(0);
  s.xids = {{kT0 + 100, 79, ""}, {kT0 + 200, 13, "custom text"}};
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.xid", "gpu.xid"));
  EXPECT_EQ(r.events[0].severity, Severity::kCritical);
  EXPECT_EQ(r.events[0].time, kT0 + 100);
  EXPECT_THAT(r.events[0].message, HasSubstr("fell off the PCIe bus"));
  nlohmann::json data = nlohmann::json::parse(r.events[0].data_json);
  EXPECT_EQ(data["xid"], 79);
  EXPECT_EQ(data["fatal"], true);
  EXPECT_EQ(data["index"], 0);
  EXPECT_EQ(r.events[1].severity, Severity::kWarning);
  EXPECT_THAT(r.events[1].message, HasSubstr("custom text"));
  EXPECT_THAT(Feed(Healthy(0)).events, IsEmpty());
}

TEST_F(TelemetryTest, EveryDoubleBitRiseIsCriticalButNotTheStartingCount) {
  gpu::GpuSample s = Healthy(0);
  s.ecc_dbe_volatile = 5;  // errors from before the daemon started
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.ecc_dbe_volatile = 7;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.ecc"));
  EXPECT_EQ(r.events[0].severity, Severity::kCritical);
  EXPECT_EQ(nlohmann::json::parse(r.events[0].data_json)["new"], 2);
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.ecc_dbe_volatile = 8;
  EXPECT_THAT(Kinds(Feed(s)), ElementsAre("gpu.ecc"));
}

TEST_F(TelemetryTest, SingleBitRisesAreReportedAtMostOncePerMinute) {
  gpu::GpuSample s = Healthy(0);
  Feed(s);
  s.ecc_sbe_volatile = 3;
  IngestResult first = Feed(s);  // at +5 s
  ASSERT_THAT(Kinds(first), ElementsAre("gpu.ecc"));
  EXPECT_EQ(first.events[0].severity, Severity::kWarning);
  // More rises within the minute are held back...
  for (int i = 0; i < 11; ++i) {
    s.ecc_sbe_volatile = *s.ecc_sbe_volatile + 1;
    EXPECT_THAT(Feed(s).events, IsEmpty()) << i;
  }
  // ...and reported, all of them, once the minute has passed (+65 s).
  IngestResult later = Feed(s);
  ASSERT_THAT(Kinds(later), ElementsAre("gpu.ecc"));
  EXPECT_EQ(nlohmann::json::parse(later.events[0].data_json)["new"], 11);
  EXPECT_EQ(nlohmann::json::parse(later.events[0].data_json)["type"], "sbe");
  for (int i = 0; i < 20; ++i) EXPECT_THAT(Feed(s).events, IsEmpty());
}

TEST_F(TelemetryTest, ACounterResetIsNotARise) {
  gpu::GpuSample s = Healthy(0);
  s.ecc_sbe_volatile = 10;
  s.pcie_replay_count = 10;
  Feed(s);
  s.ecc_sbe_volatile = 0;  // driver reloaded
  s.pcie_replay_count = 0;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.ecc_sbe_volatile = 1;
  EXPECT_THAT(Kinds(Feed(s)), ElementsAre("gpu.ecc"));
}

TEST_F(TelemetryTest, PcieReplaysAreReportedAtMostOncePerMinute) {
  gpu::GpuSample s = Healthy(0);
  Feed(s);
  s.pcie_replay_count = 4;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.pcie_replay"));
  EXPECT_EQ(r.events[0].severity, Severity::kWarning);
  s.pcie_replay_count = 9;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  now_ += kMinuteMs;
  EXPECT_THAT(Kinds(Feed(s)), ElementsAre("gpu.pcie_replay"));
  EXPECT_THAT(Feed(s).events, IsEmpty());
}

TEST_F(TelemetryTest, NarrowPcieLinkIsAFaultAtAnyLoadAndItsRecoveryIsReported) {
  gpu::GpuSample s = Healthy(0);
  s.gpu_util_pct = 0;
  s.pcie_width = 8;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.pcie"));
  EXPECT_EQ(r.events[0].severity, Severity::kWarning);
  EXPECT_THAT(r.events[0].message, HasSubstr("PCIe link x8 on an x16 card"));
  s.gpu_util_pct = 90;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.pcie_width = 16;
  IngestResult back = Feed(s);
  ASSERT_THAT(Kinds(back), ElementsAre("gpu.pcie"));
  EXPECT_EQ(back.events[0].severity, Severity::kInfo);
  EXPECT_EQ(nlohmann::json::parse(back.events[0].data_json)["degraded"], false);
  EXPECT_THAT(Feed(s).events, IsEmpty());
}

TEST_F(TelemetryTest, LowerPcieGenCountsOnlyUnderLoad) {
  gpu::GpuSample s = Healthy(0);
  s.gpu_util_pct = 1;
  s.pcie_gen = 1;  // power management at idle
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.gpu_util_pct = 90;
  s.pcie_gen = 3;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.pcie"));
  EXPECT_THAT(r.events[0].message, HasSubstr("PCIe link gen3 on a gen4 card"));
  // Going idle neither clears nor repeats it.
  s.gpu_util_pct = 0;
  s.pcie_gen = 1;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.gpu_util_pct = 90;
  s.pcie_gen = 3;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.pcie_gen = 4;
  IngestResult back = Feed(s);
  ASSERT_THAT(Kinds(back), ElementsAre("gpu.pcie"));
  EXPECT_EQ(back.events[0].severity, Severity::kInfo);
  EXPECT_THAT(back.events[0].message, HasSubstr("gen4 x16"));
}

TEST_F(TelemetryTest, ThermalEpisodeStartsAtTheSlowdownThresholdAndEndsBelowIt) {
  gpu::GpuSample s = Healthy(0);
  s.temp_c = 85;
  IngestResult hot = Feed(s);
  ASSERT_THAT(Kinds(hot), ElementsAre("gpu.thermal"));
  EXPECT_EQ(hot.events[0].severity, Severity::kCritical);
  EXPECT_THAT(hot.events[0].message, HasSubstr("85 °C"));
  s.temp_c = 88;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.temp_c = 83;  // within the hysteresis band
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.temp_c = 81;
  IngestResult cool = Feed(s);
  ASSERT_THAT(Kinds(cool), ElementsAre("gpu.thermal"));
  EXPECT_EQ(cool.events[0].severity, Severity::kInfo);
  EXPECT_THAT(Feed(s).events, IsEmpty());
}

TEST_F(TelemetryTest, HardwareThermalThrottlingIsAThermalEpisode) {
  gpu::GpuSample s = Healthy(0);
  s.temp_c = 70;
  s.throttle_reasons = gpu::throttle::kHwThermalSlowdown | gpu::throttle::kSwPowerCap;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.thermal"));
  EXPECT_EQ(r.events[0].severity, Severity::kCritical);
  EXPECT_THAT(r.events[0].message, HasSubstr("hardware thermal throttling"));
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.throttle_reasons = gpu::throttle::kSwPowerCap;  // power capping is not thermal
  IngestResult end = Feed(s);
  ASSERT_THAT(Kinds(end), ElementsAre("gpu.thermal"));
  EXPECT_EQ(end.events[0].severity, Severity::kInfo);
}

TEST_F(TelemetryTest, StoppedFanIsReportedOnceUntilItTurnsAgain) {
  gpu::GpuSample s = Healthy(0);
  s.fan_pct = 0;
  s.temp_c = 55;  // a cool card may idle its fan
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.temp_c = 72;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.fan"));
  EXPECT_EQ(r.events[0].severity, Severity::kCritical);
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.temp_c = 50;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.temp_c = 75;
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.fan_pct = 60;
  IngestResult back = Feed(s);
  ASSERT_THAT(Kinds(back), ElementsAre("gpu.fan"));
  EXPECT_EQ(back.events[0].severity, Severity::kInfo);
}

TEST_F(TelemetryTest, PassiveCardsWithoutAFanReadingRaiseNoFanEvent) {
  gpu::GpuSample s = Healthy(0);
  s.fan_pct.reset();
  s.temp_c = 80;
  EXPECT_THAT(Feed(s).events, IsEmpty());
}

TEST_F(TelemetryTest, PendingRetirementAndRemapFailureAreCritical) {
  gpu::GpuSample s = Healthy(0);
  s.remapped_rows_pending = true;
  IngestResult r = Feed(s);
  ASSERT_THAT(Kinds(r), ElementsAre("gpu.retired"));
  EXPECT_EQ(r.events[0].severity, Severity::kCritical);
  EXPECT_THAT(r.events[0].message, HasSubstr("row remapping pending"));
  EXPECT_THAT(Feed(s).events, IsEmpty());
  s.remapped_rows_pending = false;  // applied by a reset
  IngestResult applied = Feed(s);
  ASSERT_THAT(Kinds(applied), ElementsAre("gpu.retired"));
  EXPECT_EQ(applied.events[0].severity, Severity::kInfo);

  s.remapped_rows_failure = true;
  IngestResult failure = Feed(s);
  ASSERT_THAT(Kinds(failure), ElementsAre("gpu.retired"));
  EXPECT_THAT(failure.events[0].message, HasSubstr("needs service"));
  EXPECT_EQ(nlohmann::json::parse(failure.events[0].data_json)["remapped_rows_failure"], true);

  gpu::GpuSample pages = Healthy(0);
  pages.retired_pages_pending = true;
  pages.remapped_rows_failure = true;
  EXPECT_THAT(Feed(pages).events, IsEmpty());  // still pending
}

TEST_F(TelemetryTest, KeepsRecentReadingsInARingPerGpu) {
  Telemetry small(TelemetryOptions{3});
  small.SetFleet(TwoGpus());
  EXPECT_EQ(small.Latest(0), nullptr);
  for (int i = 0; i < 5; ++i) {
    gpu::GpuSample s = Healthy(kT0 + i * kStep);
    s.gpu_util_pct = i;
    small.Ingest(RoundOf(s));
  }
  ASSERT_NE(small.Latest(0), nullptr);
  EXPECT_DOUBLE_EQ(*small.Latest(0)->gpu_util_pct, 4);
  std::vector<gpu::GpuSample> recent = small.Recent(0, 10);
  ASSERT_EQ(recent.size(), 3u);
  EXPECT_DOUBLE_EQ(*recent[0].gpu_util_pct, 2);
  EXPECT_DOUBLE_EQ(*recent[2].gpu_util_pct, 4);
  EXPECT_EQ(small.Recent(0, 1).size(), 1u);
  EXPECT_EQ(small.Recent(1, 10).size(), 3u);
  EXPECT_THAT(small.Recent(7, 10), IsEmpty());
  EXPECT_EQ(small.Latest(7), nullptr);
}

TEST_F(TelemetryTest, ReadingsWithoutATimeTakeTheRoundsTime) {
  gpu::GpuSample s = Healthy(0);
  s.time = 0;
  telemetry_.Ingest(Round(kT0 + 42, {{0, s}}));
  ASSERT_NE(telemetry_.Latest(0), nullptr);
  EXPECT_EQ(telemetry_.Latest(0)->time, kT0 + 42);
}

TEST_F(TelemetryTest, EmitsARollupPerGpuWhenTheMinuteEnds) {
  std::vector<store::RollupRecord> rollups;
  for (int i = 0; i < 12; ++i) {  // one minute at 5 s
    IngestResult r = (i == 3) ? FeedFailure("timeout") : Feed(Healthy(0));
    EXPECT_THAT(r.rollups, IsEmpty());
  }
  IngestResult next_minute = Feed(Healthy(0));
  ASSERT_EQ(next_minute.rollups.size(), 2u);
  const store::RollupRecord& r0 = next_minute.rollups[0].uuid == "GPU-0"
                                      ? next_minute.rollups[0] : next_minute.rollups[1];
  const store::RollupRecord& r1 = next_minute.rollups[0].uuid == "GPU-0"
                                      ? next_minute.rollups[1] : next_minute.rollups[0];
  EXPECT_EQ(r0.minute, kT0);
  EXPECT_EQ(r0.samples, 11);
  EXPECT_EQ(r0.failures, 1);
  EXPECT_EQ(r1.samples, 12);
  EXPECT_EQ(r1.failures, 0);
  ASSERT_TRUE(r0.stat(store::RollupMetric::kTempC).has_value());
  EXPECT_DOUBLE_EQ(r0.stat(store::RollupMetric::kTempC)->mean, 65);
  EXPECT_FALSE(r0.stat(store::RollupMetric::kPowerW).has_value());

  std::vector<store::RollupRecord> flushed = telemetry_.Flush();
  ASSERT_EQ(flushed.size(), 2u);
  EXPECT_EQ(flushed[0].minute, kT0 + kMinuteMs);
  EXPECT_EQ(flushed[0].samples, 1);
  EXPECT_THAT(telemetry_.Flush(), IsEmpty());
}

TEST_F(TelemetryTest, ReEnumerationKeepsStateByUuidAndClosesGpusThatLeft) {
  gpu::GpuSample s = Healthy(0);
  s.pcie_width = 8;
  Feed(s);  // GPU-0 degraded; GPU-1 healthy
  // GPU-0 now enumerates as index 1; GPU-1 is gone; GPU-2 is new.
  gpu::Fleet fleet;
  gpu::GpuInfo moved = Info(0);
  moved.index = 1;
  gpu::GpuInfo added = Info(2);
  added.index = 0;
  fleet.gpus = {added, moved};
  telemetry_.SetFleet(fleet);

  ASSERT_NE(telemetry_.Latest(1), nullptr);
  EXPECT_EQ(*telemetry_.Latest(1)->pcie_width, 8);
  EXPECT_EQ(telemetry_.Latest(0), nullptr);

  gpu::GpuSample again = Healthy(now_);
  again.pcie_width = 8;
  IngestResult r = telemetry_.Ingest(Round(now_, {{0, Healthy(now_)}, {1, again}, {5, again}}));
  EXPECT_THAT(r.events, IsEmpty());  // GPU-0's degraded link was already reported
  ASSERT_EQ(r.rollups.size(), 1u);
  EXPECT_EQ(r.rollups[0].uuid, "GPU-1");
  EXPECT_EQ(r.rollups[0].samples, 1);
  EXPECT_EQ(telemetry_.Recent(1, 10).size(), 2u);
}

TEST(RecordsConvertTest, GpuRecordCarriesTheStaticFactsAndTheirJson) {
  gpu::GpuInfo info = Info(3);
  info.serial = "1650123456789";
  info.memory_total_bytes = 80ull << 30;
  store::GpuRecord r = ToGpuRecord(info, kT0);
  EXPECT_EQ(r.uuid, "GPU-3");
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.name, "NVIDIA Test");
  EXPECT_EQ(r.serial, "1650123456789");
  EXPECT_EQ(r.pci_bus_id, info.pci_bus_id);
  EXPECT_EQ(r.memory_total_bytes, 80ull << 30);
  EXPECT_EQ(r.first_seen, kT0);
  EXPECT_EQ(r.last_seen, kT0);
  nlohmann::json j = nlohmann::json::parse(r.info_json);
  EXPECT_EQ(j["uuid"], "GPU-3");
}

}  // namespace
}  // namespace gpuherd::telemetry
