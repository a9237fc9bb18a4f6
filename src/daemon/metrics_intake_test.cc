#include "daemon/metrics_intake.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace gpuherd::daemon {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class MetricsIntakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpuherd_metrics_intake_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "metrics.jsonl").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << text;
  }

  MetricsIntake::Source Source(std::optional<pipeline::AnomalyConfig> anomalies = std::nullopt) {
    MetricsIntake::Source s;
    s.job_id = 7;
    s.run_id = 3;
    s.node_id = "train[lr=0.1]";
    s.attempt = 1;
    s.path = path_;
    s.anomalies = anomalies;
    return s;
  }

  static pipeline::AnomalyConfig NanStops() {
    pipeline::AnomalyConfig c;
    c.nan.enabled = true;
    c.nan.action = pipeline::AnomalyAction::kStop;
    return c;
  }

  fs::path dir_;
  std::string path_;
  MetricsIntake intake_;
  std::vector<store::MetricRecord> rows_;
  std::vector<MetricsIntake::Found> found_;
};

TEST_F(MetricsIntakeTest, CompleteLinesBecomeRowsAndAPartialLineWaits) {
  intake_.Watch(Source(), false);
  intake_.Poll(1000, 0, &rows_, &found_);  // no file yet
  EXPECT_TRUE(rows_.empty());
  Append("{\"time\": 1700000000.5, \"step\": 1, \"loss\": 0.9}\n{\"step\": 2, \"lo");
  intake_.Poll(2000, 0, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 1u);
  EXPECT_EQ(rows_[0].job_id, 7);
  EXPECT_EQ(rows_[0].run_id, 3);
  EXPECT_EQ(rows_[0].node_id, "train[lr=0.1]");
  EXPECT_EQ(rows_[0].step, 1);
  EXPECT_EQ(rows_[0].time, 1700000000500);
  EXPECT_EQ(json::parse(rows_[0].line_json)["loss"], 0.9);
  Append("ss\": 0.8}\n\nnot json\n{\"note\": \"no step\"}\n");
  intake_.Poll(3000, 0, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 3u);
  EXPECT_EQ(rows_[1].step, 2);
  EXPECT_EQ(json::parse(rows_[1].line_json)["loss"], 0.8);
  EXPECT_EQ(rows_[1].time, 3000);  // no "time" in the line: when it was read
  EXPECT_FALSE(rows_[2].step.has_value());
  EXPECT_TRUE(found_.empty());
}

TEST_F(MetricsIntakeTest, NanRaisesOnePipelineAnomalyPerEpisodeAndIsStoredAsNull) {
  intake_.Watch(Source(NanStops()), false);
  Append("{\"step\": 1, \"loss\": 0.5}\n{\"step\": 2, \"loss\": NaN}\n{\"step\": 3, \"loss\": NaN}\n");
  intake_.Poll(1000, 0, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 3u);
  EXPECT_TRUE(json::parse(rows_[1].line_json)["loss"].is_null());
  ASSERT_EQ(found_.size(), 1u);
  EXPECT_EQ(found_[0].job_id, 7);
  EXPECT_EQ(found_[0].anomaly.kind, pipeline::AnomalyKind::kNan);
  EXPECT_EQ(found_[0].anomaly.action, pipeline::AnomalyAction::kStop);
  EXPECT_NE(found_[0].anomaly.message.find("step 2"), std::string::npos) << found_[0].anomaly.message;
}

TEST_F(MetricsIntakeTest, CatchUpStoresOldLinesWithoutRaisingThemAgain) {
  Append("{\"step\": 1, \"loss\": NaN}\n");
  intake_.Watch(Source(NanStops()), /*catch_up=*/true);
  intake_.Poll(1000, 0, &rows_, &found_);
  EXPECT_EQ(rows_.size(), 1u);
  EXPECT_TRUE(found_.empty());
  Append("{\"step\": 2, \"loss\": 0.4}\n{\"step\": 3, \"loss\": Infinity}\n");
  intake_.Poll(2000, 0, &rows_, &found_);
  EXPECT_EQ(rows_.size(), 3u);
  ASSERT_EQ(found_.size(), 1u);
  EXPECT_NE(found_[0].anomaly.message.find("+Inf"), std::string::npos);
}

