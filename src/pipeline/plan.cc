#include "pipeline/plan.h"

#include <cmath>
#include <filesystem>
#include <optional>
#include <random>
#include <set>

#include <fmt/format.h>

#include "core/suggest.h"
#include "core/utf8.h"
#include "pipeline/sobol.h"
#include "pipeline/template.h"
#include "sched/job_spec.h"

namespace gpuherd::pipeline {
namespace {

// Uniform in [0, n) without modulo bias.
uint64_t DrawIndex(std::mt19937_64& gen, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
  for (;;) {
    uint64_t x = gen();
    if (x >= threshold) return x % n;
  }
}

// Uniform in [0, 1).
double DrawUnit(std::mt19937_64& gen) { return static_cast<double>(gen() >> 11) * 0x1.0p-53; }

std::string Draw(std::mt19937_64& gen, const Distribution& d) {
  switch (d.kind) {
    case Distribution::Kind::kChoice:
      return d.choices[DrawIndex(gen, d.choices.size())];
    case Distribution::Kind::kInteger: {
      const auto lo = static_cast<int64_t>(d.lo);
      const auto span = static_cast<uint64_t>(static_cast<int64_t>(d.hi) - lo) + 1;
      return std::to_string(lo + static_cast<int64_t>(DrawIndex(gen, span)));
    }
    case Distribution::Kind::kUniform:
      return fmt::format("{:.4g}", d.lo + (d.hi - d.lo) * DrawUnit(gen));
    case Distribution::Kind::kLogUniform: {
      const double a = std::log(d.lo), b = std::log(d.hi);
      return fmt::format("{:.4g}", std::exp(a + (b - a) * DrawUnit(gen)));
    }
  }
  return "";
}

using Point = std::vector<std::pair<std::string, std::string>>;

// A coordinate u in [0, 1) of a Sobol' point as a value of `d`: the same
// maps as the uniform sampler's, with u in place of a draw.
std::string FromUnit(double u, const Distribution& d) {
  switch (d.kind) {
    case Distribution::Kind::kChoice:
      return d.choices[std::min(d.choices.size() - 1, static_cast<size_t>(u * static_cast<double>(d.choices.size())))];
    case Distribution::Kind::kInteger: {
      const auto lo = static_cast<int64_t>(d.lo);
      const auto span = static_cast<uint64_t>(static_cast<int64_t>(d.hi) - lo) + 1;
      const auto k = std::min(span - 1, static_cast<uint64_t>(u * static_cast<double>(span)));
      return std::to_string(lo + static_cast<int64_t>(k));
    }
    case Distribution::Kind::kUniform:
      return fmt::format("{:.4g}", d.lo + (d.hi - d.lo) * u);
    case Distribution::Kind::kLogUniform: {
      const double a = std::log(d.lo), b = std::log(d.hi);
      return fmt::format("{:.4g}", std::exp(a + (b - a) * u));
    }
  }
  return "";
}

// One Sobol' dimension per parameter, in file order. The spec allows at
// most kSobolMaxDimensions parameters with this sampler.
std::vector<Point> SobolPoints(const Matrix& matrix) {
  std::vector<Point> points;
  auto seq = SobolSequence::Make(static_cast<int>(matrix.random.size()), matrix.seed);
  if (!seq.ok()) return points;
  for (int i = 0; i < matrix.count; ++i) {
    std::vector<double> u = seq->Next();
    Point p;
    for (size_t k = 0; k < matrix.random.size(); ++k) {
      p.emplace_back(matrix.random[k].name, FromUnit(u[k], matrix.random[k].distribution));
    }
    points.push_back(std::move(p));
  }
  return points;
}

std::vector<Point> SweepPoints(const Matrix& matrix) {
  std::vector<Point> points;
  switch (matrix.kind) {
    case Matrix::Kind::kNone:
      points.emplace_back();
      break;
    case Matrix::Kind::kGrid: {
      size_t total = 1;
      for (const Matrix::Axis& axis : matrix.grid) total *= axis.values.size();
      // Mixed-radix counting: the last axis varies fastest.
      for (size_t n = 0; n < total; ++n) {
        Point p(matrix.grid.size());
        size_t rest = n;
        for (size_t a = matrix.grid.size(); a-- > 0;) {
          const auto& values = matrix.grid[a].values;
          p[a] = {matrix.grid[a].name, values[rest % values.size()]};
          rest /= values.size();
        }
        points.push_back(std::move(p));
      }
      break;
    }
    case Matrix::Kind::kRandom: {
      if (matrix.sampler == Matrix::Sampler::kSobol) return SobolPoints(matrix);
      std::mt19937_64 gen(matrix.seed);
      for (int i = 0; i < matrix.count; ++i) {
        Point p;
        for (const Matrix::RandomParam& param : matrix.random) {
          p.emplace_back(param.name, Draw(gen, param.distribution));
        }
        points.push_back(std::move(p));
      }
      break;
    }
  }
  return points;
}

std::string PointText(const Point& point) {
  std::string text;
  for (const auto& [name, value] : point) {
    text += (text.empty() ? "" : ",") + name + "=" + value;
  }
  return text;
}

// Steps in an order where every step follows its needs; among the steps
// that are ready, file order. The spec has no cycles (ParsePipeline).
std::vector<const StepSpec*> StepOrder(const PipelineSpec& spec) {
  std::vector<const StepSpec*> order;
  std::set<std::string> placed;
  while (order.size() < spec.steps.size()) {
    for (const StepSpec& step : spec.steps) {
      if (placed.count(step.name)) continue;
      bool ready = true;
      for (const std::string& need : step.needs) ready = ready && placed.count(need) > 0;
      if (!ready) continue;
      order.push_back(&step);
      placed.insert(step.name);
      break;
    }
  }
  return order;
}

// How many points a step's sweep has, without drawing them; nullopt when
// the count does not fit in 64 bits.
std::optional<uint64_t> PointCount(const Matrix& matrix) {
  switch (matrix.kind) {
    case Matrix::Kind::kNone:
      return 1;
    case Matrix::Kind::kGrid: {
      uint64_t total = 1;
      for (const Matrix::Axis& axis : matrix.grid) {
        if (__builtin_mul_overflow(total, static_cast<uint64_t>(axis.values.size()), &total)) return std::nullopt;
      }
      return total;
    }
    case Matrix::Kind::kRandom:
      return matrix.count < 0 ? 0 : static_cast<uint64_t>(matrix.count);
  }
  return 1;
}

// Nodes and need edges of the plan, counted before anything is allocated.
// The messages give the true counts (a step's own when it alone is too big),
// never a count cut off at the limit.
Status CheckPlanSize(const PipelineSpec& spec) {
  std::map<std::string, uint64_t> points;
  uint64_t nodes = 0;
  std::string biggest;
  for (const StepSpec& step : spec.steps) {
    const std::optional<uint64_t> count = PointCount(step.matrix);
    if (!count || *count > kMaxPlanNodes) {
      return InvalidArgument(fmt::format(
          "{}: step '{}' alone expands to {} jobs; a run holds at most {} jobs: split the sweep into several runs",
          spec.source, step.name, count ? std::to_string(*count) : "more than 18446744073709551615", kMaxPlanNodes));
    }
    points[step.name] = *count;
    nodes += *count;  // each at most kMaxPlanNodes: no overflow
    if (biggest.empty() || points[step.name] > points[biggest]) biggest = step.name;
  }
  if (nodes > kMaxPlanNodes) {
    return InvalidArgument(fmt::format(
        "{}: the pipeline expands to {} jobs (step '{}' alone has {}); a run holds at most {} "
        "jobs: split the sweep into several runs",
        spec.source, nodes, biggest, points[biggest], kMaxPlanNodes));
  }
  uint64_t edges = 0;
  for (const StepSpec& step : spec.steps) {
    uint64_t needed = 0;
    for (const std::string& need : step.needs) needed += points[need];
    edges += needed * points[step.name];
  }
  if (edges > kMaxPlanEdges) {
    return InvalidArgument(fmt::format(
        "{}: the pipeline's needs join {} pairs of jobs (every point of a step needs every point "
        "of the steps it needs); a run holds at most {}: sweep fewer points or add a step that "
        "gathers a sweep",
        spec.source, edges, kMaxPlanEdges));
  }
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, const std::string& rel) {
  return (std::filesystem::path(dir) / rel).lexically_normal().string();
}

}  // namespace

int Plan::Find(const std::string& id) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

Result<std::pair<std::string, std::string>> ParseOverride(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument(fmt::format("parameter override '{}' must be written key=value, e.g. "
                                       "-p epochs=5",
                                       text));
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

Result<Plan> Expand(const PipelineSpec& spec, const std::map<std::string, std::string>& overrides,
                    const std::string& run_dir) {
  if (run_dir.empty() || !std::filesystem::path(run_dir).is_absolute()) {
    return InvalidArgument(fmt::format("the run folder must be an absolute path, got '{}'",
                                       run_dir));
  }
  // Every text of the plan becomes JSON, whose writer throws on bytes that
  // are not UTF-8: what the YAML reader did not check is checked here.
  if (!IsUtf8(run_dir) || !IsUtf8(spec.base_dir)) {
    return InvalidArgument("the pipeline's folder and the run folder must be valid UTF-8 paths");
  }
  GPUHERD_RETURN_IF_ERROR(CheckPlanSize(spec));
  Plan plan;
  plan.name = spec.name;
  size_t bytes = 0;  // the text the plan's nodes hold, counted as they are made
  plan.run_dir = std::filesystem::path(run_dir).lexically_normal().string();
  plan.params = spec.params;
  plan.backend = spec.backend;
  for (const StepSpec& step : spec.steps) {
    if (step.objective) plan.objectives[step.name] = *step.objective;
    if (step.early_stop) plan.early_stops[step.name] = *step.early_stop;
  }
  std::vector<std::string> param_names;
  for (const auto& [name, value] : spec.params) param_names.push_back(name);
  for (const auto& [name, value] : overrides) {
    if (!spec.params.count(name)) {
      return InvalidArgument(fmt::format(
          "-p {}: the pipeline {} has no parameter '{}'{}; {}", name, spec.source, name,
          DidYouMean(name, param_names),
          param_names.empty() ? "it defines no params:"
                              : "its parameters are: " + JoinNames(param_names)));
    }
    if (!IsUtf8(value)) return InvalidArgument(fmt::format("-p {}: the value is not valid UTF-8", name));
    plan.params[name] = value;
  }

  std::map<std::string, std::string> shared;
  for (const auto& [name, value] : plan.params) shared["params." + name] = value;
  shared["run.workspace"] = plan.run_dir;
  for (const StepSpec& step : spec.steps) {
    shared["step." + step.name + ".workspace"] = JoinPath(plan.run_dir, step.name);
  }

  std::map<std::string, std::vector<size_t>> step_nodes;  // step → its node indices
  for (const StepSpec* step : StepOrder(spec)) {
    const std::vector<Point> points = SweepPoints(step->matrix);
    std::set<std::string> ids;
    for (size_t i = 0; i < points.size(); ++i) {
      PlanNode node;
      node.step = step->name;
      node.point = static_cast<int>(i);
      node.matrix = points[i];
      std::string point_text = PointText(points[i]);
      node.id = step->matrix.kind == Matrix::Kind::kNone ? step->name
                                                         : step->name + "[" + point_text + "]";
      for (int repeat = 2; !ids.insert(node.id).second; ++repeat) {
        node.id = fmt::format("{}[{},#{}]", step->name, point_text, repeat);
      }
      node.key = step->matrix.kind == Matrix::Kind::kNone ? step->name
                                                          : fmt::format("{}/{}", step->name, i);
      node.retries = step->retries;
      node.always = step->run_if == RunIf::kAlways;
      node.anomalies = step->anomalies;
      node.checkpoint_dir = JoinPath(plan.run_dir, ".checkpoints/" + node.key);
      for (const std::string& a : step->artifacts) {
        node.artifacts.push_back(
            (std::filesystem::path(node.key) / a).lexically_normal().string());
      }
      for (const std::string& need : step->needs) {
        for (size_t n : step_nodes[need]) {
          node.needs.push_back(plan.nodes[n].id);
          node.need_nodes.push_back(n);
        }
      }

      std::map<std::string, std::string> values = shared;
      const std::string workspace = JoinPath(plan.run_dir, node.key);
      values["workspace"] = workspace;
      values["point"] = point_text;
      values["point.index"] = std::to_string(i);
      for (const auto& [name, value] : points[i]) values["matrix." + name] = value;

      auto fail = [&](const Status& s) {
        return InvalidArgument(fmt::format("{}:{}: step '{}', node {}: {}", spec.source,
                                           step->line, step->name, node.id, s.message()));
      };
      nlohmann::json job = step->resources;
      if (!job.contains("max_restarts")) job["max_restarts"] = kNodeFaultRestarts;
      nlohmann::json argv = nlohmann::json::array();
      for (const std::string& arg : step->run) {
        auto text = Substitute(arg, values);
        if (!text.ok()) return fail(text.status());
        argv.push_back(*text);
      }
      job["command"] = argv;
      nlohmann::json env = nlohmann::json::object();
      for (const auto& [name, value] : step->env) {
        auto text = Substitute(value, values);
        if (!text.ok()) return fail(text.status());
        env[name] = *text;
      }
      env["GPUHERD_RUN_DIR"] = plan.run_dir;
      env["GPUHERD_WORKSPACE"] = workspace;
      env["GPUHERD_CHECKPOINT_DIR"] = node.checkpoint_dir;
      job["env"] = env;
      auto cwd = Substitute(step->cwd, values);
      if (!cwd.ok()) return fail(cwd.status());
      if (!cwd->empty() && !spec.base_dir.empty()) {
        job["cwd"] = JoinPath(spec.base_dir, *cwd);  // an absolute cwd stays as it is
      } else if (!cwd->empty()) {
        job["cwd"] = *cwd;
      } else if (!spec.base_dir.empty()) {
        job["cwd"] = spec.base_dir;
      }
      job["name"] = spec.name + "/" + node.id;
      if (!job.contains("labels")) job["labels"] = nlohmann::json::object();
      job["labels"]["gpuherd/pipeline"] = spec.name;
      job["labels"]["gpuherd/step"] = step->name;
      job["labels"]["gpuherd/node"] = node.id;
      auto parsed = sched::ParseJobSpec(job);
      if (!parsed.ok()) return fail(parsed.status());
      bytes += node.id.size() + node.key.size() + node.checkpoint_dir.size() + job.dump().size();
      job = nlohmann::json();  // the typed spec below is what the node keeps
      for (const std::string& need : node.needs) bytes += need.size() + sizeof(size_t);
      if (bytes > kMaxPlanBytes) {
        return InvalidArgument(fmt::format(
            "{}: the pipeline's jobs come to more than {} MiB of commands, environments and "
            "names (at step '{}', node {}); a run holds at most that: shorten them or sweep fewer "
            "points",
            spec.source, kMaxPlanBytes >> 20, step->name, node.id));
      }
      node.job = std::move(parsed).value();

      step_nodes[step->name].push_back(plan.nodes.size());
      plan.nodes.push_back(std::move(node));
    }
  }
  return plan;
}

}  // namespace gpuherd::pipeline
