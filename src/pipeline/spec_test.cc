#include "pipeline/spec.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuherd::pipeline {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::string ParseError(const std::string& yaml) {
  auto spec = ParsePipeline(yaml, "p.yaml");
  EXPECT_FALSE(spec.ok()) << "parsed without error:\n" << yaml;
  return spec.ok() ? "" : spec.status().message();
}

// The example of the pipeline file format in examples/pipelines/README.md.
constexpr const char* kExample = R"(name: lr-sweep
params: {epochs: 20, data: /data/cifar}
defaults: {gpus: 1, time_limit: 2h, retries: 2, preemptible: true, env: {OMP_NUM_THREADS: "4"}}
anomalies: {nan: restart, spike: {k: 10, window: 20, action: checkpoint}, stall: {after: 15m, action: stop}}
steps:
  prepare: {run: "python3 prep.py --out ${{ workspace }}/data", gpus: 0, artifacts: [data]}
  train:
    needs: [prepare]
    matrix: {lr: [0.1, 0.01], batch: [64, 128]}
    run: ["python3", "train.py", "--lr", "${{ matrix.lr }}", "--epochs", "${{ params.epochs }}",
          "--data", "${{ step.prepare.workspace }}/data"]
    env: {BATCH: "${{ matrix.batch }}"}
    retries: 3
  report: {needs: [train], if: always, run: "python3 report.py ${{ run.workspace }}", gpus: 0}
)";

TEST(ParsePipelineTest, ReadsTheDocumentedExample) {
  auto spec = ParsePipeline(kExample, "lr-sweep.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "lr-sweep");
  EXPECT_EQ(spec->source, "lr-sweep.yaml");
  EXPECT_THAT(spec->params,
              UnorderedElementsAre(Pair("epochs", "20"), Pair("data", "/data/cifar")));
  ASSERT_EQ(spec->steps.size(), 3u);

  const StepSpec& prepare = spec->steps[0];
  EXPECT_EQ(prepare.name, "prepare");
  EXPECT_EQ(prepare.line, 6);
  EXPECT_THAT(prepare.run, ElementsAre("python3", "prep.py", "--out", "${{ workspace }}/data"));
  EXPECT_EQ(prepare.resources["gpus"], 0);  // the step's value wins over defaults
  EXPECT_EQ(prepare.resources["time_limit"], "2h");
  EXPECT_EQ(prepare.resources["preemptible"], true);
  EXPECT_EQ(prepare.retries, 2);
  EXPECT_THAT(prepare.artifacts, ElementsAre("data"));

  const StepSpec& train = spec->steps[1];
  EXPECT_THAT(train.needs, ElementsAre("prepare"));
  EXPECT_EQ(train.retries, 3);
  EXPECT_EQ(train.run_if, RunIf::kSuccess);
  EXPECT_EQ(train.resources["gpus"], 1);
  ASSERT_EQ(train.matrix.kind, Matrix::Kind::kGrid);
  ASSERT_EQ(train.matrix.grid.size(), 2u);
  EXPECT_EQ(train.matrix.grid[0].name, "lr");
  EXPECT_THAT(train.matrix.grid[0].values, ElementsAre("0.1", "0.01"));
  EXPECT_THAT(train.matrix.grid[1].values, ElementsAre("64", "128"));
  EXPECT_THAT(train.env, UnorderedElementsAre(Pair("OMP_NUM_THREADS", "4"),
                                              Pair("BATCH", "${{ matrix.batch }}")));
  EXPECT_EQ(spec->steps[2].run_if, RunIf::kAlways);

  const AnomalyConfig& a = train.anomalies;
  EXPECT_TRUE(a.nan.enabled);
  EXPECT_EQ(a.nan.action, AnomalyAction::kRestart);
  EXPECT_TRUE(a.spike.enabled);
  EXPECT_EQ(a.spike.k, 10);
  EXPECT_EQ(a.spike.window, 20);
  EXPECT_EQ(a.spike.action, AnomalyAction::kCheckpoint);
  EXPECT_TRUE(a.stall.enabled);
  EXPECT_EQ(a.stall.after, 15 * kMinuteMs);
  EXPECT_EQ(a.stall.action, AnomalyAction::kStop);
}

TEST(ParsePipelineTest, ReadsARandomMatrix) {
  auto spec = ParsePipeline(R"(
steps:
  train:
    matrix:
      random:
        seed: 7
        count: 12
        params:
          lr: {loguniform: [1e-4, 1e-1]}
          dropout: {uniform: [0, 0.5]}
          layers: {int: [2, 6]}
          batch: {choice: [32, 64]}
    run: python3 train.py --lr ${{ matrix.lr }} --batch ${{ matrix.batch }}
)", "random.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->name, "random");  // named after the file when name: is missing
  const Matrix& m = spec->steps[0].matrix;
  ASSERT_EQ(m.kind, Matrix::Kind::kRandom);
  EXPECT_EQ(m.seed, 7u);
  EXPECT_EQ(m.count, 12);
  EXPECT_THAT(m.Names(), ElementsAre("lr", "dropout", "layers", "batch"));
  EXPECT_EQ(m.random[0].distribution.kind, Distribution::Kind::kLogUniform);
  EXPECT_DOUBLE_EQ(m.random[0].distribution.lo, 1e-4);
  EXPECT_DOUBLE_EQ(m.random[0].distribution.hi, 1e-1);
  EXPECT_EQ(m.random[1].distribution.kind, Distribution::Kind::kUniform);
  EXPECT_EQ(m.random[2].distribution.kind, Distribution::Kind::kInteger);
  EXPECT_THAT(m.random[3].distribution.choices, ElementsAre("32", "64"));
}

