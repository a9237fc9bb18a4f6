#include "daemon/metrics_intake.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

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

// --- budgets and thinning --------------------------------------------------

std::string Lines(int64_t from, int64_t to, const std::function<double(int64_t)>& loss) {
  std::string text;
  for (int64_t i = from; i <= to; ++i) text += json({{"step", i}, {"loss", loss(i)}}).dump() + "\n";
  return text;
}

// A noisy loss that falls, so that new bests keep coming between rungs.
double NoisyLoss(int64_t step) { return 10.0 / static_cast<double>(step) + 0.3 * ((step * 7919) % 13) / 13.0; }

MetricsIntake::Options Small() {
  MetricsIntake::Options o;
  o.round_bytes = 64 << 20;
  o.round_lines = 1 << 20;
  o.full_lines = 100;
  o.phase_lines = 20;
  o.max_kept_lines = 1000;
  return o;
}

// Each rung's arrival as DecideEarlyStop sees it: the best value of the
// lines up to the first at or past the rung.
std::vector<std::pair<int64_t, double>> Arrivals(const std::vector<store::MetricRecord>& rows,
                                                 const std::vector<int64_t>& rungs) {
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t rung : rungs) {
    std::optional<double> best;
    for (const auto& r : rows) {
      const double v = json::parse(r.line_json)["loss"].get<double>();
      if (!best || v < *best) best = v;
      if (r.step && *r.step >= rung) {
        out.push_back({*r.step, *best});
        break;
      }
    }
  }
  return out;
}

TEST_F(MetricsIntakeTest, APollReadsAtMostTheRoundsLinesAndTheRestNextRound) {
  MetricsIntake::Options o = Small();
  o.round_lines = 300;
  o.full_lines = 100000;  // no thinning here
  MetricsIntake intake(o);
  intake.Watch(Source(), false);
  Append(Lines(1, 1000, NoisyLoss));
  intake.Poll(1000, 0, &rows_, &found_);
  EXPECT_EQ(rows_.size(), 300u);
  EXPECT_TRUE(intake.counts(7)->behind);
  EXPECT_TRUE(intake.behind());
  for (int round = 0; round < 3; ++round) intake.Poll(2000, 0, &rows_, &found_);
  ASSERT_EQ(rows_.size(), 1000u);
  EXPECT_FALSE(intake.counts(7)->behind);
  for (size_t i = 0; i < rows_.size(); ++i) EXPECT_EQ(rows_[i].step, static_cast<int64_t>(i) + 1);
}

TEST_F(MetricsIntakeTest, APollReadsAtMostTheRoundsBytes) {
  MetricsIntake::Options o = Small();
  o.round_bytes = 8192;
  o.full_lines = 100000;
  MetricsIntake intake(o);
  intake.Watch(Source(), false);
  const std::string text = Lines(1, 5000, NoisyLoss);
  Append(text);
  intake.Poll(1000, 0, &rows_, &found_);
  size_t bytes = 0;
  for (const auto& r : rows_) bytes += json::parse(r.line_json).dump().size();
  EXPECT_GT(rows_.size(), 100u);
  EXPECT_LT(rows_.size(), 400u);  // about 8 KiB of ~30-byte lines
  int rounds = 1;
  while (intake.counts(7)->behind && rounds < 1000) {
    intake.Poll(1000, 0, &rows_, &found_);
    ++rounds;
  }
  EXPECT_EQ(rows_.size(), 5000u);
  EXPECT_GE(rounds, static_cast<int>(text.size() / 8192));
}

