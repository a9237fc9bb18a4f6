#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "api/decode.h"
#include "api/events.h"
#include "api/gpus.h"
#include "api/job_detail.h"
#include "api/jobs.h"
#include "api/pipelines.h"

namespace gpuherd::api {
namespace {

using nlohmann::json;

TEST(ApiGpusTest, FleetRoundTripsWithDrainAndRisk) {
  Fleet f;
  f.driver = "sim";
  f.simulated = true;
  f.sim_reason = "asked for";
  f.hostname = "node-a";
  Gpu g;
  g.info.index = 3;
  g.info.uuid = "GPU-3";
  g.info.name = "NVIDIA H100";
  g.sample = gpu::GpuSample{};
  g.sample->temp_c = 61;
  MarkDrained(g, "fan noisy");
  g.failure_risk = 0.25;
  GpuHealthState h;
  h.state = "quarantined";
  h.since = 1000;
  h.reason = "XID 48";
  h.rule = "fatal_fault";
  h.evidence = json::array({{{"kind", "xid"}, {"xid", 48}}});
  g.health_state = h;
  f.gpus.push_back(g);
  f.topology = {{gpu::Link::kSelf}};
  json j = f;
  EXPECT_EQ(j["gpus"][0]["state"], "drained");
  EXPECT_EQ(j["gpus"][0]["drain_reason"], "fan noisy");
  EXPECT_EQ(j["topology"][0][0], "self");
  auto back = Decode<Fleet>(j, "the fleet");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0].info.uuid, "GPU-3");
  EXPECT_TRUE(back->gpus[0].drained);
  EXPECT_EQ(back->gpus[0].failure_risk, 0.25);
  ASSERT_TRUE(back->gpus[0].health_state);
  EXPECT_EQ(back->gpus[0].health_state->state, "quarantined");
  EXPECT_EQ(back->gpus[0].health_state->evidence[0]["xid"], 48);
  EXPECT_EQ(j["gpus"][0]["health_state"]["rule"], "fatal_fault");
  EXPECT_FALSE(j["gpus"][0]["health_state"].contains("requalify_job"));
  EXPECT_EQ(back->gpus[0].sample->temp_c, 61);
  EXPECT_EQ(back->topology[0][0], gpu::Link::kSelf);
  EXPECT_EQ(json(*back), j);
}

TEST(ApiGpusTest, WrongTypesAreAStatusNotAnException) {
  auto bad = Decode<Fleet>(json{{"gpus", {{{"index", "three"}}}}}, "the fleet");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("cannot read the fleet"));
}

TEST(ApiGpusTest, JobsHealthLinkCountsAndLostGpuRoundTrip) {
  Fleet f;
  Gpu g;
  g.info.index = 0;
  g.state = "lost";
  g.last_seen = 1764763200000;
  store::BurnInRecord burnin;
  burnin.score = 64;
  burnin.verdict = "degraded";
  burnin.finished = 1764763100000;
  SetHealth(g, burnin);
  g.jobs.push_back(GpuJob{7, "alice", "train", 5, uint64_t{4} << 30, uint64_t{1} << 30, "active"});
  g.jobs.push_back(GpuJob{8, "bob", "eval", 10, 0, std::nullopt, ""});
  f.gpus = {g, g};
  f.topology = {{gpu::Link::kSelf, gpu::Link::kNvLink}, {gpu::Link::kNvLink, gpu::Link::kSelf}};
  f.nvlinks = {{0, 18}, {18, 0}};
  f.pcie_multiple = {{false, false}, {false, false}};
  json j = f;
  EXPECT_FALSE(j["gpus"][0].contains("sample"));
  EXPECT_EQ(j["gpus"][0]["last_seen"], 1764763200000);
  EXPECT_EQ(j["gpus"][0]["health_score"], 64);
  EXPECT_EQ(j["gpus"][0]["jobs"][0]["share_bytes"], uint64_t{4} << 30);
  EXPECT_FALSE(j["gpus"][0]["jobs"][1].contains("used_bytes"));
  EXPECT_FALSE(j["gpus"][0]["jobs"][1].contains("fence"));
  EXPECT_EQ(j["nvlinks"][0][1], 18);
  auto back = Decode<Fleet>(j, "the fleet");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(json(*back), j);
  EXPECT_EQ(back->gpus[0].jobs[0].used_bytes, uint64_t{1} << 30);
  EXPECT_EQ(back->gpus[0].health_verdict, "degraded");
  // A link matrix of another shape than the topology's is dropped, never indexed.
  j["nvlinks"] = {{0, 18, 4}};
  back = Decode<Fleet>(j, "the fleet");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->nvlinks.empty());
  EXPECT_EQ(back->pcie_multiple.size(), 2u);
  j["nvlinks"] = "many";
  EXPECT_FALSE(Decode<Fleet>(j, "the fleet").ok());
}

