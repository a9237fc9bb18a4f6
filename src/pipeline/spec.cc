#include "pipeline/spec.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <functional>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/suggest.h"
#include "core/yaml.h"
#include "pipeline/sobol.h"
#include "pipeline/template.h"
#include "sched/job_spec.h"

namespace gpuherd::pipeline {
namespace {

constexpr int kMaxPoints = 10000;

YamlLimits PipelineYamlLimits() { return YamlLimits(); }
constexpr int kMaxRetries = 100;

// The job-spec fields a step (or defaults:) may set, passed to
// sched::ParseJobSpec as they are. command, name and depends_on are not
// among them: run:, the node id and needs: take their place.
const std::vector<std::string>& ResourceKeys() {
  static const std::vector<std::string> kKeys = {
      "gpus",       "gpu_mem",    "model",       "min_cc",       "cpus",  "mem",
      "priority",   "time_limit", "checkpoint",  "preemptible", "max_restarts", "labels", "mixed_models"};
  return kKeys;
}

std::vector<std::string> With(std::vector<std::string> keys, const std::vector<std::string>& more) {
  keys.insert(keys.end(), more.begin(), more.end());
  return keys;
}

bool IsResourceKey(const std::string& key) {
  const auto& keys = ResourceKeys();
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// Names of parameters, matrix axes and environment variables, and what an
// error says they must be.
constexpr const char* kIdentifierRule = "must be letters, digits and '_', not starting with a digit";
constexpr const char* kMatrixNameRule = "must be letters, digits and '_'";
bool IsIdentifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// Step names become folder names and parts of node ids.
bool IsStepName(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-';
  });
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

struct StepRef {
  size_t step;       // index into steps
  std::string name;  // the referenced step
  int line;
};

class Parser {
 public:
  explicit Parser(std::string source) : reader_(source) { spec_.source = std::move(source); }

  Result<PipelineSpec> Parse(std::string_view text) {
    auto loaded = LoadYaml(text, spec_.source, PipelineYamlLimits());
    if (!loaded.ok()) return loaded.status();
    const YAML::Node root = *loaded;
    try {
      GPUHERD_RETURN_IF_ERROR(ParseRoot(root));
    } catch (const YAML::Exception& e) {
      // Only reached on yaml-cpp surprises; the checks turn every known
      // problem into a Status first.
      return InvalidArgument(fmt::format("{}:{}: {}", spec_.source, e.mark.line + 1, e.msg));
    }
    return std::move(spec_);
  }

 private:
  static int Line(const YAML::Node& node) { return YamlReader::Line(node); }

  Status Error(int line, const std::string& what) const { return reader_.Error(line, what); }
  Status Error(const YAML::Node& node, const std::string& what) const {
    return reader_.Error(node, what);
  }

  Status CheckKeys(const YAML::Node& map, std::vector<std::string> allowed, std::string where) const {
    return reader_.CheckKeys(map, {std::move(where), std::move(allowed)});
  }

  Result<std::string> ScalarOf(const YAML::Node& node, const std::string& what) const {
    return reader_.Scalar(node, what);
  }

  Result<int64_t> IntOf(const YAML::Node& node, const std::string& what, int64_t lo,
                        int64_t hi) const {
    return reader_.Int(node, what, lo, hi);
  }

  Result<double> DoubleOf(const YAML::Node& node, const std::string& what, double lo,
                          double hi) const {
    return reader_.Double(node, what, lo, hi);
  }

  // A scalar or a list of scalars.
  Result<std::vector<std::string>> ListOf(const YAML::Node& node, const std::string& what) const {
    return reader_.List(node, what);
  }

  Status ParseRoot(const YAML::Node& root) {
    if (!root.IsMap()) {
      return Error(root, "a pipeline must be a mapping with at least steps:, e.g.\n"
                         "  name: my-pipeline\n  steps:\n    train: {run: python3 train.py}");
    }
    GPUHERD_RETURN_IF_ERROR(CheckKeys(
        root, {"name", "description", "params", "defaults", "anomalies", "backend", "slurm", "steps"},
        "the pipeline"));
    GPUHERD_RETURN_IF_ERROR(ParseName(root));
    GPUHERD_RETURN_IF_ERROR(ParseBackend(root));
    if (root["params"]) GPUHERD_RETURN_IF_ERROR(ParseParams(root["params"]));
    if (YAML::Node defaults = root["defaults"]) {
      if (!defaults.IsMap()) {
        return Error(defaults, "defaults must be a mapping such as {gpus: 1, retries: 2}");
      }
      auto entries = reader_.Entries(defaults, {"defaults", With(ResourceKeys(), {"env", "cwd", "retries"})});
      if (!entries.ok()) return entries.status();
      defaults_ = std::move(entries).value();
    }
    if (root["anomalies"]) {
      GPUHERD_RETURN_IF_ERROR(ParseAnomalies(root["anomalies"], &spec_.anomalies));
    }
    YAML::Node steps = root["steps"];
    if (!steps) return Error(root, "a pipeline needs steps:, e.g. steps: {train: {run: ...}}");
    if (!steps.IsMap() || steps.size() == 0) {
      return Error(steps, "steps must be a mapping of step names to steps, e.g.\n"
                          "  steps:\n    train: {run: python3 train.py}");
    }
    auto entries = reader_.Entries(
        steps, YamlKeys::Names("steps", "step", IsStepName, "may use only letters, digits, '_' and '-'"));
    if (!entries.ok()) return entries.status();
    for (const YamlReader::Entry& step : *entries) {
      GPUHERD_RETURN_IF_ERROR(ParseStep(step.key, step.key_node, step.value));
    }
    GPUHERD_RETURN_IF_ERROR(CheckGraph());
    return CheckStepRefs();
  }