// A job flooding its file and a quiet one: the quiet one's lines are all
// read in the first round, whichever job goes first.
TEST_F(MetricsIntakeTest, AFloodingJobDoesNotStarveAQuietOne) {
  MetricsIntake::Options o = Small();
  o.round_lines = 200;
  MetricsIntake intake(o);
  intake.Watch(Source(), false);  // job 7 floods
  const std::string quiet_path = (dir_ / "quiet.jsonl").string();
  MetricsIntake::Source quiet = Source();
  quiet.job_id = 8;
  quiet.path = quiet_path;
  intake.Watch(quiet, false);
  Append(Lines(1, 100000, NoisyLoss));
  for (int round = 0; round < 3; ++round) {
    std::ofstream(quiet_path, std::ios::app) << Lines(round * 5 + 1, round * 5 + 5, NoisyLoss);
    std::vector<store::MetricRecord> rows;
    intake.Poll(1000 + round, 0, &rows, &found_);
    size_t quiet_rows = 0;
    for (const auto& r : rows) quiet_rows += r.job_id == 8;
    EXPECT_EQ(quiet_rows, 5u) << "round " << round;
    EXPECT_FALSE(intake.counts(8)->behind);
    EXPECT_TRUE(intake.counts(7)->behind);
    // What the quiet job left is the flooding job's: the round is used up.
    EXPECT_EQ(intake.counts(7)->lines_read, static_cast<uint64_t>(195 * (round + 1)));
  }
}

TEST_F(MetricsIntakeTest, ThinningKeepsTheRungsTheBestAndTheLastLine) {
  MetricsIntake intake(Small());
  MetricsIntake::Source source = Source();
  source.objective = pipeline::Objective{"loss", pipeline::ObjectiveMode::kMin};
  pipeline::EarlyStopPolicy asha;
  asha.grace = 2;
  asha.reduction = 3;
  source.early_stop = asha;
  intake.Watch(source, false);
  constexpr int64_t kLines = 50000;
  std::vector<store::MetricRecord> all;
  {
    // The same lines unthinned: what DecideEarlyStop would see without it.
    MetricsIntake::Options full = Small();
    full.full_lines = kLines;
    full.max_kept_lines = kLines;
    MetricsIntake whole(full);
    whole.Watch(source, false);
    Append(Lines(1, kLines, NoisyLoss));
    whole.Poll(1000, 0, &all, &found_);
    ASSERT_EQ(all.size(), static_cast<size_t>(kLines));
  }
  intake.Poll(1000, 0, &rows_, &found_);
  intake.EndAttempt(7, /*final=*/true, &rows_);
  EXPECT_FALSE(intake.watching(7));
  // Bounded: the full lines, about phase_lines per doubling of the stride,
  // the rungs and the bests between kept lines.
  EXPECT_LT(rows_.size(), 700u);
  EXPECT_GT(rows_.size(), 100u);
  // The first lines whole, then ever sparser.
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(rows_[i].step, i + 1);
  EXPECT_EQ(rows_.back().step, kLines);  // the last line
  // The best value of all lines is kept.
  double best = 1e9, kept_best = 1e9;
  for (const auto& r : all) best = std::min(best, json::parse(r.line_json)["loss"].get<double>());
  for (const auto& r : rows_) kept_best = std::min(kept_best, json::parse(r.line_json)["loss"].get<double>());
  EXPECT_EQ(kept_best, best);
  // Every rung is reached at the same line with the same best value.
  const std::vector<int64_t> rungs = pipeline::AshaRungs(asha, kLines);
  EXPECT_EQ(Arrivals(rows_, rungs), Arrivals(all, rungs));
  EXPECT_EQ(Arrivals(rows_, rungs).size(), rungs.size() - 1);  // the last rung is past the end
  // Kept lines are in the order they were read.
  for (size_t i = 1; i < rows_.size(); ++i) EXPECT_LT(*rows_[i - 1].step, *rows_[i].step);
}

