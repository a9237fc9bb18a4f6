#include "pipeline/plan.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/job_spec.h"

namespace gpuherd::pipeline {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

PipelineSpec MustParse(const std::string& yaml) {
  auto spec = ParsePipeline(yaml, "p.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : PipelineSpec();
}

Plan MustExpand(const PipelineSpec& spec,
                const std::map<std::string, std::string>& overrides = {}) {
  auto plan = Expand(spec, overrides, "/runs/7");
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : Plan();
}

std::vector<std::string> Ids(const Plan& plan) {
  std::vector<std::string> ids;
  for (const PlanNode& n : plan.nodes) ids.push_back(n.id);
  return ids;
}

constexpr const char* kGrid = R"(name: lr-sweep
params: {epochs: 20}
defaults: {time_limit: 2h, retries: 2}
steps:
  report:
    needs: [train]
    if: always
    run: python3 report.py ${{ step.train.workspace }} ${{ run.workspace }}
  train:
    needs: [prepare]
    matrix: {lr: [0.1, 0.01], batch: [64, 128]}
    run: ["python3", "train.py", "--lr", "${{ matrix.lr }}", "--epochs", "${{ params.epochs }}",
          "--data", "${{ step.prepare.workspace }}/data", "--name", "${{ point }}"]
    env: {BATCH: "${{ matrix.batch }}", INDEX: "${{ point.index }}"}
    gpus: 0.5
    gpu_mem: 8GiB
    labels: {team: vision}
  prepare: {run: "python3 prep.py --out '${{ workspace }}/data'", artifacts: [data, meta/info]}
)";

TEST(ExpandTest, MakesOneNodePerPointInDependencyOrder) {
  Plan plan = MustExpand(MustParse(kGrid));
  EXPECT_EQ(plan.name, "lr-sweep");
  EXPECT_EQ(plan.run_dir, "/runs/7");
  EXPECT_THAT(Ids(plan), ElementsAre("prepare", "train[lr=0.1,batch=64]", "train[lr=0.1,batch=128]",
                                     "train[lr=0.01,batch=64]", "train[lr=0.01,batch=128]",
                                     "report"));
  EXPECT_EQ(plan.nodes[0].key, "prepare");
  EXPECT_EQ(plan.nodes[3].key, "train/2");
  EXPECT_EQ(plan.nodes[3].step, "train");
  EXPECT_EQ(plan.nodes[3].point, 2);
  EXPECT_THAT(plan.nodes[3].matrix, ElementsAre(Pair("lr", "0.01"), Pair("batch", "64")));
  EXPECT_THAT(plan.nodes[3].needs, ElementsAre("prepare"));
  EXPECT_THAT(plan.nodes[3].need_nodes, ElementsAre(0u));
  EXPECT_EQ(plan.nodes[3].retries, 2);
  EXPECT_FALSE(plan.nodes[3].always);
  const PlanNode& report = plan.nodes[5];
  EXPECT_TRUE(report.always);
  EXPECT_THAT(report.need_nodes, ElementsAre(1u, 2u, 3u, 4u));
  EXPECT_EQ(report.needs.front(), "train[lr=0.1,batch=64]");
  EXPECT_THAT(plan.nodes[0].artifacts, ElementsAre("prepare/data", "prepare/meta/info"));
  EXPECT_EQ(plan.Find("train[lr=0.01,batch=64]"), 3);
  EXPECT_EQ(plan.Find("train"), -1);
}

TEST(ExpandTest, SubstitutesEveryReferenceIntoAValidJobSpec) {
  Plan plan = MustExpand(MustParse(kGrid));
  const sched::JobSpec& job = plan.nodes[2].job;  // train[lr=0.1,batch=128]
  EXPECT_THAT(job.argv, ElementsAre("python3", "train.py", "--lr", "0.1", "--epochs", "20", "--data",
                                    "/runs/7/prepare/data", "--name", "lr=0.1,batch=128"));
  EXPECT_EQ(job.env.at("BATCH"), "128");
  EXPECT_EQ(job.env.at("INDEX"), "1");
  EXPECT_EQ(job.env.at("GPUHERD_WORKSPACE"), "/runs/7/train/1");
  EXPECT_EQ(job.env.at("GPUHERD_RUN_DIR"), "/runs/7");
  EXPECT_EQ(job.env.at("GPUHERD_CHECKPOINT_DIR"), "/runs/7/.checkpoints/train/1");
  EXPECT_EQ(plan.nodes[2].checkpoint_dir, "/runs/7/.checkpoints/train/1");
  EXPECT_EQ(job.name, "lr-sweep/train[lr=0.1,batch=128]");
  EXPECT_EQ(job.labels.at("team"), "vision");
  EXPECT_EQ(job.labels.at("gpuherd/step"), "train");
  EXPECT_EQ(job.labels.at("gpuherd/node"), "train[lr=0.1,batch=128]");
  EXPECT_EQ(job.cwd, "");  // parsed from text: no folder to run in
  // Resources as POST /v1/jobs reads them.
  EXPECT_EQ(job.gpu_twentieths, 10);
  EXPECT_EQ(job.gpu_mem_bytes, 8ull << 30);
  EXPECT_EQ(job.time_limit, 2 * kHourMs);

  EXPECT_THAT(plan.nodes[0].job.argv, ElementsAre("python3", "prep.py", "--out", "/runs/7/prepare/data"));
  EXPECT_THAT(plan.nodes[5].job.argv, ElementsAre("python3", "report.py", "/runs/7/train", "/runs/7"));
}

TEST(ExpandTest, AppliesOverridesAndRefusesUnknownOnes) {
  PipelineSpec spec = MustParse(kGrid);
  Plan plan = MustExpand(spec, {{"epochs", "3"}});
  EXPECT_EQ(plan.params.at("epochs"), "3");
  EXPECT_EQ(plan.nodes[1].job.argv[5], "3");

  auto bad = Expand(spec, {{"epoch", "3"}}, "/runs/7");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("-p epoch: the pipeline p.yaml has no parameter 'epoch' (did you mean "
                        "'epochs'?); its parameters are: epochs"));
}