TEST(ApiEventsTest, EventsAndAlertsFromRecordsRoundTrip) {
  store::EventRecord r = NewEvent(1000, "operator.note", store::Severity::kWarning, "fan", "GPU-1",
                                  {{"user", "ana"}});
  Event e = EventOf(r);
  EXPECT_EQ(e.severity, "warning");
  EXPECT_EQ(e.data["user"], "ana");
  json j = e;
  EXPECT_EQ(j.get<Event>().message, "fan");

  store::AlertRecord a;
  a.rule = "hot";
  a.subject = "mlx5_0/1";
  a.state = "firing";
  a.fired_at = 7;
  Alert alert = AlertOf(a);
  EXPECT_FALSE(alert.gpu.has_value());
  EXPECT_EQ(alert.Since(), 7);
  json aj = alert;
  EXPECT_TRUE(aj["gpu"].is_null());
  EXPECT_EQ(aj.get<Alert>().rule, "hot");
}

TEST(ApiJobsTest, JobViewReadsTheDaemonsJob) {
  json j = {{"id", 7}, {"name", "train"}, {"state", "running"}, {"gpu_twentieths", 10},
            {"assigned_gpus", {2}}, {"started", 1000}, {"exit_code", 3}, {"unknown", true}};
  auto v = Decode<JobView>(j, "job 7");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(GpusRequested(*v), "0.5");
  for (const auto& [twentieths, shown] : {std::pair{1, "0.05"}, {5, "0.25"}, {15, "0.75"}, {40, "2"}, {0, "-"}}) {
    JobView quarter = *v;
    quarter.gpu_twentieths = twentieths;
    EXPECT_EQ(GpusRequested(quarter), shown);
  }
  EXPECT_EQ(GpusAssigned(*v), "2");
  EXPECT_EQ(JobTime(*v, 61000), FormatDuration(60000));
  EXPECT_EQ(v->exit_code, 3);
  EXPECT_FALSE(v->exit_signal.has_value());
}


TEST(ApiJobsTest, ArrayPlaceAndSummaryRoundTrip) {
  JobView task;
  task.id = 14;
  task.array_id = 12;
  task.array_index = 2;
  task.array_size = 3;
  json j = task;
  EXPECT_EQ(j["array_id"], 12);
  auto back = Decode<JobView>(j, "task");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->array_index, 2);
  EXPECT_EQ(back->array_size, 3);
  EXPECT_FALSE(json(JobView{}).contains("array_id"));  // not a task: as before arrays had ids

  ArraySummary a;
  a.id = 12;
  a.name = "lowp";
  a.size = kMaxArrayTasksListed + 5;
  a.states = {{"completed", kMaxArrayTasksListed + 4}, {"held", 1}};
  for (int i = 0; i < a.size; ++i) a.tasks.push_back({12 + i, i, i == 0 ? "held" : "completed"});
  json s = a;
  EXPECT_EQ(s["tasks"].size(), static_cast<size_t>(kMaxArrayTasksListed));  // the counts cover the rest
  auto summary = Decode<ArraySummary>(s, "array");
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->size, kMaxArrayTasksListed + 5);
  EXPECT_EQ(summary->states.at("held"), 1);
  EXPECT_EQ(summary->tasks[0].state, "held");
  EXPECT_EQ(ArrayTaskId(12, 3), "12_3");
}

TEST(ApiJobsTest, LogChunkSaysWhichAttemptItIs) {
  LogChunk c;
  c.data = "x";
  c.attempt = 1;
  c.attempts = 2;
  json j = c;
  EXPECT_EQ(j["attempt"], 1);
  EXPECT_EQ(j["attempts"], 2);
}