  Status ParseName(const YAML::Node& root) {
    if (!root["name"]) {
      // A pipeline without a name is called after its file.
      spec_.name = std::filesystem::path(spec_.source).stem().string();
      if (!IsStepName(spec_.name)) spec_.name = "pipeline";
      return Status::Ok();
    }
    auto name = ScalarOf(root["name"], "name");
    if (!name.ok()) return name.status();
    if (!IsStepName(*name)) {
      return Error(root["name"], fmt::format("name '{}' may use only letters, digits, '_' and "
                                             "'-'", *name));
    }
    spec_.name = *name;
    return Status::Ok();
  }

  Status ParseBackend(const YAML::Node& root) {
    if (root["backend"]) {
      auto name = ScalarOf(root["backend"], "backend");
      if (!name.ok()) return name.status();
      if (*name != "local" && *name != "slurm") {
        return Error(root["backend"], fmt::format("backend must be local (this machine's queue) or slurm, not '{}'",
                                                  *name));
      }
      spec_.backend.name = *name;
    }
    YAML::Node slurm = root["slurm"];
    if (!slurm) return Status::Ok();
    if (!slurm.IsMap()) {
      return Error(slurm, "slurm must be a mapping such as {partition: gpu, account: lab, sbatch_args: [--qos=high]}");
    }
    GPUHERD_RETURN_IF_ERROR(CheckKeys(slurm, {"partition", "account", "sbatch_args"}, "slurm"));
    for (const char* key : {"partition", "account"}) {
      if (!slurm[key]) continue;
      auto value = ScalarOf(slurm[key], std::string("slurm.") + key);
      if (!value.ok()) return value.status();
      (std::string(key) == "partition" ? spec_.backend.partition : spec_.backend.account) = *value;
    }
    if (slurm["sbatch_args"]) {
      auto args = ListOf(slurm["sbatch_args"], "slurm.sbatch_args");
      if (!args.ok()) return args.status();
      for (const std::string& a : *args) {
        if (!StartsWith(a, "--")) {
          return Error(slurm["sbatch_args"], fmt::format("slurm.sbatch_args takes sbatch options written "
                                                         "--name=value, not '{}'", a));
        }
      }
      spec_.backend.sbatch_args = *args;
    }
    return Status::Ok();
  }

  Status ParseParams(const YAML::Node& params) {
    if (!params.IsMap()) {
      return Error(params, "params must be a mapping of names to default values, e.g. "
                           "{epochs: 20, data: /data/cifar}");
    }
    auto entries = reader_.Entries(params, YamlKeys::Names("params", "parameter", IsIdentifier, kIdentifierRule));
    if (!entries.ok()) return entries.status();
    for (const YamlReader::Entry& param : *entries) {
      if (param.value.IsNull()) {
        return Error(param.value, fmt::format("parameter '{}' needs a default value; write '' "
                                              "for an empty one", param.key));
      }
      auto value = ScalarOf(param.value, "parameter '" + param.key + "'");
      if (!value.ok()) return value.status();
      spec_.params[param.key] = *value;
    }
    return Status::Ok();
  }

  // `kind: ACTION`, `kind: off` or `kind: {action: ..., <fields>}`.
  Status ParseRuleHead(const YAML::Node& node, const std::string& kind,
                       const std::vector<std::string>& fields, bool* enabled,
                       AnomalyAction* action) const {
    const std::string kActions = "none, checkpoint, stop, restart (or off to disable the check)";
    auto parse_action = [&](const YAML::Node& n) -> Status {
      auto text = ScalarOf(n, kind + " action");
      if (!text.ok()) return text.status();
      if (*text == "off") {
        *enabled = false;
        return Status::Ok();
      }
      auto parsed = ParseAnomalyAction(*text);
      if (!parsed) {
        return Error(n, fmt::format("unknown action '{}' for {}; write one of {}", *text, kind,
                                    kActions));
      }
      *enabled = true;
      *action = *parsed;
      return Status::Ok();
    };
    if (node.IsScalar()) return parse_action(node);
    if (!node.IsMap()) {
      return Error(node, fmt::format("{} must be an action ({}) or a mapping with action: and {}",
                                     kind, kActions, JoinNames(fields)));
    }
    GPUHERD_RETURN_IF_ERROR(CheckKeys(node, With({"action"}, fields), "anomalies." + kind));
    *enabled = true;
    if (node["action"]) return parse_action(node["action"]);
    return Status::Ok();
  }

