// The dashboard's files and its /v1 endpoints through the real daemon on a
// simulated fleet, over TCP as a browser reaches them.
#include "daemon/dashboard.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "daemon/service_test_fixture.h"
#include "http/client.h"
#include "http/token.h"
#include "daemon/daemon.h"
#include "daemon/routes/routes.h"
#include "pipeline/report.h"
#include "store/store.h"

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DashboardTest : public DaemonServiceTest {
 protected:
  void StartDaemon(int sim = 4) { DaemonServiceTest::StartDaemon(Options(sim, /*tcp=*/true)); }

  // Over TCP, as the browser asks; with the token when `token`.
  http::ClientResponse Tcp(const std::string& method, const std::string& target, const std::string& body = "",
                          bool token = false) {
    std::map<std::string, std::string> headers;
    if (token) headers["Authorization"] = "Bearer " + *http::ReadToken(StateDir{home_.string()});
    http::Client client(http::Endpoint{"", "127.0.0.1", daemon_->tcp_port()});
    auto r = client.Request(method, target, body, headers);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : http::ClientResponse{};
  }
  // Over the unix socket: the caller is this process's user.
  http::ClientResponse Unix(const std::string& method, const std::string& target, const std::string& body = "") {
    return Call(method, target, body);
  }
  json Get(const std::string& target) { return json::parse(Tcp("GET", target).body); }
};