TEST(ApiJobsTest, JobTableReadsRowsByColumnName) {
  // Columns in another order than the daemon's, one the reader does not know.
  const std::string body =
      R"({"columns":["state","id","future","assigned_gpus","name","priority","gpu_twentieths","reason",)"
      R"("submitted","started","ended","user"],"rows":[)"
      R"(["running",4,{"x":1},[0,3],"tr\u0000ain",-5,10,"",100,200,0,"ana"],)"
      R"(["pending",5,[2,"y"],[],"b",0,20,"waiting",300,0,0,"bo"]],"now":1000})";
  auto table = ParseJobTable(body);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->jobs.size(), 2u);
  EXPECT_EQ(table->now, 1000);
  const JobRow& a = table->jobs[0];
  EXPECT_EQ(a.id, 4);
  EXPECT_EQ(a.state, "running");
  EXPECT_EQ(a.name, std::string("tr\0ain", 6));
  EXPECT_EQ(a.user, "ana");
  EXPECT_EQ(a.priority, -5);
  EXPECT_EQ(GpusRequested(a), "0.5");
  EXPECT_EQ(GpusAssigned(a), "0,3");
  EXPECT_EQ(JobTime(a, table->now), FormatDuration(800));
  EXPECT_EQ(table->jobs[1].reason, "waiting");
  EXPECT_EQ(GpusAssigned(table->jobs[1]), "-");
}

TEST(ApiJobsTest, JobTableRefusesWhatIsNotAListing) {
  const std::string columns = R"({"columns":["id","name","assigned_gpus"],)";
  for (const std::string& bad : {
           std::string(R"({"jobs":[],"now":1})"),                           // the full listing
           std::string(R"({"rows":[[1]],"columns":["id"],"now":1})"),       // rows before columns
           columns + R"("rows":[["1","a",[]]],"now":1})",                   // text as an id
           columns + R"("rows":[[1,7,[]]],"now":1})",                       // a number as a name
           columns + R"("rows":[[1,"a",[["deep"]]]],"now":1})",             // deeper than the format
           columns + R"("rows":[[1,"a",[1.5]]],"now":1})",                  // a fraction as a GPU
           columns + R"("rows":[[1,"a",[]]],"now":"soon"})",                // now as text
           columns + R"("rows":[[1,"a",[]]],"now":1)",                      // cut short
           columns + R"("rows":[[1,"a",[]]],"now":1,"x":[[[[[1]]]]]})",     // nesting anywhere
           columns + R"("rows":[[99999999999999999999,"a",[]]],"now":1})",  // out of range
       }) {
    EXPECT_FALSE(ParseJobTable(bad).ok()) << bad;
  }
}


TEST(ApiPipelinesTest, DetailAndMetricLinesRoundTrip) {
  PipelineDetail d;
  d.summary.id = 7;
  d.summary.name = "sweep";
  d.summary.state = "finished";
  d.summary.outcome = "succeeded";
  d.summary.user = "ada";
  d.summary.created = 1000;
  d.summary.finished = 2000;
  d.run_dir = "/runs/7";
  d.params = {{"epochs", "3"}};
  d.backend = "local";
  d.objectives["train"] = {"loss", "min", "last", ""};
  d.best_points["train"] = {"train[lr=0.1]", "loss", 0.5, 9};
  PipelineNodeView n;
  n.id = "train[lr=0.1]";
  n.key = "train/0";
  n.step = "train";
  n.matrix = {{"lr", "0.1"}, {"bs", "32"}};
  n.state = "completed";
  n.attempts = 2;
  n.job_id = 12;
  n.slurm_job_id = 4711;
  n.gpus = {0, 1};
  n.started = 1100;
  n.ended = 1900;
  n.gpu_seconds = 1.5;
  n.needs = {"prepare"};
  n.best = {{"loss", 0.5}};
  n.attempt_history = json::array({{{"state", "failed"}, {"reason", "exit 1"}}});
  n.objective = PipelineNodeView::Objective{0.5, 9, 1};
  d.nodes = {n, PipelineNodeView{}};

  auto back = Decode<PipelineDetail>(json(d), "pipeline 7");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(json(*back), json(d));
  EXPECT_EQ(back->summary.user, "ada");
  ASSERT_EQ(back->nodes.size(), 2u);
  EXPECT_EQ(back->nodes[0].slurm_job_id, 4711);
  EXPECT_FALSE(back->nodes[1].slurm_job_id);
  EXPECT_FALSE(back->nodes[1].objective);
  // JSON keeps an object's names in order of name: the matrix comes back so.
  EXPECT_EQ(back->nodes[0].matrix, (std::vector<std::pair<std::string, std::string>>{{"bs", "32"}, {"lr", "0.1"}}));

  PipelineMetricLine line{"train[lr=0.1]", 12, 2, 9, 1500, {{"loss", 0.5}}};
  PipelineMetricLine stepless{"train[lr=0.1]", 12, 2, std::nullopt, 1600, {{"loss", 0.4}}};
  auto lines = Decode<std::vector<PipelineMetricLine>>(json({line, stepless}), "the metric lines");
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  EXPECT_EQ(json(*lines), json({line, stepless}));
  EXPECT_FALSE((*lines)[1].step);
}