  Status ParseAnomalies(const YAML::Node& node, AnomalyConfig* config) const {
    if (node.IsScalar() && node.Scalar() == "off") {
      *config = AnomalyConfig();
      return Status::Ok();
    }
    if (!node.IsMap()) {
      return Error(node, "anomalies must be a mapping such as {nan: stop, spike: {k: 10, "
                         "action: checkpoint}, stall: {after: 15m, action: stop}}, or off");
    }
    GPUHERD_RETURN_IF_ERROR(CheckKeys(node, {"nan", "spike", "stall"}, "anomalies"));
    if (YAML::Node n = node["nan"]) {
      GPUHERD_RETURN_IF_ERROR(
          ParseRuleHead(n, "nan", {"metrics"}, &config->nan.enabled, &config->nan.action));
      if (n.IsMap() && n["metrics"]) {
        auto metrics = ListOf(n["metrics"], "nan.metrics");
        if (!metrics.ok()) return metrics.status();
        config->nan.metrics = *metrics;
      }
    }
    if (YAML::Node n = node["spike"]) {
      SpikeRule& rule = config->spike;
      GPUHERD_RETURN_IF_ERROR(
          ParseRuleHead(n, "spike", {"k", "window", "metrics"}, &rule.enabled, &rule.action));
      if (n.IsMap() && n["k"]) {
        auto k = DoubleOf(n["k"], "spike.k", -1e6, 1e6);
        if (!k.ok()) return k.status();
        if (*k <= 1) {
          return Error(n["k"], "spike.k must be more than 1: a spike is a value above k times "
                               "the moving median");
        }
        rule.k = *k;
      }
      if (n.IsMap() && n["window"]) {
        auto window = IntOf(n["window"], "spike.window", 1, 10000);
        if (!window.ok()) return window.status();
        rule.window = static_cast<int>(*window);
      }
      if (n.IsMap() && n["metrics"]) {
        auto metrics = ListOf(n["metrics"], "spike.metrics");
        if (!metrics.ok()) return metrics.status();
        rule.metrics = *metrics;
      }
    }
    if (YAML::Node n = node["stall"]) {
      StallRule& rule = config->stall;
      GPUHERD_RETURN_IF_ERROR(
          ParseRuleHead(n, "stall", {"after"}, &rule.enabled, &rule.action));
      if (n.IsMap() && n["after"]) {
        auto after = reader_.Duration(n["after"], "stall.after");
        if (!after.ok()) return after.status();
        if (*after <= 0) return Error(n["after"], "stall.after must be longer than 0");
        rule.after = *after;
      }
    }
    return Status::Ok();
  }

  // Checks each ${{ ... }} in a template; step references are checked once
  // the graph is known.
  // `step` is the step being parsed, not yet in spec_.steps; `step_index`
  // is where it will be.
  Status CheckTemplate(const YAML::Node& node, const std::string& text, size_t step_index,
                       const StepSpec& step) {
    const Matrix& matrix = step.matrix;
    auto refs = FindReferences(text);
    if (!refs.ok()) return Error(node, refs.status().message());
    std::vector<std::string> param_names;
    for (const auto& [name, value] : spec_.params) param_names.push_back("params." + name);
    std::vector<std::string> matrix_names;
    for (const std::string& name : matrix.Names()) matrix_names.push_back("matrix." + name);
    const std::vector<std::string> plain = {"workspace", "run.workspace", "point", "point.index"};
    for (const std::string& ref : *refs) {
      if (std::find(plain.begin(), plain.end(), ref) != plain.end()) continue;
      if (StartsWith(ref, "params.")) {
        if (std::find(param_names.begin(), param_names.end(), ref) != param_names.end()) continue;
        return Error(node, fmt::format(
                               "${{{{ {} }}}} is not defined{}; {}", ref,
                               DidYouMean(ref, param_names),
                               param_names.empty()
                                   ? "the pipeline has no params: add it under params: with a "
                                     "default value"
                                   : "defined: " + JoinNames(param_names) +
                                         " (add it under params: with a default value)"));
      }
      if (StartsWith(ref, "matrix.")) {
        if (std::find(matrix_names.begin(), matrix_names.end(), ref) != matrix_names.end()) {
          continue;
        }
        return Error(node, fmt::format("${{{{ {} }}}} is not defined{}; {}", ref,
                                       DidYouMean(ref, matrix_names),
                                       matrix_names.empty()
                                           ? "step '" + step.name + "' has no matrix:"
                                           : "this step's matrix defines: " +
                                                 JoinNames(matrix_names)));
      }
      const std::string kStepPrefix = "step.", kSuffix = ".workspace";
      if (StartsWith(ref, kStepPrefix) && ref.size() > kStepPrefix.size() + kSuffix.size() &&
          ref.compare(ref.size() - kSuffix.size(), kSuffix.size(), kSuffix) == 0) {
        step_refs_.push_back(
            {step_index,
             ref.substr(kStepPrefix.size(), ref.size() - kStepPrefix.size() - kSuffix.size()),
             Line(node)});
        continue;
      }
      std::vector<std::string> known = plain;
      known.insert(known.end(), param_names.begin(), param_names.end());
      known.insert(known.end(), matrix_names.begin(), matrix_names.end());
      known.push_back("step.NAME.workspace");
      return Error(node, fmt::format("${{{{ {} }}}} is not defined{}; known names: {}", ref,
                                     DidYouMean(ref, known), JoinNames(known)));
    }
    return Status::Ok();
  }