TEST(ParsePipelineTest, MergesDefaultsKeyByKey) {
  auto spec = ParsePipeline(R"(
defaults:
  env: {A: "1", B: "2"}
  labels: {team: vision, owner: ana}
  checkpoint: {grace: 60s}
  gpus: 0.5
  gpu_mem: 8GiB
steps:
  train:
    run: train
    env: {B: "3"}
    labels: {owner: bo}
)", "p.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const StepSpec& s = spec->steps[0];
  EXPECT_THAT(s.env, UnorderedElementsAre(Pair("A", "1"), Pair("B", "3")));
  EXPECT_EQ(s.resources["labels"], (nlohmann::json{{"team", "vision"}, {"owner", "bo"}}));
  EXPECT_EQ(s.resources["checkpoint"]["grace"], "60s");
  EXPECT_EQ(s.resources["gpus"], 0.5);
  EXPECT_EQ(s.resources["gpu_mem"], "8GiB");
}

TEST(ParsePipelineTest, StepAnomaliesOverrideThePipelinesKindByKind) {
  auto spec = ParsePipeline(R"(
anomalies: {nan: stop, stall: {after: 10m, action: restart}}
steps:
  prepare: {run: prep, anomalies: off}
  train: {run: train, anomalies: {stall: off, spike: {metrics: [val_loss], k: 4}}}
  eval: {run: eval}
)", "p.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_FALSE(spec->steps[0].anomalies.any());
  const AnomalyConfig& train = spec->steps[1].anomalies;
  EXPECT_TRUE(train.nan.enabled);
  EXPECT_FALSE(train.stall.enabled);
  EXPECT_TRUE(train.spike.enabled);
  EXPECT_EQ(train.spike.k, 4);
  EXPECT_EQ(train.spike.action, AnomalyAction::kCheckpoint);  // the default action
  EXPECT_THAT(train.spike.metrics, ElementsAre("val_loss"));
  const AnomalyConfig& eval = spec->steps[2].anomalies;
  EXPECT_TRUE(eval.stall.enabled);
  EXPECT_EQ(eval.stall.after, 10 * kMinuteMs);
  EXPECT_EQ(eval.stall.action, AnomalyAction::kRestart);
}