// What Expand takes besides the checked YAML (a -p value, the folders, from
// the CLI's argv) is checked for UTF-8 too: the plan's JSON could not be
// written otherwise (dump() throws).
TEST(ExpandTest, RefusesTextThatIsNotUtf8) {
  PipelineSpec spec = MustParse(kGrid);
  auto value = Expand(spec, {{"epochs", "3\xFF"}}, "/runs/7");
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().message(), "-p epochs: the value is not valid UTF-8");
  EXPECT_FALSE(Expand(spec, {}, "/runs/\xC3").ok());
  spec.base_dir = "/home/u/\xED\xA0\x80";
  EXPECT_FALSE(Expand(spec, {}, "/runs/7").ok());
}

TEST(ExpandTest, ResolvesCwdAgainstThePipelinesFolder) {
  PipelineSpec spec = MustParse(R"(
steps:
  a: {run: x}
  b: {run: x, cwd: 'sub/${{ point.index }}'}
  c: {run: x, cwd: /abs}
)");
  spec.base_dir = "/home/ana/exp";
  Plan plan = MustExpand(spec);
  EXPECT_EQ(plan.nodes[0].job.cwd, "/home/ana/exp");
  EXPECT_EQ(plan.nodes[1].job.cwd, "/home/ana/exp/sub/0");
  EXPECT_EQ(plan.nodes[2].job.cwd, "/abs");
}

TEST(ExpandTest, RefusesARelativeRunFolder) {
  auto plan = Expand(MustParse("steps: {a: {run: x}}"), {}, "runs/7");
  EXPECT_THAT(plan.status().message(), HasSubstr("must be an absolute path"));
}

TEST(ExpandTest, RefusesACommandThatSubstitutesToNothing) {
  auto plan = Expand(MustParse("params: {prog: ''}\nsteps: {a: {run: '${{ params.prog }} x'}}"),
                     {}, "/r");
  EXPECT_THAT(plan.status().message(), HasSubstr("p.yaml:2: step 'a', node a: job spec field "
                                                 "'command'"));
}