  Status ParseStep(const std::string& name, const YAML::Node& key, const YAML::Node& node) {
    const std::string where = "step '" + name + "'";
    if (!node.IsMap()) {
      return Error(key, where + " must be a mapping with at least run:, e.g. {run: python3 "
                                "train.py}");
    }
    auto entries = reader_.Entries(
        node, {where, With(ResourceKeys(), {"run", "needs", "matrix", "env", "cwd", "retries", "if", "artifacts",
                                            "anomalies", "objective", "early_stop"})});
    if (!entries.ok()) return entries.status();
    StepSpec step;
    step.name = name;
    step.line = Line(key);
    step.anomalies = spec_.anomalies;
    const size_t index = spec_.steps.size();

    if (YAML::Node m = node["matrix"]) GPUHERD_RETURN_IF_ERROR(ParseMatrix(m, &step.matrix));
    GPUHERD_RETURN_IF_ERROR(ParseObjective(node, where, &step));

    YAML::Node run = node["run"];
    if (!run) return Error(key, where + " needs run: (the command, e.g. run: python3 train.py)");
    if (run.IsScalar()) {
      auto argv = SplitCommand(run.Scalar());
      if (!argv.ok()) return Error(run, argv.status().message());
      step.run = *argv;
    } else if (run.IsSequence()) {
      for (YAML::Node arg : run) {
        auto s = ScalarOf(arg, "each argument of run:");
        if (!s.ok()) return s.status();
        GPUHERD_RETURN_IF_ERROR(CheckTemplate(arg, *s, index, step));
        step.run.push_back(*s);
      }
    } else {
      return Error(run, "run must be a command line or a list of arguments");
    }
    if (step.run.empty() || step.run[0].empty()) {
      return Error(run, where + " has an empty run:; give the program and its arguments");
    }
    if (run.IsScalar()) {
      for (const std::string& arg : step.run) {
        GPUHERD_RETURN_IF_ERROR(CheckTemplate(run, arg, index, step));
      }
    }

    if (YAML::Node needs = node["needs"]) {
      auto list = ListOf(needs, "needs");
      if (!list.ok()) return list.status();
      for (const std::string& need : *list) {
        if (std::find(step.needs.begin(), step.needs.end(), need) == step.needs.end()) {
          step.needs.push_back(need);
        }
      }
      needs_lines_[name] = Line(needs);
    }

    // defaults first, then the step: the step's value wins, key by key for
    // env and labels.
    GPUHERD_RETURN_IF_ERROR(ApplyCommon(defaults_, index, &step));
    GPUHERD_RETURN_IF_ERROR(ApplyCommon(*entries, index, &step));
    if (YAML::Node cond = node["if"]) {
      auto text = ScalarOf(cond, "if");
      if (!text.ok()) return text.status();
      if (*text == "always") {
        step.run_if = RunIf::kAlways;
      } else if (*text == "success") {
        step.run_if = RunIf::kSuccess;
      } else {
        return Error(cond, fmt::format("if: '{}' is not known; write if: always (run even after "
                                       "a needed step failed) or if: success (the default)",
                                       *text));
      }
    }
    if (YAML::Node artifacts = node["artifacts"]) {
      auto list = ListOf(artifacts, "artifacts");
      if (!list.ok()) return list.status();
      for (const std::string& path : *list) {
        std::filesystem::path p(path);
        bool escapes =
            std::any_of(p.begin(), p.end(), [](const auto& part) { return part == ".."; });
        if (path.empty() || p.is_absolute() || escapes) {
          return Error(artifacts, fmt::format("artifact '{}' must be a path inside the step's "
                                              "workspace, like data or out/model.pt (relative, "
                                              "without ..)", path));
        }
        step.artifacts.push_back(path);
      }
    }
    if (YAML::Node anomalies = node["anomalies"]) {
      GPUHERD_RETURN_IF_ERROR(ParseAnomalies(anomalies, &step.anomalies));
    }

    // Cross-field checks (a fraction without gpu_mem) need the whole spec.
    nlohmann::json job = step.resources;
    job["command"] = step.run;
    auto parsed = sched::ParseJobSpec(job);
    if (!parsed.ok()) return Error(key, where + ": " + parsed.status().message());
    spec_.steps.push_back(std::move(step));
    return Status::Ok();
  }