TEST_F(MetricsIntakeTest, ANewAttemptKeepsTheReadPositionAndGetsAFreshDetector) {
  pipeline::AnomalyConfig stall;
  stall.stall.enabled = true;
  stall.stall.after = 10 * kSecondMs;
  intake_.Watch(Source(stall), false);
  Append("{\"step\": 1, \"loss\": 1}\n");
  intake_.Poll(1000, 0, &rows_, &found_);
  EXPECT_EQ(intake_.Tick(5000).size(), 0u);
  auto stalled = intake_.Tick(11000);
  ASSERT_EQ(stalled.size(), 1u);
  EXPECT_EQ(stalled[0].anomaly.kind, pipeline::AnomalyKind::kStall);
  EXPECT_TRUE(intake_.Tick(20000).empty());  // once per episode

  MetricsIntake::Source next = Source(stall);
  next.attempt = 2;
  intake_.Watch(next, false);
  EXPECT_TRUE(intake_.Tick(60000).empty());  // the new attempt has written nothing yet
  Append("{\"step\": 1, \"loss\": 1}\n");
  intake_.Poll(61000, 7, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 2u);  // the first line is not read twice
  EXPECT_EQ(rows_[1].attempt, 2);
  intake_.Forget(7);
  EXPECT_FALSE(intake_.watching(7));
  EXPECT_TRUE(intake_.Tick(600000).empty());
}


// A job that links its metrics file to a file only root may read gets
// nothing stored (nor served at /v1/jobs/ID/metrics).
TEST_F(MetricsIntakeTest, ASymlinkedMetricsFileIsNotRead) {
  const std::string secret = (dir_ / "secret").string();
  std::ofstream(secret) << "{\"root_only\": 1}\n";
  fs::create_symlink(secret, path_);
  intake_.Watch(Source(), false);
  intake_.Poll(1000, 0, &rows_, &found_);
  EXPECT_TRUE(rows_.empty());
}

TEST_F(MetricsIntakeTest, AHardLinkedMetricsFileIsNotRead) {
  const std::string secret = (dir_ / "secret").string();
  std::ofstream(secret) << "{\"root_only\": 1}\n";
  fs::create_hard_link(secret, path_);
  intake_.Watch(Source(), false);
  intake_.Poll(1000, 0, &rows_, &found_);
  EXPECT_TRUE(rows_.empty());
}

// A FIFO in the file's place blocked the event loop in open().
TEST_F(MetricsIntakeTest, AFifoDoesNotBlockThePoll) {
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  intake_.Watch(Source(), false);
  const auto start = std::chrono::steady_clock::now();
  intake_.Poll(1000, 0, &rows_, &found_);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_TRUE(rows_.empty());
}

// One such line crashed the daemon, and every restart after it.
TEST_F(MetricsIntakeTest, ADeeplyNestedLineIsSkippedAndCounted) {
  Append("{\"step\": 1, \"loss\": 0.5}\n{\"a\": " + std::string(20000, '[') + std::string(20000, ']') +
         "}\n{\"step\": 2, \"loss\": 0.4}\n");
  intake_.Watch(Source(NanStops()), false);
  intake_.Poll(1000, 0, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_EQ(rows_[1].step, 2);
  EXPECT_EQ(intake_.skipped(7).invalid, 1u);
}

TEST_F(MetricsIntakeTest, LongLinesAreSkippedUpToTheirNewlineAndCounted) {
  intake_.Watch(Source(), false);
  Append("{\"step\": 1}\n{\"tag\": \"" + std::string(50000, 'x'));
  intake_.Poll(1000, 0, &rows_, &found_);
  Append(std::string(50000, 'x'));  // the line is now over the limit, still open
  intake_.Poll(2000, 0, &rows_, &found_);
  Append(std::string(50000, 'x') + "\"}\n{\"step\": 2}\n");
  intake_.Poll(3000, 0, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 2u);
  EXPECT_EQ(rows_[0].step, 1);
  EXPECT_EQ(rows_[1].step, 2);
  EXPECT_EQ(intake_.skipped(7).too_long, 1u);
}

}  // namespace
}  // namespace gpuherd::daemon
