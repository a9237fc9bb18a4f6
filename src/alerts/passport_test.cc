#include "alerts/passport.h"

#include <gtest/gtest.h>

namespace gpuherd::alerts {
namespace {

constexpr TimeMs kT0 = 1767225600000;  // 2026-01-01T00:00:00Z

store::GpuRecord Gpu(std::string serial = "1650123456789") {
  store::GpuRecord g;
  g.uuid = "GPU-1111";
  g.name = "NVIDIA A100-SXM4-40GB";
  g.serial = std::move(serial);
  g.first_seen = kT0;
  g.last_seen = kT0 + 90 * kHourMs;
  return g;
}

std::vector<store::EventRecord> Events() {
  return {
      {1, kT0 + 1000, "gpu.xid", store::Severity::kCritical, "GPU-1111", "XID 48: ...", R"({"xid":48})"},
      {2, kT0 + 2000, "gpu.found", store::Severity::kInfo, "GPU-1111", "answers again", "{}"},
      {3, kT0 + 3000, "gpu.pcie", store::Severity::kWarning, "GPU-1111", "x8 of x16", "{}"},
      {4, kT0 + 4000, "gpu.xid", store::Severity::kWarning, "GPU-2222", "another card", R"({"xid":13})"},
      {5, kT0 + 500, "gpu.retired", store::Severity::kWarning, "GPU-1111", "row remapped", "{}"},
  };
}

std::vector<store::BurnInRecord> BurnIns() {
  store::BurnInRecord b;
  b.id = 7;
  b.gpu_uuid = "GPU-1111";
  b.level = 2;
  b.finished = kT0 + 9000;
  b.outcome = "passed";
  b.verdict = "healthy";
  b.score = 94;
  b.json = R"({"rates":{"fp32_tflops":18.5,"memtest_gbs":1200}})";
  return {b};
}

std::vector<store::HealthTransitionRecord> Transitions() {
  return {
      {1, kT0 + 1000, "GPU-1111", "in_service", "quarantined", "XID 48", R"([{"xid":48}])", false},
      {2, kT0 + 2000, "GPU-1111", "quarantined", "requalifying", "burn-in", "[]", false},
      {3, kT0 + 9000, "GPU-1111", "requalifying", "in_service", "burn-in 7 passed", "[]", false},
      {4, kT0 + 9500, "GPU-1111", "in_service", "suspect", "would suspect", "[]", true},
  };
}

TEST(PassportTest, BuiltFromStoredRecords) {
  Passport p = BuildPassport(Gpu(), Events(), BurnIns(), Transitions(), 5400, "node1");
  EXPECT_EQ(p.key, "1650123456789");
  EXPECT_EQ(p.uuid, "GPU-1111");
  EXPECT_DOUBLE_EQ(p.hours_in_service, 90.0);
  ASSERT_EQ(p.incidents.size(), 3u);  // not the found event, not the other card's XID
  EXPECT_EQ(p.incidents[0].kind, "remapped_rows");
  EXPECT_EQ(p.incidents[1].kind, "xid");
  EXPECT_EQ(p.incidents[1].xid, 48);
  EXPECT_EQ(p.incidents[2].kind, "pcie");
  ASSERT_EQ(p.burnins.size(), 1u);
  EXPECT_EQ(p.burnins[0].score, 94);
  EXPECT_DOUBLE_EQ(p.burnins[0].rates["fp32_tflops"].get<double>(), 18.5);
  ASSERT_EQ(p.states.size(), 4u);
  EXPECT_EQ(p.state, "in_service");  // the shadow decision was not carried out
  EXPECT_EQ(p.requalifications_passed, 1);
  EXPECT_EQ(p.states[0].evidence[0]["xid"], 48);
}

TEST(PassportTest, KeyedByUuidWhenTheCardHasNoSerial) {
  for (const char* none : {"", "N/A", "[N/A]"}) {
    Passport p = BuildPassport(Gpu(none), {}, {}, {}, 0, "node1");
    EXPECT_EQ(p.key, "GPU-1111");
    EXPECT_EQ(p.serial, "");
  }
}

TEST(PassportTest, JsonRoundTripAndMergeFollowTheCard) {
  Passport old_home = BuildPassport(Gpu(), Events(), BurnIns(), Transitions(), 6000, "node1");
  auto parsed = PassportFromJson(nlohmann::json::parse(PassportToJson(old_home).dump()));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(PassportToJson(*parsed), PassportToJson(old_home));

  // The card moves: new UUID slot, same serial, a new machine.
  store::GpuRecord moved = Gpu();
  moved.first_seen = kT0 + 100 * kHourMs;
  moved.last_seen = kT0 + 110 * kHourMs;
  Passport here = BuildPassport(moved, {{9, kT0 + 105 * kHourMs, "gpu.thermal", store::Severity::kWarning,
                                         "GPU-1111", "throttled", "{}"}},
                                {}, {}, 600, "node2");
  auto merged = MergePassport(here, *parsed);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->first_seen, kT0);
  EXPECT_DOUBLE_EQ(merged->hours_in_service, 110.0);
  EXPECT_EQ(merged->incidents.size(), 4u);
  EXPECT_EQ(merged->incidents.back().kind, "throttling");
  EXPECT_EQ(merged->hosts, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(merged->requalifications_passed, 1);
  // Importing the same passport twice adds no duplicate history.
  auto twice = MergePassport(*merged, *parsed);
  EXPECT_EQ(twice->incidents.size(), 4u);
  EXPECT_EQ(twice->burnins.size(), 1u);

  Passport other = old_home;
  other.key = "999";
  EXPECT_FALSE(MergePassport(here, other).ok());
}

TEST(PassportTest, HostileImportsAreRefused) {
  Passport p = BuildPassport(Gpu(), Events(), BurnIns(), Transitions(), 60, "node1");
  nlohmann::json good = PassportToJson(p);
  EXPECT_FALSE(PassportFromJson(nlohmann::json::array()).ok());
  auto bad = good;
  bad["format"] = 99;
  EXPECT_FALSE(PassportFromJson(bad).ok());
  bad = good;
  bad["key"] = "";
  EXPECT_FALSE(PassportFromJson(bad).ok());
  bad = good;
  bad["model"] = std::string("A100\x1b[2J", 9);
  EXPECT_FALSE(PassportFromJson(bad).ok());
  bad = good;
  bad["model"] = std::string(10000, 'x');
  EXPECT_FALSE(PassportFromJson(bad).ok());
  bad = good;
  bad["incidents"] = "lots";
  EXPECT_FALSE(PassportFromJson(bad).ok());
  bad = good;
  bad["incidents"][0]["kind"] = 5;
  EXPECT_FALSE(PassportFromJson(bad).ok());
  bad = good;
  bad["hours_in_service"] = -3;
  EXPECT_FALSE(PassportFromJson(bad).ok());
}

TEST(PassportTest, HtmlEscapesEverything) {
  Passport p = BuildPassport(Gpu(), {{1, kT0, "gpu.xid", store::Severity::kWarning, "GPU-1111",
                                      "<script>alert(1)</script>", R"({"xid":13})"}},
                             BurnIns(), Transitions(), 60, "node1");
  std::string html = RenderPassportHtml(p);
  EXPECT_EQ(html.find("<script>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(html.find("1650123456789"), std::string::npos);
  EXPECT_NE(html.find("1 passed, 0 failed"), std::string::npos);
  EXPECT_NE(html.find("shadow: not carried out"), std::string::npos);
}

}  // namespace
}  // namespace gpuherd::alerts