  // Checks one job-spec field alone, so that an error points at its own
  // line. gpus and gpu_mem depend on each other (a fraction needs gpu_mem,
  // gpu_mem needs gpus): each is checked with a companion that satisfies the
  // other, and the pair is checked when the whole step is.
  Status CheckResourceField(const YAML::Node& node, const std::string& key,
                            const nlohmann::json& value) const {
    nlohmann::json job = {{"command", {"true"}}, {key, value}};
    if (key == "gpu_mem") job["gpus"] = 1;
    auto parsed = sched::ParseJobSpec(job);
    if (!parsed.ok() && key == "gpus") {
      job["gpu_mem"] = "1MiB";
      if (sched::ParseJobSpec(job).ok()) return Status::Ok();
    }
    return parsed.ok() ? Status::Ok() : Error(node, parsed.status().message());
  }

  // The keys a step shares with defaults: resources, env, cwd, retries.
  Status ApplyCommon(const std::vector<YamlReader::Entry>& entries, size_t index, StepSpec* step) {
    for (const YamlReader::Entry& entry : entries) {
      const std::string& key = entry.key;
      const YAML::Node& value = entry.value;
      if (IsResourceKey(key)) {
        nlohmann::json v = YamlToJson(value);
        GPUHERD_RETURN_IF_ERROR(CheckResourceField(value, key, v));
        if ((key == "labels" || key == "checkpoint") && v.is_object() &&
            step->resources.contains(key)) {
          step->resources[key].update(v);
        } else {
          step->resources[key] = v;
        }
      } else if (key == "env") {
        if (!value.IsMap()) return Error(value, "env must be a mapping of NAME: value");
        auto vars = reader_.Entries(value, YamlKeys::Names("env", "env", IsIdentifier, kIdentifierRule));
        if (!vars.ok()) return vars.status();
        for (const YamlReader::Entry& var : *vars) {
          if (StartsWith(var.key, "GPUHERD_") || var.key == "CUDA_VISIBLE_DEVICES") {
            return Error(var.key_node, fmt::format("env name '{}' is set by gpuherd itself (the job "
                                                   "protocol); choose another name", var.key));
          }
          auto text = ScalarOf(var.value, "env " + var.key);
          if (!text.ok()) return text.status();
          GPUHERD_RETURN_IF_ERROR(CheckTemplate(var.value, *text, index, *step));
          step->env[var.key] = *text;
        }
      } else if (key == "cwd") {
        auto text = ScalarOf(value, "cwd");
        if (!text.ok()) return text.status();
        GPUHERD_RETURN_IF_ERROR(CheckTemplate(value, *text, index, *step));
        step->cwd = *text;
      } else if (key == "retries") {
        auto n = IntOf(value, "retries", 0, kMaxRetries);
        if (!n.ok()) return n.status();
        step->retries = static_cast<int>(*n);
      }
    }
    return Status::Ok();
  }

  Status ParseMatrix(const YAML::Node& node, Matrix* matrix) const {
    if (!node.IsMap() || node.size() == 0) {
      return Error(node, "matrix must be a mapping of names to lists of values, e.g. {lr: [0.1, "
                         "0.01]}, or {random: {seed: 7, count: 12, params: {...}}}");
    }
    if (node["random"]) {
      if (node.size() != 1) {
        return Error(node, "a random matrix has only random:; move the other keys under "
                           "random.params");
      }
      return ParseRandom(node["random"], matrix);
    }
    matrix->kind = Matrix::Kind::kGrid;
    int64_t points = 1;
    auto axes = reader_.Entries(node, YamlKeys::Names("matrix", "matrix", IsIdentifier, kMatrixNameRule));
    if (!axes.ok()) return axes.status();
    for (const YamlReader::Entry& entry : *axes) {
      const std::string& name = entry.key;
      if (!entry.value.IsSequence() || entry.value.size() == 0) {
        return Error(entry.value, fmt::format("matrix.{} must be a non-empty list of values, e.g. "
                                              "[0.1, 0.01]", name));
      }
      Matrix::Axis axis{name, {}};
      for (YAML::Node v : entry.value) {
        auto value = ScalarOf(v, "each value of matrix." + name);
        if (!value.ok()) return value.status();
        if (std::find(axis.values.begin(), axis.values.end(), *value) != axis.values.end()) {
          return Error(v, fmt::format("matrix.{} lists '{}' twice", name, *value));
        }
        axis.values.push_back(*value);
      }
      points *= static_cast<int64_t>(axis.values.size());
      if (points > kMaxPoints) {
        return Error(node, fmt::format("the matrix has more than {} points; split the sweep",
                                       kMaxPoints));
      }
      matrix->grid.push_back(std::move(axis));
    }
    return Status::Ok();
  }