TEST_F(DashboardTest, PageAndAssetsAreServedWithoutTheToken) {
  StartDaemon(2);
  auto page = Tcp("GET", "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(page.body.find("/assets/dashboard.js"), std::string::npos);
  EXPECT_NE(page.headers["content-security-policy"].find("frame-ancestors 'none'"), std::string::npos);
  EXPECT_EQ(Tcp("GET", "/index.html").body, page.body);

  for (const DashboardFile& file : DashboardFiles()) {
    auto r = Tcp("GET", std::string(file.path));
    EXPECT_EQ(r.status, 200) << file.path;
    EXPECT_EQ(r.body, file.body) << file.path;
    EXPECT_EQ(r.headers["content-type"], file.content_type) << file.path;
  }
  auto script = Tcp("GET", "/assets/dashboard.js");
  EXPECT_NE(script.body.find("/v1/gpus/history"), std::string::npos);
  // uPlot is there whenever the build had npm, as the reports' charts are.
  EXPECT_EQ(Tcp("GET", "/assets/uPlot.min.js").body.empty(), !pipeline::EmbeddedChartLibrary().available());

  EXPECT_EQ(Tcp("GET", "/assets/nothing.js").status, 404);
  auto post = Tcp("POST", "/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.body.find("token"), std::string::npos);
  // The API is untouched by the dashboard's routes.
  EXPECT_EQ(Tcp("GET", "/v2/x").status, 404);
  EXPECT_EQ(Tcp("GET", "/v1/gpus/1").status, 200);
}

TEST_F(DashboardTest, HistoryGivesEveryGpusColumnsAndOnlyNewReadingsAfterSince) {
  StartDaemon(3);
  ASSERT_TRUE(WaitFor([&] { return Get("/v1/health")["rounds"].get<int>() >= 4; }));
  json h = Get("/v1/gpus/history?seconds=3600");
  ASSERT_EQ(h["gpus"].size(), 3u);
  EXPECT_EQ(h["interval_ms"], 100);
  int64_t last = 0;
  for (size_t i = 0; i < 3; ++i) {
    const json& g = h["gpus"][i];
    EXPECT_EQ(g["index"], i);
    const size_t n = g["time"].size();
    ASSERT_GE(n, 3u);
    for (const char* column : {"gpu_util_pct", "mem_used_pct", "temp_c", "power_w"}) {
      ASSERT_EQ(g[column].size(), n) << column;
    }
    for (size_t k = 1; k < n; ++k) EXPECT_LT(g["time"][k - 1].get<int64_t>(), g["time"][k].get<int64_t>());
    for (size_t k = 0; k < n; ++k) {
      EXPECT_GE(g["mem_used_pct"][k].get<double>(), 0);
      EXPECT_LE(g["mem_used_pct"][k].get<double>(), 100);
      EXPECT_GT(g["temp_c"][k].get<double>(), 0);
    }
    EXPECT_LE(g["time"][n - 1].get<int64_t>(), h["now"].get<int64_t>());
    last = std::max(last, g["time"][n - 1].get<int64_t>());
  }
  // Polling: after `since`, only what came later.
  json later = Get("/v1/gpus/history?since=" + std::to_string(last));
  for (const json& g : later["gpus"]) {
    for (const json& t : g["time"]) EXPECT_GT(t.get<int64_t>(), last);
  }
  // A short window holds only its own readings.
  json short_window = Get("/v1/gpus/history?seconds=1");
  for (const json& g : short_window["gpus"]) {
    EXPECT_LE(g["time"].size(), 12u);
    for (const json& t : g["time"]) EXPECT_GE(t.get<int64_t>(), short_window["now"].get<int64_t>() - 1000);
  }
  EXPECT_EQ(Tcp("GET", "/v1/gpus/history?seconds=0").status, 400);
  EXPECT_EQ(Tcp("GET", "/v1/gpus/history?seconds=lots").status, 400);
  EXPECT_EQ(Tcp("GET", "/v1/gpus/history?since=x").status, 400);
  // since + 1 overflowed (UBSan); every integer parameter has a range now.
  auto huge = Tcp("GET", "/v1/gpus/history?since=9223372036854775807");
  EXPECT_EQ(huge.status, 400);
  EXPECT_NE(huge.body.find("from 0 to 253402300799000"), std::string::npos) << huge.body;
  EXPECT_EQ(Tcp("GET", "/v1/gpus/history?since=-9223372036854775808").status, 400);
}

// After a restart the ring is empty; the stored per-minute means fill the
// hour before it.
TEST_F(DashboardTest, HistoryBeforeTheRingComesFromStoredMinutes) {
  StartDaemon(2);
  const std::string uuid = Get("/v1/gpus")["gpus"][1]["uuid"];
  StopDaemon();
  {
    auto store = store::Store::Open((home_ / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store::WriteBatch batch;
    const TimeMs now = clock_->Now();
    for (int m = 1; m <= 3; ++m) {
      store::RollupRecord r;
      r.uuid = uuid;
      r.minute = (now / 60000 - 10 * m) * 60000;  // 10, 20 and 30 minutes ago
      r.samples = 12;
      r.stat(store::RollupMetric::kGpuUtil) = store::RollupStat{10.0 * m, 10.0 * m + 1, 10.0 * m + 2};
      r.stat(store::RollupMetric::kTempC) = store::RollupStat{40, 50.04, 60};  // shown as 50.0
      r.stat(store::RollupMetric::kPowerW) = store::RollupStat{100, 150, 200};
      batch.rollups.push_back(r);
    }
    ASSERT_TRUE((*store)->Commit(&batch).ok());
  }
  StartDaemon(2);
  ASSERT_TRUE(WaitFor([&] { return Get("/v1/health")["rounds"].get<int>() >= 2; }));
  json h = Get("/v1/gpus/history");
  const json& g = h["gpus"][1];
  ASSERT_GE(g["time"].size(), 4u);
  // Oldest first: the minute 30 min ago, then 20, then 10, then the ring.
  EXPECT_EQ(g["gpu_util_pct"][0].get<double>(), 31);
  EXPECT_EQ(g["gpu_util_pct"][1].get<double>(), 21);
  EXPECT_EQ(g["gpu_util_pct"][2].get<double>(), 11);
  EXPECT_EQ(g["temp_c"][0].get<double>(), 50);
  EXPECT_TRUE(g["mem_used_pct"][0].is_null());  // not stored for those minutes
  EXPECT_GT(g["time"][3].get<int64_t>(), h["now"].get<int64_t>() - 60000);
  // GPU 0 had no stored minutes: the ring alone.
  for (const json& t : h["gpus"][0]["time"]) EXPECT_GT(t.get<int64_t>(), h["now"].get<int64_t>() - 60000);
  // Polling never repeats the stored minutes.
  json later = Get("/v1/gpus/history?since=" + std::to_string(g["time"][2].get<int64_t>()));
  EXPECT_LT(later["gpus"][1]["time"].size(), g["time"].size());
}

// Ranges past an hour come from the stored minutes, averaged into buckets
// of whole minutes (about 360 per range); minutes outside the range are left out.
TEST_F(DashboardTest, LongRangesComeFromStoredMinutesInBuckets) {
  StartDaemon(2);
  const std::string uuid = Get("/v1/gpus")["gpus"][1]["uuid"];
  StopDaemon();
  const TimeMs now = clock_->Now();
  const TimeMs minute_now = now / 60000 * 60000;
  {
    auto store = store::Store::Open((home_ / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store::WriteBatch batch;
    auto add = [&](TimeMs minute, double util, double mem_mib) {
      store::RollupRecord r;
      r.uuid = uuid;
      r.minute = minute;
      r.samples = 12;
      r.stat(store::RollupMetric::kGpuUtil) = store::RollupStat{util, util, util};
      r.stat(store::RollupMetric::kMemUsedMib) = store::RollupStat{mem_mib, mem_mib, mem_mib};
      batch.rollups.push_back(r);
    };
    // Two minutes of one 28-minute bucket 3 days ago, one minute 2 hours ago,
    // one 8 days ago (outside 7 d).
    const TimeMs bucket = 28 * 60000;
    const TimeMs three_days = (minute_now - 3 * 24 * 3600000) / bucket * bucket;
    add(three_days, 20, 1024);
    add(three_days + 60000, 40, 1024);
    add(minute_now - 2 * 3600000, 90, 2048);
    add(minute_now - 8 * 24 * 3600000, 77, 0);
    ASSERT_TRUE((*store)->Commit(&batch).ok());
  }
  StartDaemon(2);
  json week = Get("/v1/gpus/history?seconds=604800");
  EXPECT_EQ(week["source"], "rollups");
  EXPECT_EQ(week["interval_ms"], 28 * 60000);
  const json& g = week["gpus"][1];
  // The daemon's own first run stored the minute it ran: a bucket of now, after ours.
  ASSERT_GE(g["time"].size(), 2u) << g.dump();
  ASSERT_LE(g["time"].size(), 3u) << g.dump();
  EXPECT_EQ(g["gpu_util_pct"][0], 30);  // the mean of the bucket's two minutes
  EXPECT_EQ(g["gpu_util_pct"][1], 90);
  for (const json& v : g["gpu_util_pct"]) EXPECT_NE(v, 77);  // 8 days ago: outside the week
  EXPECT_TRUE(g["temp_c"][0].is_null());  // not stored: absent, never 0
  const double total_mib = Get("/v1/gpus")["gpus"][1]["memory_total_bytes"].get<double>() / 1048576.0;
  EXPECT_NEAR(g["mem_used_pct"][1].get<double>(), 2048 * 100.0 / total_mib, 0.06);
  for (const json& t : g["time"]) {
    EXPECT_GE(t.get<int64_t>(), week["from"].get<int64_t>());
    EXPECT_LE(t.get<int64_t>(), week["now"].get<int64_t>() + 14 * 60000);
  }
  for (const json& t : week["gpus"][0]["time"]) {  // GPU 0: only the daemon's own minutes
    EXPECT_GT(t.get<int64_t>(), week["now"].get<int64_t>() - 60 * 60000);
  }
  // 6 h: one-minute buckets, only the minute 2 hours ago.
  json six = Get("/v1/gpus/history?seconds=21600");
  EXPECT_EQ(six["interval_ms"], 60000);
  ASSERT_GE(six["gpus"][1]["gpu_util_pct"].size(), 1u);
  EXPECT_EQ(six["gpus"][1]["gpu_util_pct"][0], 90);
  EXPECT_EQ(six["gpus"][1]["time"][0], minute_now - 2 * 3600000 + 30000);  // the minute's middle
  // An hour: the readings, as before.
  EXPECT_EQ(Get("/v1/gpus/history?seconds=3600")["source"], "readings");
  EXPECT_EQ(Tcp("GET", "/v1/gpus/history?seconds=604801").status, 400);
}

// Ranges over an hour are read off the event loop (a week of 64 GPUs' minutes
// held it for 3 s): which requests go that way, and that the answer needs
// nothing but the fleet, the clock and a read-only connection of its own
// beside the daemon's writing one.
TEST_F(DashboardTest, LongRangesAreReadOffTheLoopWithTheirOwnConnection) {
  auto request = [](const std::string& method, const std::string& path, std::map<std::string, std::string> query) {
    http::Request r;
    r.method = method;
    r.path = path;
    r.query = std::move(query);
    return r;
  };
  EXPECT_EQ(routes::LongHistorySeconds(request("GET", "/v1/gpus/history", {{"seconds", "604800"}})), 604800);
  EXPECT_EQ(routes::LongHistorySeconds(request("HEAD", "/v1/gpus/history", {{"seconds", "7200"}})), 7200);
  // The readings (an hour or less), a malformed range and other routes stay on the loop.
  EXPECT_FALSE(routes::LongHistorySeconds(request("GET", "/v1/gpus/history", {})));
  EXPECT_FALSE(routes::LongHistorySeconds(request("GET", "/v1/gpus/history", {{"seconds", "3600"}})));
  EXPECT_FALSE(routes::LongHistorySeconds(request("GET", "/v1/gpus/history", {{"seconds", "604801"}})));
  EXPECT_FALSE(routes::LongHistorySeconds(request("GET", "/v1/gpus/history", {{"seconds", "lots"}})));
  EXPECT_FALSE(routes::LongHistorySeconds(request("POST", "/v1/gpus/history", {{"seconds", "86400"}})));
  EXPECT_FALSE(routes::LongHistorySeconds(request("GET", "/v1/gpus/0/rollups", {{"seconds", "86400"}})));

  StartDaemon(1);
  const json fleet = Get("/v1/gpus")["gpus"][0];
  StopDaemon();
  auto writer = store::Store::Open((home_ / "state.db").string());
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  const TimeMs minute = clock_->Now() / 60000 * 60000 - 3 * 3600000;
  store::WriteBatch batch;
  store::RollupRecord r;
  r.uuid = fleet["uuid"];
  r.minute = minute;
  r.samples = 12;
  r.stat(store::RollupMetric::kGpuUtil) = store::RollupStat{64, 64, 64};
  batch.rollups.push_back(r);
  ASSERT_TRUE((*writer)->Commit(&batch).ok());
  writer->reset();
  StartDaemon(1);  // the writer now; the reader opens beside it
  auto reader = store::Store::Open((home_ / "state.db").string(), {.read_only = true});
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  routes::LongHistory inputs;
  inputs.now = clock_->Now();
  inputs.seconds = 6 * 3600;
  inputs.gpus.resize(1);
  inputs.gpus[0].index = 0;
  inputs.gpus[0].uuid = fleet["uuid"];
  http::Response answer = routes::AnswerLongHistory(inputs, **reader);
  ASSERT_EQ(answer.status, 200) << answer.body;
  json h = json::parse(answer.body);
  EXPECT_EQ(h["source"], "rollups");
  ASSERT_GE(h["gpus"][0]["time"].size(), 1u) << h.dump();
  EXPECT_EQ(h["gpus"][0]["time"][0], minute + 30000);
  EXPECT_EQ(h["gpus"][0]["gpu_util_pct"][0], 64);
  // Through the daemon, the same minute.
  json six = Get("/v1/gpus/history?seconds=21600");
  EXPECT_EQ(six["gpus"][0]["gpu_util_pct"][0], 64) << six.dump();
}

// Each GPU lists its jobs (used against share for a fraction) and its latest
// burn-in's score; a whole-GPU job has no share.
TEST_F(DashboardTest, GpusListTheirJobsAndHealth) {
  StartDaemon(2);
  const std::string uuid0 = Get("/v1/gpus")["gpus"][0]["uuid"];
  const std::string uuid1 = Get("/v1/gpus")["gpus"][1]["uuid"];
  StopDaemon();
  {
    auto store = store::Store::Open((home_ / "state.db").string());
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store::WriteBatch batch;
    store::BurnInRecord run;
    run.gpu_uuid = uuid0;
    run.level = 1;
    run.started = clock_->Now() - 60000;
    run.finished = clock_->Now() - 1000;
    run.outcome = "passed";
    run.verdict = "degraded";
    run.score = 71;
    run.json = "{}";
    batch.burnin_runs.push_back(run);
    ASSERT_TRUE((*store)->Commit(&batch).ok());
  }
  StartDaemon(2);
  auto frac = Unix("POST", "/v1/jobs", json({{"command", {"sleep", "30"}}, {"gpus", 0.5}, {"gpu_mem", "4GiB"}}).dump());
  ASSERT_EQ(frac.status, 201) << frac.body;
  const int64_t frac_id = json::parse(frac.body)["id"];
  json fleet;
  json on;
  ASSERT_TRUE(WaitFor([&] {
    fleet = Get("/v1/gpus");
    for (const json& g : fleet["gpus"]) {
      for (const json& j : g["jobs"]) {
        if (j["id"] == frac_id && j.contains("used_bytes")) on = j;
      }
    }
    return !on.is_null();
  })) << fleet.dump();
  EXPECT_EQ(on["share_bytes"], uint64_t{4} << 30);
  EXPECT_EQ(on["used_bytes"], uint64_t{2} << 30);  // the simulated job's default: half its share
  EXPECT_EQ(on["gpu_twentieths"], 10);
  EXPECT_FALSE(on["user"].get<std::string>().empty());
  EXPECT_EQ(fleet["gpus"][0]["health_score"], 71);
  EXPECT_EQ(fleet["gpus"][0]["health_verdict"], "degraded");
  EXPECT_FALSE(fleet["gpus"][1].contains("health_score"));
  // One GPU's view carries the same.
  json one = Get("/v1/gpus/" + uuid0);
  EXPECT_EQ(one["health_score"], 71);
  EXPECT_TRUE(one["jobs"].is_array());
  (void)uuid1;
  EXPECT_EQ(Tcp("POST", "/v1/jobs/" + std::to_string(frac_id) + "/cancel", "", true).status, 200);
}

TEST_F(DashboardTest, JobMetricsAndActionsNeedTheTokenOverTcp) {
  StartDaemon(2);
  json spec = {{"command", {"sh", "-c",
                            "echo '{\"step\": 1, \"loss\": 0.9}' >> \"$GPUHERD_METRICS_FILE\"; "
                            "echo '{\"step\": 2, \"loss\": 0.4, \"acc\": 0.7}' >> \"$GPUHERD_METRICS_FILE\""}},
               {"gpus", 1}};
  auto submitted = Unix("POST", "/v1/jobs", spec.dump());
  ASSERT_EQ(submitted.status, 201) << submitted.body;
  const int64_t id = json::parse(submitted.body)["id"];
  const std::string job = "/v1/jobs/" + std::to_string(id);
  ASSERT_TRUE(WaitFor([&] { return Get(job)["state"] == "completed"; })) << Get(job).dump();
  // The lines a job wrote are its owner's: over TCP they need the token.
  EXPECT_EQ(Tcp("GET", job + "/metrics").status, 401);
  json metrics;
  ASSERT_TRUE(WaitFor([&] {
    metrics = json::parse(Tcp("GET", job + "/metrics", "", /*token=*/true).body);
    return metrics["metrics"].size() == 2;
  })) << metrics.dump();
  EXPECT_EQ(metrics["job_id"], id);
  EXPECT_EQ(metrics["metrics"][0]["step"], 1);
  EXPECT_EQ(metrics["metrics"][0]["values"]["loss"], 0.9);
  EXPECT_EQ(metrics["metrics"][1]["values"]["acc"], 0.7);
  EXPECT_EQ(Tcp("GET", "/v1/jobs/999/metrics").status, 404);
  EXPECT_EQ(Tcp("GET", "/v1/jobs/x/metrics").status, 400);

  // A job that waits behind one holding both GPUs: cancel without the
  // token is refused, with it done.
  auto blocker = Unix("POST", "/v1/jobs", json({{"command", {"sleep", "30"}}, {"gpus", 2}, {"mixed_models", true}}).dump());
  ASSERT_EQ(blocker.status, 201) << blocker.body;
  auto second = Unix("POST", "/v1/jobs", json({{"command", {"sleep", "30"}}, {"gpus", 1}}).dump());
  ASSERT_EQ(second.status, 201) << second.body;
  const std::string waiting = "/v1/jobs/" + std::to_string(json::parse(second.body)["id"].get<int64_t>());
  ASSERT_EQ(Get(waiting)["state"], "pending");
  const std::string cancel = waiting + "/cancel";
  auto refused = Tcp("POST", cancel);
  EXPECT_EQ(refused.status, 401);
  EXPECT_NE(refused.body.find("token"), std::string::npos);
  EXPECT_EQ(Tcp("POST", "/v1/gpus/0/drain", "{}").status, 401);
  auto done = Tcp("POST", cancel, "", /*token=*/true);
  EXPECT_EQ(done.status, 200) << done.body;
  EXPECT_EQ(json::parse(done.body)["state"], "cancelled");
  EXPECT_EQ(Tcp("POST", "/v1/gpus/0/drain", R"({"reason": "fan"})", true).status, 200);
  EXPECT_EQ(Get("/v1/gpus/0")["state"], "drained");
  const std::string stop_blocker = "/v1/jobs/" + std::to_string(json::parse(blocker.body)["id"].get<int64_t>()) + "/cancel";
  EXPECT_EQ(Tcp("POST", stop_blocker, "", true).status, 200);
}

TEST_F(DashboardTest, PipelineReportIsRenderedForWhoMaySeeTheRun) {
  StartDaemon(2);
  json body = {{"yaml", "name: tiny\ndefaults: {gpus: 0}\nsteps:\n  train:\n    matrix: {lr: [1, 2]}\n"
                        "    run: [\"sh\", \"-c\", \"echo '{\\\"step\\\": 1, \\\"loss\\\": 0.5}' >> $GPUHERD_METRICS_FILE\"]\n"},
               {"source", "tiny.yaml"},
               {"base_dir", home_.string()}};
  auto created = Unix("POST", "/v1/pipelines", body.dump());
  ASSERT_EQ(created.status, 201) << created.body;
  const int64_t id = json::parse(created.body)["id"];
  const std::string run = "/v1/pipelines/" + std::to_string(id);
  ASSERT_TRUE(WaitFor([&] { return json::parse(Tcp("GET", run, "", true).body)["state"] != "running"; }));

  auto csv = Tcp("GET", run + "/report?format=csv", "", true);
  ASSERT_EQ(csv.status, 200) << csv.body;
  EXPECT_EQ(csv.headers["content-type"], "text/csv; charset=utf-8");
  EXPECT_NE(csv.body.find("train[lr=1]"), std::string::npos) << csv.body;
  EXPECT_NE(csv.body.find("train[lr=2]"), std::string::npos) << csv.body;
  auto html = Tcp("GET", run + "/report", "", true);
  ASSERT_EQ(html.status, 200);
  EXPECT_EQ(html.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(html.headers["content-disposition"].find("pipeline-" + std::to_string(id) + "-report.html"),
            std::string::npos);
  EXPECT_EQ(Tcp("GET", run + "/report?format=pdf", "", true).status, 400);
  // Without the token, a TCP caller sees no one's pipeline runs.
  EXPECT_EQ(Tcp("GET", run + "/report?format=csv").status, 404);
  EXPECT_EQ(Tcp("GET", "/v1/pipelines/99/report", "", true).status, 404);
}

}  // namespace
}  // namespace gpuherd::daemon
