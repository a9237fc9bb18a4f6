#include "cli/pipeline_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using nlohmann::json;

constexpr TimeMs kNow = 1'700'000'100'000;

json Pipeline() {
  return {{"id", 7}, {"name", "toy-sweep"}, {"state", "running"}, {"outcome", nullptr}, {"finished", 0},
          {"nodes",
           {{{"id", "train[lr=0.1]"}, {"state", "running"}, {"attempts", 2}, {"job_id", 41}, {"gpus", {2}},
             {"started", kNow - 41'000}, {"ended", 0},
             {"latest_metrics", {{"step", 120}, {"loss", 0.41234}, {"acc", 0.9}, {"lr", 0.1}, {"grad", 3.0}}}},
            {{"id", "train[lr=0.3]"}, {"state", "failed"}, {"attempts", 3}, {"job_id", 140}, {"gpus", {0}},
             {"started", kNow - 90'000}, {"ended", kNow - 30'000}, {"reason", "exit 1"},
             {"latest_metrics", json::object()}},
            {{"id", "report"}, {"state", "waiting"}, {"attempts", 0}, {"gpus", json::array()}}}}};
}

TEST(PipelineFormatTest, LatestMetricShowsStepThenThreeMetrics) {
  EXPECT_EQ(LatestMetricCell(Pipeline()["nodes"][0]["latest_metrics"]), "step 120 acc=0.9 grad=3 loss=0.4123");
  EXPECT_EQ(LatestMetricCell(json::object()), "-");
  EXPECT_EQ(LatestMetricCell(nullptr), "-");
  EXPECT_EQ(LatestMetricCell({{"loss", nullptr}}), "loss=nan");
}

TEST(PipelineFormatTest, ElapsedRunsUntilNowOrUntilTheEnd) {
  json p = Pipeline();
  EXPECT_EQ(NodeElapsedCell(p["nodes"][0], kNow), "41s");
  EXPECT_EQ(NodeElapsedCell(p["nodes"][1], kNow), "1m00s");
  EXPECT_EQ(NodeElapsedCell(p["nodes"][2], kNow), "-");
  EXPECT_EQ(NodeGpusCell(p["nodes"][0]), "2");
  EXPECT_EQ(NodeGpusCell(p["nodes"][2]), "-");
}

TEST(PipelineFormatTest, ProgressTableHasOneRowPerNode) {
  std::string table = ProgressTable(Pipeline(), kNow, /*color=*/false);
  EXPECT_THAT(table, HasSubstr("pipeline 7 toy-sweep: running, 0/3 done, 1 failed, 1 running\n"));
  EXPECT_THAT(table, HasSubstr("NODE           STATE    JOB  GPU  ELAPSED  ATTEMPTS  LATEST"));
  EXPECT_THAT(table, HasSubstr("train[lr=0.1]  running   41  2        41s         2  step 120 acc=0.9"));
  EXPECT_THAT(table, HasSubstr("train[lr=0.3]  failed   140  0      1m00s         3  exit 1"));
  EXPECT_THAT(table, HasSubstr("report         waiting    -  -          -         0  -"));
}

TEST(PipelineFormatTest, RunNamesItsIdAndTheCommandsThatFollowIt) {
  EXPECT_EQ(RunStartedLines(7, 12),
            "pipeline 7: 12 nodes\n"
            "  follow it:   gpuherd pipeline show 7\n"
            "  its report:  gpuherd report 7\n");
  EXPECT_THAT(RunStartedLines(8, 1), HasSubstr("pipeline 8: 1 node\n"));
}

TEST(PipelineFormatTest, ListingCountsNodes) {
  json list = {{{"id", 3}, {"name", "a"}, {"user", "ana"}, {"state", "finished"}, {"outcome", "failed"},
                {"created", 1'700'000'000'000},
                {"nodes", {{"total", 12}, {"completed", 10}, {"failed", 2}, {"running", 0}, {"waiting", 0},
                           {"skipped", 0}}}}};
  std::string table = PipelinesTable(list, false);
  EXPECT_THAT(table, HasSubstr("ID  NAME  USER  STATE   NODES                 CREATED\n"));
  EXPECT_THAT(table, HasSubstr(" 3  a     ana   failed  10/12 done, 2 failed  2023-11-14T22:13:20.000Z\n"));
}

TEST(PipelineFormatTest, ShowSaysAnObjectiveThatWasNotLogged) {
  json p = Pipeline();
  p["objectives"] = {{"train", {{"metric", "accuracy"}, {"mode", "max"}, {"summary", "last"},
                                {"warning", "objective 'accuracy' not logged; seen: acc, loss"}}}};
  EXPECT_THAT(ProgressTable(p, kNow, false), HasSubstr("train: objective 'accuracy' not logged; seen: acc, loss\n"));
}

TEST(PipelineFormatTest, PointsStoppedEarlyCountAsDone) {
  json counts = {{"total", 10}, {"completed", 4}, {"stopped", 6}, {"failed", 0}, {"running", 0}};
  EXPECT_EQ(NodeCountsCell(counts), "10/10 done: 4 completed, 6 stopped early");
  json p = Pipeline();
  p["outcome"] = "succeeded";
  p["nodes"] = {{{"id", "a"}, {"state", "completed"}}, {{"id", "b"}, {"state", "stopped"}}};
  EXPECT_THAT(ProgressTable(p, kNow, false), HasSubstr(": succeeded, 2/2 done: 1 completed, 1 stopped early\n"));
}

TEST(PipelineFormatTest, FinishedAndSucceededFollowTheOutcome) {
  json p = Pipeline();
  EXPECT_FALSE(PipelineFinished(p));
  p["outcome"] = "failed";
  p["finished"] = kNow;
  EXPECT_TRUE(PipelineFinished(p));
  EXPECT_FALSE(PipelineSucceeded(p));
  p["outcome"] = "succeeded";
  EXPECT_TRUE(PipelineSucceeded(p));
}

TEST(PipelineFormatTest, ChangesListOnlyNodesThatMoved) {
  json before = Pipeline();
  json after = before;
  EXPECT_THAT(ProgressChanges(before, after, kNow), IsEmpty());
  after["nodes"][0]["state"] = "completed";
  after["nodes"][0]["ended"] = kNow;
  after["nodes"][2]["state"] = "running";
  after["nodes"][2]["gpus"] = {1};
  after["nodes"][2]["attempts"] = 1;
  EXPECT_THAT(ProgressChanges(before, after, kNow),
              ElementsAre("train[lr=0.1] completed after 41s, step 120 acc=0.9 grad=3 loss=0.4123",
                          "report running on GPU 1"));
}

TEST(PipelineFormatTest, FirstChangesSkipWaitingNodes) {
  EXPECT_THAT(ProgressChanges(nullptr, Pipeline(), kNow),
              ElementsAre("train[lr=0.1] running on GPU 2 (attempt 2)", "train[lr=0.3] failed after 1m00s (exit 1)"));
}

// No control character but a line feed: C0, DEL or C1 (U+0080..U+009F).
bool HasControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '\n') continue;
    if (c < 0x20 || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9f) return true;
  }
  return false;
}