  Status ParseRandom(const YAML::Node& node, Matrix* matrix) const {
    matrix->kind = Matrix::Kind::kRandom;
    if (!node.IsMap()) {
      return Error(node, "random must be a mapping such as {seed: 7, count: 12, params: {lr: "
                         "{loguniform: [1e-4, 1e-1]}}}");
    }
    GPUHERD_RETURN_IF_ERROR(CheckKeys(node, {"seed", "count", "params", "sampler"}, "matrix.random"));
    if (node["sampler"]) {
      auto sampler = ScalarOf(node["sampler"], "random.sampler");
      if (!sampler.ok()) return sampler.status();
      if (*sampler == "sobol") {
        matrix->sampler = Matrix::Sampler::kSobol;
      } else if (*sampler != "uniform") {
        return Error(node["sampler"], fmt::format("random.sampler must be uniform (independent draws, the "
                                                  "default) or sobol (quasi-random, even coverage), not '{}'",
                                                  *sampler));
      }
    }
    if (node["seed"]) {
      auto seed = IntOf(node["seed"], "random.seed", 0, std::numeric_limits<int64_t>::max());
      if (!seed.ok()) return seed.status();
      matrix->seed = static_cast<uint64_t>(*seed);
    }
    if (!node["count"]) return Error(node, "a random matrix needs count: (how many points)");
    auto count = IntOf(node["count"], "random.count", 1, kMaxPoints);
    if (!count.ok()) return count.status();
    matrix->count = static_cast<int>(*count);
    YAML::Node params = node["params"];
    if (!params || !params.IsMap() || params.size() == 0) {
      return Error(params ? params : node,
                   "a random matrix needs params:, e.g. {lr: {loguniform: [1e-4, 1e-1]}, batch: "
                   "{choice: [32, 64]}}");
    }
    const std::vector<std::string> kKinds = {"choice", "uniform", "loguniform", "int"};
    auto entries =
        reader_.Entries(params, YamlKeys::Names("random.params", "matrix", IsIdentifier, kMatrixNameRule));
    if (!entries.ok()) return entries.status();
    for (const YamlReader::Entry& param : *entries) {
      const std::string& name = param.key;
      const YAML::Node& d = param.value;
      const std::string what = "random.params." + name;
      if (!d.IsMap() || d.size() != 1) {
        return Error(d, fmt::format("{} must be one of {{choice: [...]}}, {{uniform: [lo, hi]}}, "
                                    "{{loguniform: [lo, hi]}}, {{int: [lo, hi]}}", what));
      }
      auto head = reader_.Entries(d, {what, kKinds});
      if (!head.ok()) return head.status();
      const std::string& kind = head->front().key;
      const YAML::Node& args = head->front().value;
      Distribution dist;
      if (kind == "choice") {
        dist.kind = Distribution::Kind::kChoice;
        if (!args.IsSequence() || args.size() == 0) {
          return Error(args, what + ".choice must be a non-empty list of values");
        }
        for (YAML::Node v : args) {
          auto value = ScalarOf(v, "each choice of " + what);
          if (!value.ok()) return value.status();
          dist.choices.push_back(*value);
        }
      } else {
        if (!args.IsSequence() || args.size() != 2) {
          return Error(args, fmt::format("{}.{} must be [lo, hi]", what, kind));
        }
        auto lo = DoubleOf(args[0], what + " lo", -1e15, 1e15);
        if (!lo.ok()) return lo.status();
        auto hi = DoubleOf(args[1], what + " hi", -1e15, 1e15);
        if (!hi.ok()) return hi.status();
        dist.lo = *lo;
        dist.hi = *hi;
        if (kind == "int") {
          dist.kind = Distribution::Kind::kInteger;
          if (dist.lo != std::floor(dist.lo) || dist.hi != std::floor(dist.hi) ||
              dist.lo > dist.hi || std::fabs(dist.lo) > 1e15 || std::fabs(dist.hi) > 1e15) {
            return Error(args, what + ".int must be two whole numbers [lo, hi] with lo <= hi");
          }
        } else {
          dist.kind = kind == "uniform" ? Distribution::Kind::kUniform
                                        : Distribution::Kind::kLogUniform;
          if (dist.lo >= dist.hi) {
            return Error(args, fmt::format("{}.{} needs lo < hi", what, kind));
          }
          if (kind == "loguniform" && dist.lo <= 0) {
            return Error(args, what + ".loguniform needs 0 < lo < hi");
          }
        }
      }
      matrix->random.push_back({name, std::move(dist)});
    }
    if (matrix->sampler == Matrix::Sampler::kSobol && matrix->random.size() > kSobolMaxDimensions) {
      return Error(params, fmt::format("the sobol sampler takes at most {} parameters, this matrix has {}; use "
                                       "sampler: uniform", kSobolMaxDimensions, matrix->random.size()));
    }
    return Status::Ok();
  }