constexpr const char* kRandom = R"(
steps:
  train:
    matrix:
      random:
        seed: 7
        count: 12
        params:
          lr: {loguniform: [1e-4, 1e-1]}
          drop: {uniform: [0.1, 0.5]}
          layers: {int: [-2, 6]}
          batch: {choice: [32, 64, 128]}
    run: train --lr ${{ matrix.lr }}
)";

// The method documented in plan.h, computed here independently.
TEST(ExpandTest, DrawsRandomPointsByTheDocumentedMethod) {
  Plan plan = MustExpand(MustParse(kRandom));
  ASSERT_EQ(plan.nodes.size(), 12u);
  std::mt19937_64 gen(7);
  auto index = [&gen](uint64_t n) {
    for (;;) {
      uint64_t x = gen();
      if (x >= (0 - n) % n) return x % n;
    }
  };
  auto unit = [&gen] { return static_cast<double>(gen() >> 11) / 9007199254740992.0; };
  const std::vector<std::string> batches = {"32", "64", "128"};
  for (int i = 0; i < 12; ++i) {
    const double u_lr = unit();
    const std::string lr = fmt::format(
        "{:.4g}", std::exp(std::log(1e-4) + (std::log(1e-1) - std::log(1e-4)) * u_lr));
    const std::string drop = fmt::format("{:.4g}", 0.1 + 0.4 * unit());
    const std::string layers = std::to_string(-2 + static_cast<int64_t>(index(9)));
    const std::string batch = batches[index(3)];
    const PlanNode& node = plan.nodes[i];
    EXPECT_THAT(node.matrix, ElementsAre(Pair("lr", lr), Pair("drop", drop),
                                         Pair("layers", layers), Pair("batch", batch)))
        << "point " << i;
    EXPECT_EQ(node.key, "train/" + std::to_string(i));
    EXPECT_EQ(node.job.argv[2], lr);
  }
}

TEST(ExpandTest, RandomPointsDependOnlyOnTheSeed) {
  PipelineSpec spec = MustParse(kRandom);
  EXPECT_EQ(Ids(MustExpand(spec)), Ids(MustExpand(spec)));
  PipelineSpec other = spec;
  other.steps[0].matrix.seed = 8;
  EXPECT_NE(Ids(MustExpand(spec)), Ids(MustExpand(other)));
  for (const PlanNode& node : MustExpand(spec).nodes) {
    const double lr = std::stod(node.matrix[0].second);
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    const int layers = std::stoi(node.matrix[2].second);
    EXPECT_GE(layers, -2);
    EXPECT_LE(layers, 6);
  }
}

TEST(ExpandTest, SobolPointsCoverEveryStratumOfEachParameter) {
  // 8 points over [0, 8) per parameter: one in each unit interval, whatever
  // the seed; independent draws would leave some empty.
  const char* yaml = R"(steps:
  t:
    matrix: {random: {sampler: sobol, seed: SEED, count: 8, params: {a: {uniform: [0, 8]}, b: {int: [0, 7]},
             c: {choice: [p, q, r, s, t, u, v, w]}}}}
    run: x ${{ matrix.a }} ${{ matrix.b }} ${{ matrix.c }}
    objective: {metric: loss, mode: min}
)";
  for (const char* seed : {"1", "42"}) {
    std::string text = yaml;
    text.replace(text.find("SEED"), 4, seed);
    Plan plan = MustExpand(MustParse(text));
    ASSERT_EQ(plan.nodes.size(), 8u);
    std::set<int> a, b;
    std::set<std::string> c;
    for (const PlanNode& n : plan.nodes) {
      a.insert(static_cast<int>(std::stod(n.matrix[0].second)));
      b.insert(std::stoi(n.matrix[1].second));
      c.insert(n.matrix[2].second);
    }
    EXPECT_EQ(a.size(), 8u) << "seed " << seed;
    EXPECT_EQ(b.size(), 8u) << "seed " << seed;
    EXPECT_EQ(c.size(), 8u) << "seed " << seed;
    EXPECT_EQ(plan.objectives.count("t"), 1u);
  }
}