TEST(ApiPipelinesTest, APointsParametersAreOneJsonObjectOfTheMatrixValues) {
  EXPECT_EQ(PointParamsJson({{"lr", "0.1"}, {"seed", "1"}}), R"({"lr":"0.1","seed":"1"})");
  EXPECT_EQ(PointParamsJson({}), "{}");
  // The file's text is not always UTF-8: it is replaced, not thrown on.
  EXPECT_EQ(nlohmann::json::parse(PointParamsJson({{"name", "a\"b\xff"}}))["name"], "a\"b\xef\xbf\xbd");
}

TEST(ApiPipelinesTest, AReplyThatIsNotARunsDetailIsRefused) {
  auto none = Decode<PipelineDetail>(json{{"id", 3}}, "pipeline 3");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(none.status().message(), ::testing::HasSubstr("cannot read pipeline 3"));
  EXPECT_THAT(none.status().message(), ::testing::HasSubstr("nodes"));
  // A listing's counts where the nodes should be.
  EXPECT_FALSE(Decode<PipelineDetail>(json{{"id", 3}, {"nodes", {{"total", 2}}}}, "pipeline 3").ok());
  EXPECT_FALSE(Decode<PipelineDetail>(json{{"nodes", {{{"attempts", "two"}}}}}, "pipeline 3").ok());
  EXPECT_FALSE(Decode<PipelineDetail>(json::array(), "pipeline 3").ok());
}

// A daemon older than ?view=table sends the full listing for it.
TEST(ApiJobsTest, TheFullListingReadsAsTheSameTable) {
  JobView running;
  running.id = 4;
  running.name = "train";
  running.user = "ana";
  running.state = "running";
  running.gpu_twentieths = 10;
  running.assigned_gpus = {0, 3};
  running.submitted = 100;
  running.started = 200;
  running.now = 1000;
  auto table = JobTableFromFullListing(nlohmann::json{{"jobs", {running}}}, 5);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->jobs.size(), 1u);
  EXPECT_EQ(table->now, 1000);
  EXPECT_EQ(table->jobs[0].id, 4);
  EXPECT_EQ(GpusRequested(table->jobs[0]), "0.5");
  EXPECT_EQ(GpusAssigned(table->jobs[0]), "0,3");
  EXPECT_EQ(JobTime(table->jobs[0], table->now), FormatDuration(800));
  EXPECT_EQ(JobTableFromFullListing(nlohmann::json{{"jobs", nlohmann::json::array()}}, 5)->now, 5);
  for (const char* bad : {R"([])", R"({"jobs":{}})", R"({"jobs":[1]})", R"({"jobs":[{"id":"four"}]})"}) {
    EXPECT_FALSE(JobTableFromFullListing(nlohmann::json::parse(bad), 5).ok()) << bad;
  }
}

TEST(ApiJobsTest, MetricIntakeRoundTripsAndReadsForPeople) {
  MetricIntakeView m{190000, 3371, 2, false};
  nlohmann::json j = m;
  EXPECT_EQ(j["lines_thinned"], 186629);
  auto back = Decode<MetricIntakeView>(j, "the metrics intake");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->lines_read, 190000);
  EXPECT_EQ(back->lines_kept, 3371);
  EXPECT_EQ(MetricIntakeText(*back), "190,000 lines read, 3,371 kept (thinned); 2 skipped (too long or not a metric line)");
  EXPECT_EQ(MetricIntakeText({5, 5, 0, true}),
            "5 lines read, 5 kept; reading behind the file (a flood is read over several rounds)");
}

}  // namespace
}  // namespace gpuherd::api