  // `objective:` and `early_stop:` of a swept step.
  Status ParseObjective(const YAML::Node& node, const std::string& where, StepSpec* step) const {
    YAML::Node o = node["objective"];
    YAML::Node e = node["early_stop"];
    if (o) {
      if (step->matrix.kind == Matrix::Kind::kNone) {
        return Error(o, where + " has objective: but no matrix:; an objective ranks the points of a sweep");
      }
      if (!o.IsMap()) return Error(o, "objective must be a mapping such as {metric: val_loss, mode: min}");
      GPUHERD_RETURN_IF_ERROR(CheckKeys(o, {"metric", "mode", "summary"}, "objective"));
      if (!o["metric"]) return Error(o, "objective needs metric: (a field of the step's metric lines, e.g. val_loss)");
      auto metric = ScalarOf(o["metric"], "objective.metric");
      if (!metric.ok()) return metric.status();
      if (metric->empty() || metric->size() > 128 || metric->find_first_of(std::string("\0\n\r\t\x1b", 5)) !=
                                                         std::string::npos) {
        return Error(o["metric"], "objective.metric must be a metric name of 1 to 128 printable characters");
      }
      if (!o["mode"]) return Error(o, "objective needs mode: min (lower is better) or mode: max");
      auto mode = ScalarOf(o["mode"], "objective.mode");
      if (!mode.ok()) return mode.status();
      if (*mode != "min" && *mode != "max") {
        return Error(o["mode"], fmt::format("objective.mode must be min or max, not '{}'", *mode));
      }
      ObjectiveSummary summary = ObjectiveSummary::kLast;
      if (o["summary"]) {
        auto name = ScalarOf(o["summary"], "objective.summary");
        if (!name.ok()) return name.status();
        if (*name == "best") {
          summary = ObjectiveSummary::kBest;
        } else if (*name != "last") {
          return Error(o["summary"], fmt::format("objective.summary must be last (the value at the point's last "
                                                 "logged step) or best, not '{}'{}",
                                                 *name, DidYouMean(*name, {"last", "best"})));
        }
      }
      step->objective = Objective{*metric, *mode == "min" ? ObjectiveMode::kMin : ObjectiveMode::kMax, summary};
    }
    if (!e) return Status::Ok();
    if (!step->objective) {
      return Error(e, where + " has early_stop: but no objective:; say which metric decides, e.g. "
                              "objective: {metric: val_loss, mode: min}");
    }
    if (!e.IsMap()) return Error(e, "early_stop must be a mapping such as {policy: asha, grace: 100, reduction: 3}");
    GPUHERD_RETURN_IF_ERROR(CheckKeys(e, {"policy", "grace", "reduction", "min_completed"}, "early_stop"));
    EarlyStopPolicy policy;
    if (!e["policy"]) return Error(e, "early_stop needs policy: asha or policy: median");
    auto name = ScalarOf(e["policy"], "early_stop.policy");
    if (!name.ok()) return name.status();
    if (*name == "asha") {
      policy.kind = EarlyStopPolicy::Kind::kAsha;
    } else if (*name == "median") {
      policy.kind = EarlyStopPolicy::Kind::kMedian;
    } else {
      return Error(e["policy"], fmt::format("early_stop.policy must be asha or median, not '{}'", *name));
    }
    if (!e["grace"]) {
      return Error(e, "early_stop needs grace: (training steps before the first decision, the 'step' of metric lines)");
    }
    auto grace = IntOf(e["grace"], "early_stop.grace", 1, int64_t{1} << 40);
    if (!grace.ok()) return grace.status();
    policy.grace = *grace;
    if (e["reduction"]) {
      if (policy.kind != EarlyStopPolicy::Kind::kAsha) {
        return Error(e["reduction"], "early_stop.reduction is ASHA's; the median rule has none");
      }
      auto reduction = IntOf(e["reduction"], "early_stop.reduction", 2, 100);
      if (!reduction.ok()) return reduction.status();
      policy.reduction = static_cast<int>(*reduction);
    }
    if (e["min_completed"]) {
      if (policy.kind != EarlyStopPolicy::Kind::kMedian) {
        return Error(e["min_completed"], "early_stop.min_completed is the median rule's; ASHA has none");
      }
      auto n = IntOf(e["min_completed"], "early_stop.min_completed", 1, 10000);
      if (!n.ok()) return n.status();
      policy.min_completed = static_cast<int>(*n);
    }
    step->early_stop = policy;
    return Status::Ok();
  }

