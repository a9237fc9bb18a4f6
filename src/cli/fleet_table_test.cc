#include "cli/fleet_table.h"

#include <gtest/gtest.h>

#include "cli/table.h"

namespace gpuherd::cli {
namespace {

using nlohmann::json;

json Fleet() {
  return json::parse(R"({
    "simulated": true, "sim_reason": "asked for with --sim 2",
    "gpus": [
      {"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total_bytes": 85899345920,
       "max_pcie_gen": 5, "max_pcie_width": 16, "temp_slowdown_c": 87, "state": "ok",
       "sample": {"gpu_util_pct": 87, "mem_used_bytes": 42949672960, "mem_total_bytes": 85899345920,
                  "temp_c": 67, "power_w": 612, "power_limit_w": 700, "pcie_gen": 5, "pcie_width": 16,
                  "throttle": "", "xids": []}},
      {"index": 1, "name": "NVIDIA GeForce RTX 3090", "memory_total_bytes": 25769803776,
       "max_pcie_gen": 4, "max_pcie_width": 16, "state": "lost",
       "sample": {"gpu_util_pct": 0, "temp_c": 35, "pcie_gen": 4, "pcie_width": 8, "fan_pct": 30,
                  "xids": [{"xid": 79}]}}
    ]})");
}

TEST(FleetTableTest, ShowsSimulationBannerAndReadings) {
  std::string out = RenderFleetTable(Fleet().get<api::Fleet>(), false);
  EXPECT_EQ(out.rfind("SIMULATED FLEET (asked for with --sim 2)", 0), 0u) << out;
  EXPECT_NE(out.find("87%"), std::string::npos);
  EXPECT_NE(out.find("40.0/80.0 GiB"), std::string::npos);
  EXPECT_NE(out.find("612/700 W"), std::string::npos);
  EXPECT_NE(out.find("Gen5 x16 "), std::string::npos);
}

TEST(FleetTableTest, MarksDowntrainedLinkAndXid) {
  json fleet = Fleet();
  fleet["gpus"][1]["state"] = "ok";
  std::string out = RenderFleetTable(fleet.get<api::Fleet>(), false);
  EXPECT_NE(out.find("Gen4 x8 ! (max Gen4 x16)"), std::string::npos) << out;
  EXPECT_NE(out.find("ok xid 79"), std::string::npos) << out;
  // An absent reading is "-", never 0: the H100 has no fan.
  std::string h100 = out.substr(out.find("H100"), out.find('\n', out.find("H100")) - out.find("H100"));
  EXPECT_EQ(h100.find("0%  "), std::string::npos) << h100;
}

TEST(FleetTableTest, RealFleetHasNoBanner) {
  json fleet = Fleet();
  fleet["simulated"] = false;
  EXPECT_EQ(RenderFleetTable(fleet.get<api::Fleet>(), false).find("SIMULATED"), std::string::npos);
}

// A lost GPU's readings are "–", never the numbers it gave before it was lost.
TEST(FleetTableTest, LostGpuShowsNoStaleReadings) {
  json fleet = Fleet();
  fleet["gpus"][1]["last_error"] = "GPU is lost";
  fleet["gpus"][1]["last_seen"] = 1764763200000;  // 2025-12-03 12:00:00 UTC
  std::string out = RenderFleetTable(fleet.get<api::Fleet>(), false);
  std::string row = out.substr(out.find("RTX 3090"), out.find('\n', out.find("RTX 3090")) - out.find("RTX 3090"));
  EXPECT_EQ(row.find("35°C"), std::string::npos) << row;
  EXPECT_EQ(row.find("30%"), std::string::npos) << row;
  EXPECT_EQ(row.find("Gen4"), std::string::npos) << row;
  EXPECT_NE(row.find("–"), std::string::npos) << row;
  EXPECT_NE(row.find("lost"), std::string::npos) << row;
  EXPECT_NE(out.find("GPU 1 lost: GPU is lost (last answered 2025-12-03T12:00:00 UTC)"), std::string::npos) << out;
  std::string csv = RenderFleetCsv(fleet.get<api::Fleet>());
  std::string line = csv.substr(csv.find("\n1,"));
  EXPECT_EQ(line.find("35"), std::string::npos) << line;
}

TEST(FleetTableTest, ShowsJobsHealthAndWhyDrained) {
  json fleet = Fleet();
  fleet["gpus"][0]["state"] = "drained";
  fleet["gpus"][0]["drained"] = true;
  fleet["gpus"][0]["drain_reason"] = "fan noise";
  fleet["gpus"][0]["drain_origin"] = "operator";
  fleet["gpus"][0]["health_score"] = 92;
  fleet["gpus"][0]["health_verdict"] = "healthy";
  fleet["gpus"][0]["jobs"] = json::parse(R"([
    {"id": 12, "user": "alice", "name": "a", "gpu_twentieths": 10, "share_bytes": 8589934592, "used_bytes": 3328599654},
    {"id": 13, "user": "bob", "name": "b", "gpu_twentieths": 10, "share_bytes": 8589934592},
    {"id": 14, "user": "carol", "name": "c", "gpu_twentieths": 20, "share_bytes": 0, "used_bytes": 32212254720}])");
  std::string out = RenderFleetTable(fleet.get<api::Fleet>(), false);
  EXPECT_NE(out.find("92 healthy"), std::string::npos) << out;
  EXPECT_NE(out.find("#12 alice 3.1/8.0G, #13 bob ?/8.0G, #14 carol 30.0G"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU 0 drained (operator): fan noise"), std::string::npos) << out;
  std::string csv = RenderFleetCsv(fleet.get<api::Fleet>());
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "index,uuid,name,state,util_pct,mem_used_mib,mem_total_mib,temp_c,power_w,power_limit_w,pcie_gen,"
            "pcie_width,fan_pct,throttle,health_score,health_verdict,drained,drain_origin,drain_reason,failure_risk,jobs");
  EXPECT_NE(csv.find("\n0,,NVIDIA H100 80GB HBM3,drained,87,40960,81920,67,612.0,700,5,16,,,92,healthy,yes,operator,fan noise,,"
                     "12:alice:3174:8192;13:bob::8192;14:carol:30720:0\n"),
            std::string::npos)
      << csv;
}

// `top` in an 80-column terminal: the table's rows fit, dropping the columns
// an operator glances at least, never the GPU, its load, its state or jobs.
TEST(FleetTableTest, FitsTheTerminalByDroppingTheLeastNeededColumns) {
  json fleet = Fleet();
  fleet["gpus"][0]["health_score"] = 92;
  fleet["gpus"][0]["health_verdict"] = "healthy";
  fleet["gpus"][0]["jobs"] = json::parse(R"([{"id": 12, "user": "alice", "name": "a", "gpu_twentieths": 20}])");
  const api::Fleet f = fleet.get<api::Fleet>();
  const std::string wide = RenderFleetTable(f, false, /*bars=*/true);
  EXPECT_NE(wide.find("THROTTLE"), std::string::npos) << wide;
  EXPECT_NE(wide.find("NVIDIA H100 80GB HBM3"), std::string::npos) << wide;
  EXPECT_EQ(RenderFleetTable(f, false, true, 1000), wide);  // room for all: as without a width
  for (size_t width : {80u, 100u, 120u}) {
    const std::string out = RenderFleetTable(f, false, true, width);
    const std::string table = out.substr(0, out.find("\n\n"));
    size_t begin = 0;
    while (begin < table.size()) {
      size_t end = std::min(table.find('\n', begin), table.size());
      EXPECT_LE(DisplayWidth(table.substr(begin, end - begin)), width) << table.substr(begin, end - begin);
      begin = end + 1;
    }
    for (const char* kept : {"IDX", "UTIL", "MEMORY", "STATE", "JOBS", "#12 alice", "H100 80GB HBM3", "87%"}) {
      EXPECT_NE(out.find(kept), std::string::npos) << width << ": " << kept << "\n" << out;
    }
  }
  const std::string narrow = RenderFleetTable(f, false, true, 80);
  EXPECT_EQ(narrow.find("THROTTLE"), std::string::npos) << narrow;
  EXPECT_EQ(narrow.find("FAN"), std::string::npos) << narrow;
  EXPECT_EQ(narrow.find("NVIDIA"), std::string::npos) << narrow;
}

// Self-healing's state shows where a GPU is not plainly in service, with why
// and since when; in service says nothing more.
TEST(FleetTableTest, ShowsSelfHealingStateAndWhy) {
  json fleet = Fleet();
  fleet["gpus"][0]["health_state"] = {{"state", "quarantined"}, {"since", 1800000000000},
                                      {"reason", "XID 48 (double-bit ECC error)"}, {"evidence", json::array()},
                                      {"requalifications", 0}};
  fleet["gpus"][1]["state"] = "ok";
  fleet["gpus"][1]["health_state"] = {{"state", "in_service"}, {"since", 0}, {"reason", ""},
                                      {"evidence", json::array()}, {"requalifications", 0}};
  std::string out = RenderFleetTable(fleet.get<api::Fleet>(), false);
  EXPECT_NE(out.find("ok quarantined"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU 0 quarantined since 2027-01-15T08:00:00 UTC: XID 48 (double-bit ECC error)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("in_service"), std::string::npos) << out;
  EXPECT_EQ(out.find("GPU 1 "), std::string::npos) << out;
}

TEST(FleetTableTest, CsvQuotesAndEscapesUserText) {
  json fleet = Fleet();
  fleet["gpus"][0]["drained"] = true;
  fleet["gpus"][0]["drain_reason"] = "say \"hi\", then\x1b[31mred";
  std::string csv = RenderFleetCsv(fleet.get<api::Fleet>());
  EXPECT_NE(csv.find(",\"say \"\"hi\"\", then\\e[31mred\","), std::string::npos) << csv;
  EXPECT_EQ(csv.find('\x1b'), std::string::npos);
}

// Issue 29: a user's name in the JOBS column, drawn with colours on (a
// terminal): only the table's own colour sequences are raw.
TEST(FleetTableTest, UserTextIsEscapedEvenWithColoursOn) {
  json fleet = Fleet();
  fleet["gpus"][0]["jobs"] = json::parse(R"([
    {"id": 12, "user": "eve\u001b[8m", "name": "a", "gpu_twentieths": 20, "share_bytes": 0}])");
  fleet["gpus"][0]["health_score"] = 50;
  fleet["gpus"][0]["health_verdict"] = "degraded\u009b2J";
  const std::string out = RenderFleetTable(fleet.get<api::Fleet>(), /*color=*/true);
  EXPECT_NE(out.find("#12 eve\\e[8m"), std::string::npos) << out;
  EXPECT_NE(out.find("50 degraded\\u009b2J"), std::string::npos) << out;
  EXPECT_EQ(out.find("\x1b[8m"), std::string::npos) << out;
  EXPECT_EQ(out.find("\xc2\x9b"), std::string::npos) << out;
}

TEST(FleetTableTest, SelectsGpusByIndexOrUuidAndRefusesUnknownOnes) {
  json fleet = Fleet();
  fleet["gpus"][1]["uuid"] = "GPU-abc";
  api::Fleet f = fleet.get<api::Fleet>();
  ASSERT_TRUE(SelectGpus("GPU-abc", &f).ok());
  ASSERT_EQ(f.gpus.size(), 1u);
  EXPECT_EQ(f.gpus[0].info.index, 1);
  f = fleet.get<api::Fleet>();
  ASSERT_TRUE(SelectGpus("1,0", &f).ok());
  ASSERT_EQ(f.gpus.size(), 2u);
  EXPECT_EQ(f.gpus[0].info.index, 0);  // fleet order
  f = fleet.get<api::Fleet>();
  Status bad = SelectGpus("0,7", &f);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("no GPU '7'"), std::string::npos) << bad.message();
  EXPECT_EQ(SelectGpus("0,", &f).code(), Code::kInvalidArgument);
}

