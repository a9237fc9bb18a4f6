#include "predict/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "alerts/rules.h"
#include "predict/evaluate.h"
#include "predict/warm_ups_for_test.h"

namespace gpuherd::predict {
namespace {

HistoryOptions Small(uint64_t seed) {
  HistoryOptions o;
  o.seed = seed;
  o.gpus = 8;
  o.days = 4;
  o.faults_per_gpu_day = 0.6;
  o.false_alarms_per_gpu_day = 0.6;
  return o;
}

TrainParams Quick() {
  TrainParams p;
  p.rounds = 40;
  return p;
}

std::string TempDir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("gpuherd-predict-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

class ModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    train_ = new History(*GenerateHistory(Small(11)));
    test_ = new History(*GenerateHistory(Small(12)));
  }
  static void TearDownTestSuite() {
    delete train_;
    delete test_;
  }
  static History* train_;
  static History* test_;
};
History* ModelTest::train_ = nullptr;
History* ModelTest::test_ = nullptr;

TEST_F(ModelTest, TrainingAndEvaluationAreDeterministicForASeed) {
  const Dataset data = BuildDataset(*train_, {}, 60 * kMinuteMs, 5);
  ASSERT_GT(data.rows(), 1000u);
  auto a = RiskModel::Train(data, Quick(), {});
  auto b = RiskModel::Train(data, Quick(), {});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok());
  auto sa = ScoreHistory(*a, *test_, {});
  auto sb = ScoreHistory(*b, *test_, {});
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  ASSERT_TRUE(sb.ok());
  ASSERT_EQ(sa->size(), sb->size());
  for (size_t k = 0; k < sa->size(); ++k) {  // bit for bit, NaN included
    ASSERT_EQ((*sa)[k].size(), (*sb)[k].size());
    EXPECT_EQ(std::memcmp((*sa)[k].data(), (*sb)[k].data(), (*sa)[k].size() * sizeof(float)), 0);
  }
  const EventMetrics ma = ScoreEvents(*test_, *sa, 0.5);
  const EventMetrics mb = ScoreEvents(*test_, *sb, 0.5);
  EXPECT_EQ(ma.episodes, mb.episodes);
  EXPECT_EQ(ma.detected, mb.detected);
  EXPECT_EQ(ma.mean_lead_min, mb.mean_lead_min);
  // A model that learnt something ranks the minutes before faults higher.
  EXPECT_GT(ma.roc_auc, 0.8);
  EXPECT_GT(ma.faults, 0);
}

// A healthy card (no sign, no fault) that sat idle for an hour or more and
// then gets a job warms up without an alarm.
TEST_F(ModelTest, HealthyWarmUpAfterLongIdleStaysUnderTheThreshold) {
  auto model = RiskModel::Train(BuildDataset(*train_, {}, 60 * kMinuteMs, 5), Quick(), {});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto scores = ScoreHistory(*model, *test_, {});
  ASSERT_TRUE(scores.ok()) << scores.status().ToString();
  const double threshold = ChooseThreshold(*test_, *scores, 0.9);
  int warm_ups = 0;
  for (size_t k = 0; k < test_->series.size(); ++k) {
    const Series& s = test_->series[k];
    if (!s.signs.empty() || s.fault_time) continue;
    for (size_t i : WarmUps(s, 60)) {
      ++warm_ups;
      for (size_t j = i; j < std::min(i + 30, s.minutes.size()); ++j) {
        EXPECT_LT((*scores)[k][j], threshold) << s.uuid << " minute " << j << " of its warm-up at " << i;
      }
    }
  }
  EXPECT_GE(warm_ups, 3);
}

TEST_F(ModelTest, SavedModelScoresTheSameAndCarriesItsHeader) {
  const Dataset data = BuildDataset(*train_, {}, 60 * kMinuteMs, 5);
  ModelInfo info;
  info.threshold = 0.42;
  info.trained_on = "test";
  auto model = RiskModel::Train(data, Quick(), info);
  ASSERT_TRUE(model.ok());
  const std::string path = TempDir() + "/predict/risk-model.json";
  ASSERT_TRUE(model->Save(path).ok());
  auto loaded = RiskModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_DOUBLE_EQ(loaded->info().threshold, 0.42);
  EXPECT_EQ(loaded->info().trained_on, "test");
  EXPECT_EQ(loaded->info().rows, data.rows());
  std::vector<float> first(data.x.begin(), data.x.begin() + 50 * kFeatureCount);
  auto p1 = model->Predict(first);
  auto p2 = loaded->Predict(first);
  ASSERT_TRUE(p1.ok() && p2.ok());
  EXPECT_EQ(*p1, *p2);
  FeatureRow row;
  std::copy(first.begin(), first.begin() + kFeatureCount, row.begin());
  EXPECT_FLOAT_EQ(*loaded->Score(row), (*p1)[0]);
}