// Issue 29: a metric name a job wrote with SGR and OSC sequences reached
// `gpuherd pipeline show` raw; so could a run's name, a node's parameters or
// a reason.
TEST(PipelineFormatTest, WhatUsersAndJobsWroteIsEscaped) {
  json p = Pipeline();
  p["name"] = "run\x1b[8m";
  p["user"] = "eve\xc2\x9b" "2J";
  p["nodes"][0]["id"] = "train[lr=\x1b[30;40m]";
  p["nodes"][0]["latest_metrics"] = {{"step", 3}, {"loss\x1b[31m", 0.5}, {"acc\x1b]0;T\x07", 0.9}, {"tag", "a\x1b[2Jb"}};
  p["nodes"][1]["reason"] = "exit 1\r\x1b[2K";
  p["nodes"][1]["attempt_history"] = {{{"job", 9}, {"state", "failed"}, {"reason", "x\x07"},
                                       {"stderr_tail", {"Traceback\x1b[8m"}}}};
  const std::string table = ProgressTable(p, kNow, /*color=*/true);
  // Only the colour sequences of the state column are raw ESCs; everything
  // else is escaped.
  std::string without_colours = table;
  for (const char* code : {"\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[0m"}) {
    for (size_t at = without_colours.find(code); at != std::string::npos; at = without_colours.find(code)) {
      without_colours.erase(at, std::string(code).size());
    }
  }
  EXPECT_FALSE(HasControl(without_colours)) << table;
  EXPECT_THAT(table, HasSubstr("pipeline 7 run\\e[8m:"));
  EXPECT_THAT(table, HasSubstr("train[lr=\\e[30;40m]"));
  EXPECT_THAT(table, HasSubstr("acc\\e]0;T\\x07=0.9 loss\\e[31m=0.5 tag=a\\e[2Jb"));
  EXPECT_THAT(table, HasSubstr("exit 1\\r\\e[2K"));
  EXPECT_THAT(table, HasSubstr("(stderr: Traceback\\e[8m)"));
  EXPECT_FALSE(HasControl(ProgressTable(p, kNow, /*color=*/false))) << ProgressTable(p, kNow, false);
  const std::string listing = PipelinesTable(json::array({p}), /*color=*/false);
  EXPECT_FALSE(HasControl(listing)) << listing;
  EXPECT_THAT(listing, HasSubstr("eve\\u009b2J"));
  for (const std::string& line : ProgressChanges(json(), p, kNow)) EXPECT_FALSE(HasControl(line)) << line;
}

}  // namespace
}  // namespace gpuherd::cli