TEST_F(MetricsIntakeTest, ThinningIsTheSameWhateverTheRoundsAndCountsWhatItDropped) {
  MetricsIntake::Source source = Source();
  source.objective = pipeline::Objective{"loss", pipeline::ObjectiveMode::kMin};
  Append(Lines(1, 20000, NoisyLoss));
  MetricsIntake at_once(Small());
  at_once.Watch(source, false);
  std::vector<store::MetricRecord> once;
  at_once.Poll(1000, 0, &once, &found_);
  MetricsIntake::Options o = Small();
  o.round_lines = 777;
  MetricsIntake by_rounds(o);
  by_rounds.Watch(source, false);
  while (!by_rounds.counts(7) || by_rounds.counts(7)->behind || by_rounds.counts(7)->lines_read == 0) {
    by_rounds.Poll(1000, 0, &rows_, &found_);
  }
  ASSERT_EQ(rows_.size(), once.size());
  for (size_t i = 0; i < once.size(); ++i) EXPECT_EQ(rows_[i].line_json, once[i].line_json);
  const MetricsIntake::Counts counts = *by_rounds.counts(7);
  EXPECT_EQ(counts.lines_read, 20000u);
  EXPECT_EQ(counts.lines_kept, rows_.size());
  std::vector<store::MetricIntakeRecord> records;
  by_rounds.TakeChangedCounts(5000, &records);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].job_id, 7);
  EXPECT_EQ(records[0].lines_read, 20000);
  EXPECT_EQ(records[0].lines_kept, static_cast<int64_t>(rows_.size()));
  EXPECT_FALSE(records[0].behind);
  EXPECT_EQ(records[0].updated, 5000);
  records.clear();
  by_rounds.TakeChangedCounts(6000, &records);
  EXPECT_TRUE(records.empty());  // nothing changed since
}

// Steps a job invents (all the same, falling, huge) or lines without one
// cannot make the intake store more than its cap.
TEST_F(MetricsIntakeTest, HostileStepsStayWithinTheCap) {
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "{\"step\": 0, \"v\": 1}\n";
  for (int i = 5000; i > 0; --i) text += "{\"step\": " + std::to_string(i) + ", \"v\": 1}\n";
  for (int i = 0; i < 5000; ++i) text += "{\"step\": " + std::to_string(int64_t{1} << 40) + "" + std::to_string(i) + ", \"v\": 1}\n";
  for (int i = 0; i < 200000; ++i) text += "{\"v\": 1}\n";
  Append(text);
  MetricsIntake::Options o = Small();
  o.max_kept_lines = 500;
  MetricsIntake intake(o);
  intake.Watch(Source(), false);
  do {
    intake.Poll(1000, 0, &rows_, &found_);
  } while (intake.counts(7)->behind);
  EXPECT_EQ(intake.counts(7)->lines_read, 215000u);
  intake.EndAttempt(7, true, &rows_);
  EXPECT_LE(rows_.size(), 501u);  // the cap and the last line
  EXPECT_EQ(json::parse(rows_.back().line_json), json({{"v", 1}}));
}

// A job that ends with lines unread: they are read by the next rounds (its
// anomalies then marked as after its end), and the job is forgotten after.
TEST_F(MetricsIntakeTest, AJobThatEndsBehindIsReadToTheEndThenForgotten) {
  MetricsIntake::Options o = Small();
  o.round_lines = 100;
  o.full_lines = 100000;
  MetricsIntake intake(o);
  intake.Watch(Source(NanStops()), false);
  Append(Lines(1, 399, NoisyLoss) + "{\"step\": 400, \"loss\": NaN}\n");
  intake.Poll(1000, 7, &rows_, &found_);  // a share of a round
  intake.EndAttempt(7, /*final=*/true, &rows_);
  EXPECT_TRUE(intake.watching(7));
  EXPECT_TRUE(intake.counts(7)->behind);
  for (int round = 0; round < 10 && intake.watching(7); ++round) intake.Poll(2000, 0, &rows_, &found_);
  EXPECT_FALSE(intake.watching(7));
  EXPECT_EQ(rows_.size(), 400u);
  ASSERT_EQ(found_.size(), 1u);
  EXPECT_TRUE(found_[0].after_end);
  std::vector<store::MetricIntakeRecord> records;
  intake.TakeChangedCounts(3000, &records);
  ASSERT_EQ(records.size(), 1u);  // the forgotten job's last counts
  EXPECT_EQ(records[0].lines_read, 400);
  EXPECT_FALSE(records[0].behind);
}

}  // namespace
}  // namespace gpuherd::daemon