TEST(ModelFileTest, RefusesMissingForeignAndOldFiles) {
  const std::string dir = TempDir();
  auto missing = RiskModel::Load(dir + "/nothing.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("gpuherd predict train"), std::string::npos);
  std::ofstream(dir + "/foreign.json") << R"({"hello": 1})";
  EXPECT_EQ(RiskModel::Load(dir + "/foreign.json").status().code(), Code::kInvalidArgument);
  std::ofstream(dir + "/old.json") << R"({"format": "gpuherd-risk-model", "version": 0})";
  auto old = RiskModel::Load(dir + "/old.json");
  EXPECT_EQ(old.status().code(), Code::kFailedPrecondition);
  EXPECT_NE(old.status().message().find("version 0"), std::string::npos);
}

TEST(ModelTrainTest, RefusesDataWithoutFaults) {
  Dataset data;
  FeatureRow row{};
  for (int i = 0; i < 10; ++i) data.Add(row, false);
  auto m = RiskModel::Train(data, {}, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no faults"), std::string::npos);
}

// Episodes on a hand-made series: the event metric as evaluate.h defines it.
TEST(EventMetricsTest, CountsEpisodesLeadAndFalseAlarms) {
  History h;
  Series s;
  s.uuid = "GPU-a";
  const TimeMs t0 = 1767225600000;
  for (int i = 0; i < 300; ++i) {
    store::RollupRecord r;
    r.minute = t0 + i * kMinuteMs;
    r.samples = 1;
    s.minutes.push_back(r);
  }
  s.fault_time = t0 + 300 * kMinuteMs;
  h.series.push_back(s);
  Series quiet = s;
  quiet.uuid = "GPU-b";
  quiet.fault_time.reset();
  h.series.push_back(quiet);
  std::vector<float> a(300, 0.1f), b(300, 0.1f);
  for (int i = 50; i < 60; ++i) a[i] = 0.9f;    // false: ends > 60 min before the fault
  for (int i = 250; i < 300; ++i) a[i] = 0.9f;  // true: 51 minutes ahead (ready at 251)
  a[270] = 0.1f;                                // a short gap does not split it
  for (int i = 100; i < 105; ++i) b[i] = 0.9f;  // false: no fault at all
  const EventMetrics m = ScoreEvents(h, {a, b}, 0.5);
  EXPECT_EQ(m.faults, 1);
  EXPECT_EQ(m.detected, 1);
  EXPECT_EQ(m.episodes, 3);
  EXPECT_EQ(m.true_episodes, 1);
  EXPECT_NEAR(m.precision, 1.0 / 3, 1e-9);
  EXPECT_EQ(m.recall, 1);
  EXPECT_EQ(m.mean_lead_min, 49);
  const EventMetrics none = ScoreEvents(h, {a, b}, 0.95);
  EXPECT_EQ(none.episodes, 0);
  EXPECT_EQ(none.recall, 0);
}

TEST(EventMetricsTest, RocAuc) {
  EXPECT_DOUBLE_EQ(RocAuc({0.1f, 0.2f, 0.8f, 0.9f}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.9f, 0.8f, 0.2f, 0.1f}, {0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc({0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 0, 1}), 0.5);
  EXPECT_DOUBLE_EQ(RocAuc({0.1f, NAN, 0.9f}, {0, 1, 1}), 1.0);
}

TEST(BaselineTest, HardwareRulesLeaveOutUtilisationAndMemory) {
  const auto rules = HardwareRules(alerts::DefaultRules());
  ASSERT_FALSE(rules.empty());
  for (const auto& r : rules) {
    EXPECT_NE(r.name, "gpu_idle_while_job");
    EXPECT_NE(r.name, "gpu_memory_high");
    EXPECT_NE(r.name, "gpu_health_drop");
  }
}

}  // namespace
}  // namespace gpuherd::predict