TEST(FleetTableTest, SortsByKeyWithMissingReadingsLast) {
  json fleet = Fleet();
  fleet["gpus"].push_back(fleet["gpus"][0]);
  fleet["gpus"][2]["index"] = 2;
  fleet["gpus"][2]["sample"]["gpu_util_pct"] = 95;
  fleet["gpus"][2]["sample"]["temp_c"] = 50;
  api::Fleet f = fleet.get<api::Fleet>();
  auto order = [&] {
    std::vector<int> idx;
    for (const auto& g : f.gpus) idx.push_back(g.info.index);
    return idx;
  };
  SortGpus("util", &f);
  EXPECT_EQ(order(), (std::vector<int>{2, 0, 1}));  // GPU 1 is lost: no reading, last
  SortGpus("temp", &f);
  EXPECT_EQ(order(), (std::vector<int>{0, 2, 1}));
  SortGpus("index", &f);
  EXPECT_EQ(order(), (std::vector<int>{0, 1, 2}));
}

TEST(FleetTableTest, BarsFillInEighths) {
  EXPECT_EQ(Bar(0, 4), "[    ]");
  EXPECT_EQ(Bar(100, 4), "[████]");
  EXPECT_EQ(Bar(50, 4), "[██  ]");
  EXPECT_EQ(Bar(3.125, 4), "[▏   ]");  // 1/32 of 4 cells: one eighth of a cell
  EXPECT_EQ(Bar(250, 2), "[██]");
  EXPECT_EQ(Bar(-3, 2), "[  ]");
  EXPECT_EQ(DisplayWidth(Bar(37, 10)), 12u);
  std::string top = RenderFleetTable(Fleet().get<api::Fleet>(), false, /*bars=*/true);
  EXPECT_NE(top.find("[████████▊ ]  87%"), std::string::npos) << top;
  EXPECT_NE(top.find("[█████     ] 40.0/80.0 GiB"), std::string::npos) << top;
}

}  // namespace
}  // namespace gpuherd::cli