TEST(ParsePipelineTest, ExplainsBadInput) {
  EXPECT_THAT(ParseError("steps: [a, b]"), HasSubstr("p.yaml:1: steps must be a mapping"));
  EXPECT_THAT(ParseError("name: x"), HasSubstr("a pipeline needs steps:"));
  EXPECT_THAT(ParseError("steps: {a: {run: [x}"), HasSubstr("not valid YAML"));
  EXPECT_THAT(ParseError("steps:\n  a:\n    gpus: 1\n"),
              HasSubstr("p.yaml:2: step 'a' needs run:"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x}\n  a: {run: y}\n"),
              HasSubstr("p.yaml:3: step 'a' appears twice in steps"));
  EXPECT_THAT(ParseError("steps:\n  a/b: {run: x}\n"), HasSubstr("may use only letters"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, if: sometimes}\n"),
              HasSubstr("if: 'sometimes' is not known; write if: always"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, env: {GPUHERD_RESUME: '1'}}\n"),
              HasSubstr("env name 'GPUHERD_RESUME' is set by gpuherd itself"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, retries: -1}\n"),
              HasSubstr("retries must be a whole number from 0 to 100"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, needs: [a]}\n"),
              HasSubstr("cycle: a → a"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, time_limit: soon}\n"),
              HasSubstr("p.yaml:2: job spec field 'time_limit'"));
  EXPECT_THAT(ParseError("params: {lr: [1, 2]}\nsteps: {a: {run: x}}\n"),
              HasSubstr("parameter 'lr' must be a single value"));
  EXPECT_THAT(ParseError("params: {lr: }\nsteps: {a: {run: x}}\n"),
              HasSubstr("parameter 'lr' needs a default value"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: 'x ${{ wrkspace }}'}\n"),
              HasSubstr("${{ wrkspace }} is not defined (did you mean 'workspace'?)"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: 'x ${{ step.b.workspace }}'}\n"),
              HasSubstr("there is no step 'b'"));
  EXPECT_THAT(ParseError("anomalies: {spike: {k: 0.5}}\nsteps: {a: {run: x}}\n"),
              HasSubstr("spike.k must be more than 1"));
  EXPECT_THAT(ParseError("anomalies: {stall: {after: often}}\nsteps: {a: {run: x}}\n"),
              HasSubstr("stall.after 'often' is not a duration"));
  EXPECT_THAT(
      ParseError("anomalies: {nan: {action: stop, metric: [loss]}}\nsteps: {a: {run: x}}\n"),
      HasSubstr("unknown key 'metric' in anomalies.nan (did you mean 'metrics'?)"));
}