  int NeedsLine(const StepSpec& step) const {
    auto it = needs_lines_.find(step.name);
    return it == needs_lines_.end() ? step.line : it->second;
  }

  Status CheckGraph() const {
    std::vector<std::string> names;
    for (const StepSpec& s : spec_.steps) names.push_back(s.name);
    for (const StepSpec& s : spec_.steps) {
      for (const std::string& need : s.needs) {
        if (!spec_.FindStep(need)) {
          return Error(NeedsLine(s), fmt::format("step '{}' needs '{}', which is not a step{}; "
                                                 "the steps are: {}",
                                                 s.name, need, DidYouMean(need, names),
                                                 JoinNames(names)));
        }
      }
    }
    // Depth-first search; a need that is still on the path closes a cycle.
    enum class Mark { kNew, kOnPath, kDone };
    std::map<std::string, Mark> marks;
    std::vector<std::string> path;
    std::function<Status(const StepSpec&)> visit = [&](const StepSpec& s) -> Status {
      marks[s.name] = Mark::kOnPath;
      path.push_back(s.name);
      for (const std::string& need : s.needs) {
        Mark m = marks[need];
        if (m == Mark::kOnPath) {
          auto start = std::find(path.begin(), path.end(), need);
          std::string cycle;
          for (auto it = start; it != path.end(); ++it) cycle += *it + " → ";
          cycle += need;
          const StepSpec& first = *spec_.FindStep(need);
          return Error(NeedsLine(first),
                       fmt::format("the steps' needs form a cycle: {} (each step needs the next); "
                                   "remove one of these needs",
                                   cycle));
        }
        if (m == Mark::kNew) GPUHERD_RETURN_IF_ERROR(visit(*spec_.FindStep(need)));
      }
      path.pop_back();
      marks[s.name] = Mark::kDone;
      return Status::Ok();
    };
    for (const StepSpec& s : spec_.steps) {
      if (marks[s.name] == Mark::kNew) GPUHERD_RETURN_IF_ERROR(visit(s));
    }
    return Status::Ok();
  }

  // ${{ step.NAME.workspace }} is only written by then if NAME is needed,
  // directly or through other steps.
  Status CheckStepRefs() const {
    for (const StepRef& ref : step_refs_) {
      const StepSpec& step = spec_.steps[ref.step];
      std::set<std::string> ancestors;
      std::vector<std::string> todo = step.needs;
      while (!todo.empty()) {
        std::string name = todo.back();
        todo.pop_back();
        if (!ancestors.insert(name).second) continue;
        const StepSpec* s = spec_.FindStep(name);
        todo.insert(todo.end(), s->needs.begin(), s->needs.end());
      }
      if (ancestors.count(ref.name)) continue;
      if (spec_.FindStep(ref.name)) {
        return Error(ref.line, fmt::format("${{{{ step.{}.workspace }}}}: step '{}' does not need "
                                           "'{}', so it may not have run yet; add '{}' to its "
                                           "needs",
                                           ref.name, step.name, ref.name, ref.name));
      }
      std::vector<std::string> known(ancestors.begin(), ancestors.end());
      return Error(ref.line, fmt::format("${{{{ step.{}.workspace }}}}: there is no step '{}'{}; "
                                         "step '{}' needs: {}",
                                         ref.name, ref.name, DidYouMean(ref.name, known),
                                         step.name, known.empty() ? "nothing" : JoinNames(known)));
    }
    return Status::Ok();
  }

  YamlReader reader_;
  PipelineSpec spec_;
  std::vector<YamlReader::Entry> defaults_;  // defaults:, in file order
  std::map<std::string, int> needs_lines_;
  std::vector<StepRef> step_refs_;
};

}  // namespace

std::vector<std::string> Matrix::Names() const {
  std::vector<std::string> names;
  for (const Axis& a : grid) names.push_back(a.name);
  for (const RandomParam& p : random) names.push_back(p.name);
  return names;
}

const StepSpec* PipelineSpec::FindStep(const std::string& name) const {
  for (const StepSpec& s : steps) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Result<PipelineSpec> ParsePipeline(std::string_view yaml, const std::string& source) {
  return Parser(source).Parse(yaml);
}

Result<PipelineSpec> LoadPipeline(const std::string& path) {
  auto text = ReadTextFile(path, PipelineYamlLimits().max_bytes);
  if (!text.ok()) return text.status().Annotate("pipeline file");
  auto spec = ParsePipeline(*text, path);
  if (!spec.ok()) return spec;
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(path, ec).parent_path();
  if (!ec) spec->base_dir = dir.lexically_normal().string();
  return spec;
}

}  // namespace gpuherd::pipeline