TEST(ExpandTest, HardwareRestartsAreTheQueuesNotTheNodesRetries) {
  Plan plan = MustExpand(MustParse("steps:\n  a: {run: x, retries: 1}\n  b: {run: x, max_restarts: 2}\n"));
  EXPECT_EQ(plan.nodes[0].job.max_restarts, kNodeFaultRestarts);
  EXPECT_EQ(plan.nodes[1].job.max_restarts, 2);
}

TEST(ExpandTest, KeepsIdsUniqueWhenARandomSweepRepeatsAPoint) {
  Plan plan = MustExpand(MustParse(R"(
steps:
  a:
    matrix: {random: {seed: 1, count: 5, params: {x: {choice: [only]}}}}
    run: x
)"));
  EXPECT_THAT(Ids(plan), ElementsAre("a[x=only]", "a[x=only,#2]", "a[x=only,#3]", "a[x=only,#4]",
                                     "a[x=only,#5]"));
  std::set<std::string> keys;
  for (const PlanNode& n : plan.nodes) keys.insert(n.key);
  EXPECT_EQ(keys.size(), 5u);
}

TEST(ExpandTest, ExpandsTheSweepExampleToTwelvePointsAndAReport) {
  auto spec = LoadPipeline(GPUHERD_EXAMPLES_DIR "/sweep.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  Plan plan = MustExpand(*spec, {{"steps", "40"}});
  ASSERT_EQ(plan.nodes.size(), 13u);
  std::set<std::string> points;
  for (int i = 0; i < 12; ++i) {
    const PlanNode& n = plan.nodes[i];
    points.insert(n.id);
    EXPECT_EQ(n.job.gpu_twentieths, 2);
    EXPECT_EQ(n.job.argv[1], "../trainers/toy_trainer.py");
    EXPECT_EQ(n.job.cwd, spec->base_dir);
    EXPECT_THAT(n.job.argv, Contains("--steps"));
    EXPECT_EQ(n.job.argv[std::find(n.job.argv.begin(), n.job.argv.end(), "--steps") - n.job.argv.begin() + 1], "40");
    EXPECT_EQ(n.retries, 2);
  }
  EXPECT_EQ(points.size(), 12u);
  EXPECT_EQ(plan.nodes[12].id, "report");
  EXPECT_TRUE(plan.nodes[12].always);
  EXPECT_FALSE(plan.nodes[12].anomalies.any());
  EXPECT_TRUE(plan.nodes[0].anomalies.nan.enabled);
}

TEST(ParseOverrideTest, SplitsAtTheFirstEqualsSign) {
  auto kv = ParseOverride("data=/d/x=1");
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->first, "data");
  EXPECT_EQ(kv->second, "/d/x=1");
  EXPECT_THAT(ParseOverride("epochs").status().message(), HasSubstr("key=value"));
  EXPECT_FALSE(ParseOverride("=3").ok());
}

}  // namespace
}  // namespace gpuherd::pipeline