TEST(ParsePipelineTest, ExplainsBadMatrices) {
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, matrix: {lr: []}}\n"),
              HasSubstr("matrix.lr must be a non-empty list"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, matrix: {lr: [1, 2, 1]}}\n"),
              HasSubstr("matrix.lr lists '1' twice"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, matrix: {random: {count: 2, params: {lr: "
                         "{choice: [1]}}}, b: [1]}}\n"),
              HasSubstr("a random matrix has only random:"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, matrix: {random: {count: 2, params: {lr: "
                         "{loguniform: [0, 1]}}}}}\n"),
              HasSubstr("loguniform needs 0 < lo < hi"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, matrix: {random: {count: 2, params: {lr: "
                         "{gauss: [0, 1]}}}}}\n"),
              HasSubstr("unknown key 'gauss' in random.params.lr"));
  EXPECT_THAT(
      ParseError("steps:\n  a: {run: x, matrix: {random: {params: {lr: {int: [1, 3]}}}}}\n"),
      HasSubstr("a random matrix needs count:"));
  EXPECT_THAT(
      ParseError("steps:\n  a: {run: x, matrix: {a: [1,2,3,4,5,6,7,8,9,10], b: "
                 "[1,2,3,4,5,6,7,8,9,10], c: [1,2,3,4,5,6,7,8,9,10], d: [1,2,3,4,5,6,7,8,9,10], "
                 "e: [1, 2]}}\n"),
      HasSubstr("more than 10000 points"));
}

TEST(ParsePipelineTest, ReadsAnObjectiveAndEarlyStopping) {
  auto spec = ParsePipeline(R"(steps:
  train:
    matrix: {lr: [0.1, 0.01, 0.001]}
    run: train --lr ${{ matrix.lr }}
    objective: {metric: val_loss, mode: min}
    early_stop: {policy: asha, grace: 100, reduction: 3}
  tune:
    matrix: {random: {sampler: sobol, seed: 3, count: 8, params: {lr: {loguniform: [1e-4, 1e-1]}}}}
    run: train --lr ${{ matrix.lr }}
    objective: {metric: acc, mode: max, summary: best}
    early_stop: {policy: median, grace: 5, min_completed: 2}
)", "p.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const StepSpec& train = spec->steps[0];
  ASSERT_TRUE(train.objective && train.early_stop);
  EXPECT_EQ(train.objective->metric, "val_loss");
  EXPECT_EQ(train.objective->mode, ObjectiveMode::kMin);
  EXPECT_EQ(train.objective->summary, ObjectiveSummary::kLast);  // the default
  EXPECT_EQ(train.early_stop->kind, EarlyStopPolicy::Kind::kAsha);
  EXPECT_EQ(train.early_stop->grace, 100);
  EXPECT_EQ(train.early_stop->reduction, 3);
  const StepSpec& tune = spec->steps[1];
  EXPECT_EQ(tune.matrix.sampler, Matrix::Sampler::kSobol);
  EXPECT_EQ(tune.objective->mode, ObjectiveMode::kMax);
  EXPECT_EQ(tune.objective->summary, ObjectiveSummary::kBest);
  EXPECT_EQ(tune.early_stop->kind, EarlyStopPolicy::Kind::kMedian);
  EXPECT_EQ(tune.early_stop->min_completed, 2);
}

TEST(ParsePipelineTest, ExplainsBadObjectivesAndEarlyStopping) {
  const std::string sweep = "steps:\n  a:\n    run: x\n    matrix: {lr: [1, 2]}\n";
  EXPECT_THAT(ParseError("steps:\n  a:\n    run: x\n    objective: {metric: loss, mode: min}\n"),
              HasSubstr("p.yaml:4: step 'a' has objective: but no matrix:"));
  EXPECT_THAT(ParseError(sweep + "    objective: {metric: loss}\n"), HasSubstr("objective needs mode: min"));
  EXPECT_THAT(ParseError(sweep + "    objective: {metric: loss, mode: lowest}\n"),
              HasSubstr("objective.mode must be min or max, not 'lowest'"));
  EXPECT_THAT(ParseError(sweep + "    objective: {mode: min}\n"), HasSubstr("objective needs metric:"));
  EXPECT_THAT(ParseError(sweep + "    objective: {metric: loss, mode: min, summary: lastt}\n"),
              HasSubstr("objective.summary must be last (the value at the point's last logged step) or best, not "
                        "'lastt' (did you mean 'last'?)"));
  EXPECT_THAT(ParseError(sweep + "    objective: {metric: loss, mode: min, sumary: best}\n"),
              HasSubstr("did you mean 'summary'"));
  EXPECT_THAT(ParseError(sweep + "    early_stop: {policy: asha, grace: 10}\n"),
              HasSubstr("has early_stop: but no objective:"));
  const std::string with_objective = sweep + "    objective: {metric: loss, mode: min}\n";
  EXPECT_THAT(ParseError(with_objective + "    early_stop: {policy: hyperband, grace: 10}\n"),
              HasSubstr("early_stop.policy must be asha or median, not 'hyperband'"));
  EXPECT_THAT(ParseError(with_objective + "    early_stop: {policy: asha}\n"), HasSubstr("early_stop needs grace:"));
  EXPECT_THAT(ParseError(with_objective + "    early_stop: {policy: asha, grace: 0}\n"), HasSubstr("grace"));
  EXPECT_THAT(ParseError(with_objective + "    early_stop: {policy: asha, grace: 10, reduction: 1}\n"),
              HasSubstr("reduction"));
  EXPECT_THAT(ParseError(with_objective + "    early_stop: {policy: median, grace: 10, reduction: 3}\n"),
              HasSubstr("reduction is ASHA's"));
  EXPECT_THAT(ParseError(with_objective + "    early_stop: {policy: asha, grace: 10, patience: 3}\n"),
              HasSubstr("unknown key 'patience' in early_stop"));
  EXPECT_THAT(ParseError("steps:\n  a: {run: x, matrix: {random: {sampler: halton, count: 2, params: {lr: "
                         "{choice: [1]}}}}}\n"),
              HasSubstr("random.sampler must be uniform"));
}

// Each file in examples/pipelines/invalid starts with "# expect: <text>",
// a part of the error it must produce.
TEST(ParsePipelineTest, RejectsEveryInvalidExampleWithItsError) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(GPUHERD_EXAMPLES_DIR "/invalid")) {
    if (entry.path().extension() != ".yaml") continue;
    ++files;
    std::ifstream in(entry.path());
    std::string first;
    std::getline(in, first);
    const std::string kPrefix = "# expect: ";
    ASSERT_EQ(first.rfind(kPrefix, 0), 0u) << entry.path() << " has no '# expect:' line";
    auto spec = LoadPipeline(entry.path().string());
    ASSERT_FALSE(spec.ok()) << entry.path() << " parsed without error";
    EXPECT_THAT(spec.status().message(), HasSubstr(first.substr(kPrefix.size())))
        << entry.path();
    EXPECT_THAT(spec.status().message(), HasSubstr(entry.path().string() + ":"));
  }
  EXPECT_GE(files, 10);
}

TEST(LoadPipelineTest, ReadsTheSweepExampleAndRemembersItsFolder) {
  auto spec = LoadPipeline(GPUHERD_EXAMPLES_DIR "/sweep.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->base_dir,
            std::filesystem::path(GPUHERD_EXAMPLES_DIR).lexically_normal().string());
  ASSERT_NE(spec->FindStep("train"), nullptr);
  EXPECT_EQ(spec->FindStep("train")->resources["gpus"], 0.1);
  EXPECT_EQ(spec->FindStep("nothing"), nullptr);
}

TEST(LoadPipelineTest, TheAshaExampleDeclaresItsObjectiveAndPolicy) {
  auto spec = LoadPipeline(std::string(GPUHERD_EXAMPLES_DIR) + "/asha.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const StepSpec* train = spec->FindStep("train");
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->matrix.sampler, Matrix::Sampler::kSobol);
  ASSERT_TRUE(train->objective && train->early_stop);
  EXPECT_EQ(train->objective->metric, "acc");
  EXPECT_EQ(train->early_stop->grace, 25);
  auto sweep = LoadPipeline(std::string(GPUHERD_EXAMPLES_DIR) + "/sweep.yaml");
  ASSERT_TRUE(sweep.ok());
  EXPECT_TRUE(sweep->FindStep("train")->objective.has_value());
}

TEST(LoadPipelineTest, ReportsAMissingFile) {
  auto spec = LoadPipeline("/nonexistent/pipeline.yaml");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), Code::kNotFound);
  EXPECT_THAT(spec.status().message(), HasSubstr("/nonexistent/pipeline.yaml"));
}

// Found by pipeline_fuzz (fuzz/corpus/pipeline_fuzz/not_utf8_run.yaml): a
// command holding a byte that is not UTF-8 parsed, then made Expand's dump()
// throw, which ended `gpuherd run` (and would end a daemon handler).
TEST(SpecLimitsTest, TextThatIsNotUtf8IsRefusedWithItsLine) {
  EXPECT_EQ(ParseError("name: x\nsteps:\n  a:\n    run: echo \xFF{\n"),
            "p.yaml:4: text that is not valid UTF-8 (YAML is read as UTF-8)");
}

}  // namespace
}  // namespace gpuherd::pipeline

namespace gpuherd::pipeline {
namespace {

TEST(ParsePipelineTest, ReadsTheBackendAndItsSlurmSettings) {
  auto spec = ParsePipeline(R"(name: p
backend: slurm
slurm: {partition: gpu, account: lab, sbatch_args: [--qos=high, --constraint=a100]}
steps:
  t: {run: "true"}
)",
                            "p.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->backend.name, "slurm");
  EXPECT_EQ(spec->backend.partition, "gpu");
  EXPECT_EQ(spec->backend.account, "lab");
  EXPECT_THAT(spec->backend.sbatch_args, ElementsAre("--qos=high", "--constraint=a100"));

  auto plain = ParsePipeline("steps: {t: {run: 'true'}}\n", "p.yaml");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->backend.name, "");  // the daemon's default

  EXPECT_THAT(ParseError("backend: kubernetes\nsteps: {t: {run: 'true'}}\n"),
              HasSubstr("p.yaml:1: backend must be local (this machine's queue) or slurm, not 'kubernetes'"));
  EXPECT_THAT(ParseError("slurm: {partiton: gpu}\nsteps: {t: {run: 'true'}}\n"),
              HasSubstr("unknown key 'partiton' in slurm"));
  EXPECT_THAT(ParseError("slurm: {sbatch_args: [qos=high]}\nsteps: {t: {run: 'true'}}\n"),
              HasSubstr("not 'qos=high'"));
}

}  // namespace
}  // namespace gpuherd::pipeline

