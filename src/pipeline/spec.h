// A pipeline file: the YAML a researcher writes, read and checked before
// anything runs. Every error names the file, the line and what to write
// instead. The file format is documented in examples/pipelines/README.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "pipeline/anomaly.h"
#include "pipeline/early_stop.h"

namespace gpuherd::pipeline {

// How a random sweep draws one parameter (see plan.h for the exact method).
struct Distribution {
  enum class Kind {
    kChoice,      // one of `choices`, each equally likely
    kUniform,     // a real number in [lo, hi)
    kLogUniform,  // a real number whose logarithm is uniform in [log lo, log hi)
    kInteger,     // a whole number in [lo, hi], both included
  };
  Kind kind = Kind::kChoice;
  std::vector<std::string> choices;
  double lo = 0, hi = 0;
};

// A step's `matrix:`: none, a grid (every combination of the axes' values)
// or `count` random points drawn with `seed`.
struct Matrix {
  enum class Kind { kNone, kGrid, kRandom };
  struct Axis {
    std::string name;
    std::vector<std::string> values;  // as written in the file
  };
  struct RandomParam {
    std::string name;
    Distribution distribution;
  };
  // How a random matrix draws its points: independent uniform draws, or a
  // seeded Sobol' sequence (see sobol.h) that covers the space more evenly.
  enum class Sampler { kUniform, kSobol };
  Kind kind = Kind::kNone;
  std::vector<Axis> grid;             // in file order; the first varies slowest
  Sampler sampler = Sampler::kUniform;
  uint64_t seed = 0;
  int count = 0;
  std::vector<RandomParam> random;    // in file order: the order of draws

  // The names `${{ matrix.NAME }}` may use.
  std::vector<std::string> Names() const;
};

enum class RunIf { kSuccess, kAlways };

struct StepSpec {
  std::string name;
  int line = 0;                            // where the step starts in the file
  // The command's arguments with `${{ ... }}` references not yet substituted.
  std::vector<std::string> run;
  std::vector<std::string> needs;          // step names
  Matrix matrix;
  std::map<std::string, std::string> env;  // defaults' env overlaid by the step's; templates
  std::string cwd;                         // template; empty: the pipeline file's folder
  // The job-spec resource fields (gpus, gpu_mem, model, min_cc, cpus, mem,
  // priority, time_limit, checkpoint, preemptible, max_restarts, labels),
  // defaults overlaid by the step, in sched::ParseJobSpec's JSON form.
  nlohmann::json resources = nlohmann::json::object();
  int retries = 0;                         // new attempts after a failure
  RunIf run_if = RunIf::kSuccess;
  std::vector<std::string> artifacts;      // paths relative to the step's workspace
  AnomalyConfig anomalies;                 // the pipeline's, overridden by the step's
  // `objective: {metric, mode}`: what ranks the step's points; needs a matrix.
  std::optional<Objective> objective;
  // `early_stop: {policy, grace, reduction}`: stops points that fall behind
  // by the objective (needs the objective).
  std::optional<EarlyStopPolicy> early_stop;
};

// `backend:` and `slurm:`: where a run's jobs go and the Slurm settings.
struct BackendChoice {
  std::string name;  // "local" or "slurm"; empty: the daemon's default
  std::string partition, account;        // slurm: only; empty: the site's
  std::vector<std::string> sbatch_args;  // added to every sbatch call
};

struct PipelineSpec {
  std::string name;
  std::string source;    // the file name used in error messages
  std::string base_dir;  // the pipeline file's folder: the steps' default cwd; may be empty
  // Parameters and their default values, overridable with -p key=value.
  std::map<std::string, std::string> params;
  AnomalyConfig anomalies;
  BackendChoice backend;
  std::vector<StepSpec> steps;  // in file order

  const StepSpec* FindStep(const std::string& name) const;
};

// Parses and validates a pipeline. `source` names the text in errors
// ("sweep.yaml:12: ..."). Checks everything that can be checked before the
// run: unknown keys, types, the job-spec fields of every step, `needs` that
// name no step, cycles, and every `${{ ... }}` reference.
Result<PipelineSpec> ParsePipeline(std::string_view yaml, const std::string& source);

// Reads and parses the file at `path`; base_dir becomes its absolute folder.
Result<PipelineSpec> LoadPipeline(const std::string& path);

}  // namespace gpuherd::pipeline