namespace gpuherd::pipeline {
namespace {

// Ten steps of 10,000 random points each: every step is under the per-step
// cap, the run is not. Refused before a point is drawn.
TEST(PlanLimitsTest, TotalNodesAreBoundedBeforeExpanding) {
  std::string yaml = "name: big\nsteps:\n";
  for (int i = 0; i < 10; ++i) {
    yaml += fmt::format("  s{}: {{run: [echo, '${{{{ matrix.x }}}}'], matrix: {{random: {{count: "
                        "10000, params: {{x: {{uniform: [0, 1]}}}}}}}}}}\n",
                        i);
  }
  PipelineSpec spec = MustParse(yaml);
  ASSERT_EQ(spec.steps.size(), 10u);
  auto plan = Expand(spec, {}, "/runs/1");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("expands to 100000 jobs (step 's0' alone has 10000); a run holds at most 20000"));
}

// Issue 29: a limit's message states the true count, at the limit and on
// either side of it (20,000 jobs a run).
TEST(PlanLimitsTest, MessagesCountTrulyAtTheBoundary) {
  auto spec_of = [](int a, int b, int c) {
    return MustParse(fmt::format(
        "steps:\n"
        "  a: {{run: [echo, '${{{{ matrix.x }}}}'], matrix: {{random: {{count: {}, params: {{x: {{uniform: [0, 1]}}}}}}}}}}\n"
        "  b: {{run: [echo, '${{{{ matrix.x }}}}'], matrix: {{random: {{count: {}, params: {{x: {{uniform: [0, 1]}}}}}}}}}}\n"
        "  c: {{run: [echo, '${{{{ matrix.x }}}}'], matrix: {{random: {{count: {}, params: {{x: {{uniform: [0, 1]}}}}}}}}}}\n",
        a, b, c));
  };
  EXPECT_TRUE(Expand(spec_of(10000, 9998, 1), {}, "/runs/1").ok());   // 19,999
  EXPECT_TRUE(Expand(spec_of(10000, 9999, 1), {}, "/runs/1").ok());   // 20,000: the limit itself fits
  auto over = Expand(spec_of(10000, 10000, 1), {}, "/runs/1");        // 20,001
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(),
              HasSubstr("expands to 20001 jobs (step 'a' alone has 10000); a run holds at most 20000 jobs"));
}

// A grid made in code (not through the file's 10,000-point cap): its own
// count is given, not the limit plus one as before.
TEST(PlanLimitsTest, AStepOverTheLimitAloneIsNamedWithItsCount) {
  PipelineSpec spec = MustParse(
      "steps:\n"
      "  g: {run: [echo, '${{ matrix.x }}'], matrix: {x: [1, 2]}}\n");
  ASSERT_EQ(spec.steps[0].matrix.kind, Matrix::Kind::kGrid);
  auto axis = [](const std::string& name, int n) {
    Matrix::Axis a{name, {}};
    for (int i = 0; i < n; ++i) a.values.push_back(std::to_string(i));
    return a;
  };
  spec.steps[0].matrix.grid = {axis("x", 300), axis("y", 101)};
  auto plan = Expand(spec, {}, "/runs/1");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("step 'g' alone expands to 30300 jobs; a run holds at most 20000"));
  // Past 64 bits: said so, never a wrapped-around count.
  spec.steps[0].matrix.grid = {};
  for (int i = 0; i < 7; ++i) spec.steps[0].matrix.grid.push_back(axis("p" + std::to_string(i), 1000));
  plan = Expand(spec, {}, "/runs/1");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("step 'g' alone expands to more than 18446744073709551615 jobs"));
}

// Two sweeps of 10,000 where the second needs the first: 10^8 need pairs.
TEST(PlanLimitsTest, NeedPairsAreBounded) {
  PipelineSpec spec = MustParse(
      "steps:\n"
      "  a: {run: [echo, '${{ matrix.x }}'], matrix: {random: {count: 10000, params: {x: {uniform: [0, 1]}}}}}\n"
      "  b: {run: [echo, '${{ matrix.x }}'], needs: [a], matrix: {random: {count: 10000, params: {x: {uniform: [0, 1]}}}}}\n");
  auto plan = Expand(spec, {}, "/runs/1");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("join 100000000 pairs of jobs"));
  EXPECT_THAT(plan.status().message(), HasSubstr("at most 200000"));
}

// Each node's text is small in the file but large once parameters are
// substituted: the plan's bytes are counted as it is built.
TEST(PlanLimitsTest, PlanBytesAreBounded) {
  PipelineSpec spec = MustParse(
      "params: {big: x}\n"
      "steps:\n"
      "  a: {run: [echo, '${{ params.big }}'], matrix: {random: {count: 5000, params: {x: {uniform: [0, 1]}}}}}\n");
  auto plan = Expand(spec, {{"big", std::string(16384, 'y')}}, "/runs/1");
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(), HasSubstr("more than 32 MiB"));
}

}  // namespace
}  // namespace gpuherd::pipeline