namespace gpuherd::pipeline {
namespace {

// 636 bytes that a walk would expand to 10^9 scalars: refused at parse time,
// with the file named, before any step is read.
TEST(SpecLimitsTest, BillionLaughsIsRefused) {
  std::string yaml = "name: laughs\nx0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 9; ++i) {
    yaml += "x" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int j = 0; j < 10; ++j) yaml += (j ? ", *a" : "*a") + std::to_string(i - 1);
    yaml += "]\n";
  }
  yaml += "steps: {a: {run: [echo, *a9]}}\n";
  EXPECT_THAT(ParseError(yaml), HasSubstr("p.yaml:"));
  EXPECT_THAT(ParseError(yaml), HasSubstr("alias"));
}

TEST(SpecLimitsTest, AliasesWithinTheLimitsStillWork) {
  auto spec = ParsePipeline(
      "defaults: &d {gpus: 1}\nsteps:\n  a: {run: echo a, gpus: 2}\n  b: {run: echo b, needs: [a]}\n",
      "p.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
}

TEST(SpecLimitsTest, DeepNestingIsRefusedWithItsLine) {
  const std::string yaml = "name: deep\nsteps:\n  a: {run: echo, labels: {x: " + std::string(50, '[') +
                           std::string(50, ']') + "}}\n";
  EXPECT_THAT(ParseError(yaml), HasSubstr("p.yaml:3: lists and mappings nest deeper than 32"));
}

TEST(SpecLimitsTest, OutOfRangeNumbersStateTheRange) {
  EXPECT_THAT(ParseError("steps:\n  a:\n    run: echo\n    matrix: {random: {count: 5, params: "
                         "{x: {uniform: [0, 1e400]}}}}\n"),
              HasSubstr("must be a number from"));
}

}  // namespace
}  // namespace gpuherd::pipeline
