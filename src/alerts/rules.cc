#include "alerts/rules.h"

#include <cmath>
#include <fstream>
#include <cstring>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/yaml.h"

extern "C" const unsigned char gpuherd_default_rules_yaml[];

namespace gpuherd::alerts {
namespace {

constexpr const char* kGpuSeries[] = {
    "gpu_util_pct", "mem_util_pct", "mem_used_pct", "temp_c", "temp_over_slowdown_c", "power_w",
    "fan_pct", "sm_clock_mhz", "pcie_replays", "pcie_packets", "ecc_sbe", "ecc_dbe",
    "retired_pending", "xids", "xids_fatal", "pcie_downtrained", "health_score",
};

struct FunctionEntry {
  Function function;
  const char* name;
};
constexpr FunctionEntry kFunctions[] = {
    {Function::kValue, "value"}, {Function::kIncrease, "increase"}, {Function::kRate, "rate"},
    {Function::kSlope, "slope"}, {Function::kDrop, "drop"},         {Function::kSum, "sum"},
    {Function::kRatio, "ratio"},
};

struct ComparisonEntry {
  Comparison comparison;
  const char* text;
};
constexpr ComparisonEntry kComparisons[] = {
    {Comparison::kLessEqual, "<="}, {Comparison::kGreaterEqual, ">="}, {Comparison::kEqual, "=="},
    {Comparison::kNotEqual, "!="},  {Comparison::kLess, "<"},          {Comparison::kGreater, ">"},
};

const std::vector<std::string> kRuleKeys = {"name",     "expr",      "for",    "severity",
                                            "action",   "while_job", "settle", "summary"};

// A window as ParseDuration reads it back: "5m", "30d", "90s".
std::string WindowText(DurationMs d) {
  struct Unit {
    DurationMs ms;
    const char* suffix;
  };
  for (Unit u : {Unit{24 * kHourMs, "d"}, Unit{kHourMs, "h"}, Unit{kMinuteMs, "m"}, Unit{kSecondMs, "s"}}) {
    if (d % u.ms == 0) return fmt::format("{}{}", d / u.ms, u.suffix);
  }
  return fmt::format("{}ms", d);
}

std::string Where(const std::string& origin, const YAML::Node& node) {
  return fmt::format("{}:{}", origin, YamlReader::Line(node));
}

Status RuleError(const std::string& where, const std::string& message) {
  return InvalidArgument(where + ": " + message);
}

Result<Rule> ParseRule(const YAML::Node& node, const YamlReader& reader) {
  const std::string& origin = reader.source();
  std::string where = Where(origin, node);
  if (!node.IsMap()) return RuleError(where, "a rule must be a mapping with name, expr, for, severity and action");
  GPUHERD_RETURN_IF_ERROR(reader.CheckKeys(node, {"a rule", kRuleKeys}));
  Rule rule;
  rule.origin = where;
  // A key's single value; empty when the key is absent. A list or mapping
  // where a value belongs is an error that names its line.
  auto text = [&](const char* key) -> Result<std::string> {
    if (!node[key]) return std::string();
    return reader.Scalar(node[key], rule.name.empty() ? std::string(key) : fmt::format("rule '{}': {}", rule.name, key));
  };

  auto name = text("name");
  if (!name.ok()) return name.status();
  rule.name = *name;
  static const std::regex kName("[a-z][a-z0-9_]*");
  if (!std::regex_match(rule.name, kName)) {
    return RuleError(where, fmt::format("rule name '{}' must be lower-case letters, digits and _ (e.g. gpu_temp_high)",
                                        rule.name));
  }

  if (!node["expr"]) return RuleError(where, fmt::format("rule '{}' has no expr (e.g. expr: temp_c > 85)", rule.name));
  auto expr = text("expr");
  if (!expr.ok()) return expr.status();
  Result<Condition> condition = ParseCondition(*expr);
  if (!condition.ok()) {
    return RuleError(Where(origin, node["expr"]), fmt::format("rule '{}': {}", rule.name, condition.status().message()));
  }
  rule.condition = *condition;
  rule.scope = *SeriesScope(rule.condition.series);

  // A duration of at least 0 (ParseDuration reads no sign, so none is less).
  auto duration = [&](const char* key, DurationMs* out) -> Status {
    auto d = reader.Duration(node[key], fmt::format("rule '{}': {}:", rule.name, key));
    if (!d.ok()) return d.status();
    *out = *d;
    return Status::Ok();
  };
  if (node["for"]) GPUHERD_RETURN_IF_ERROR(duration("for", &rule.for_duration));
  if (node["settle"]) {
    GPUHERD_RETURN_IF_ERROR(duration("settle", &rule.settle));
    if (rule.scope != Scope::kGpu) {
      return RuleError(Where(origin, node["settle"]),
                       fmt::format("rule '{}': settle applies to GPU series only", rule.name));
    }
  }
  if (node["severity"]) {
    auto severity_text = text("severity");
    if (!severity_text.ok()) return severity_text.status();
    std::optional<store::Severity> severity = store::ParseSeverity(*severity_text);
    if (!severity) {
      return RuleError(Where(origin, node["severity"]),
                       fmt::format("rule '{}': severity must be info, warning or critical, not '{}'", rule.name,
                                   *severity_text));
    }
    rule.severity = *severity;
  }
  if (node["action"]) {
    auto action_text = text("action");
    if (!action_text.ok()) return action_text.status();
    std::optional<Action> action = ParseAction(*action_text);
    if (!action) {
      return RuleError(Where(origin, node["action"]),
                       fmt::format("rule '{}': action must be none, notify, drain or checkpoint_and_move, not '{}'",
                                   rule.name, *action_text));
    }
    rule.action = *action;
  }
  if (node["while_job"]) {
    auto while_job = reader.Bool(node["while_job"], fmt::format("rule '{}': while_job", rule.name));
    if (!while_job.ok()) return while_job.status();
    rule.while_job = *while_job;
    if (rule.while_job && rule.scope != Scope::kGpu) {
      return RuleError(Where(origin, node["while_job"]),
                       fmt::format("rule '{}': while_job applies to GPU series only", rule.name));
    }
  }
  auto summary = text("summary");
  if (!summary.ok()) return summary.status();
  rule.summary = *summary;
  if (rule.summary.empty()) rule.summary = ConditionText(rule.condition);
  return rule;
}

}  // namespace

const char* ActionName(Action action) {
  switch (action) {
    case Action::kNone: return "none";
    case Action::kNotify: return "notify";
    case Action::kDrain: return "drain";
    case Action::kCheckpointAndMove: return "checkpoint_and_move";
  }
  return "none";
}

std::optional<Action> ParseAction(const std::string& text) {
  for (Action a : {Action::kNone, Action::kNotify, Action::kDrain, Action::kCheckpointAndMove}) {
    if (text == ActionName(a)) return a;
  }
  return std::nullopt;
}

const char* FunctionName(Function f) {
  for (const FunctionEntry& e : kFunctions) {
    if (e.function == f) return e.name;
  }
  return "value";
}

const char* ComparisonText(Comparison c) {
  for (const ComparisonEntry& e : kComparisons) {
    if (e.comparison == c) return e.text;
  }
  return ">";
}

bool Compare(double value, Comparison c, double threshold) {
  switch (c) {
    case Comparison::kLess: return value < threshold;
    case Comparison::kLessEqual: return value <= threshold;
    case Comparison::kGreater: return value > threshold;
    case Comparison::kGreaterEqual: return value >= threshold;
    case Comparison::kEqual: return value == threshold;
    case Comparison::kNotEqual: return value != threshold;
  }
  return false;
}

std::optional<Scope> SeriesScope(const std::string& series) {
  for (const char* s : kGpuSeries) {
    if (series == s) return Scope::kGpu;
  }
  static const std::regex kIb("ib_[a-zA-Z0-9_]+");
  if (std::regex_match(series, kIb)) return Scope::kIbPort;
  return std::nullopt;
}

std::string ConditionUnit(const Condition& c) {
  if (c.function == Function::kRatio) return "";
  const std::string& s = c.series;
  auto ends_with = [&s](const char* suffix) {
    const size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
  };
  std::string unit;
  if (ends_with("_pct")) unit = "%";
  else if (ends_with("_c")) unit = "°C";
  else if (ends_with("_w")) unit = "W";
  else if (ends_with("_mhz")) unit = "MHz";
  if (c.function == Function::kRate) return unit.empty() ? "/min" : unit + "/min";
  if (c.function == Function::kSlope) return unit.empty() ? "/min" : unit + "/min";
  return unit;
}

std::string ConditionText(const Condition& c) {
  std::string lhs;
  if (c.function == Function::kValue) {
    lhs = c.series;
  } else if (c.function == Function::kRatio) {
    lhs = fmt::format("ratio({}, {}[{}])", c.series, c.per, WindowText(c.window));
  } else {
    lhs = fmt::format("{}({}[{}])", FunctionName(c.function), c.series, WindowText(c.window));
  }
  return fmt::format("{} {} {}", lhs, ComparisonText(c.comparison), c.threshold);
}

Result<Condition> ParseCondition(const std::string& text) {
  // function(series[, per][window]) op number  |  series op number
  static const std::regex kExpr(
      R"(^\s*(?:([a-z]+)\s*\(\s*([A-Za-z0-9_]+)\s*(?:,\s*([A-Za-z0-9_]+)\s*)?\[\s*([0-9a-z]+)\s*\]\s*\)|([A-Za-z0-9_]+))\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, kExpr)) {
    return InvalidArgument(fmt::format(
        "cannot read expr '{}': write 'series op number' (temp_c > 85) or 'function(series[window]) op number' "
        "(slope(temp_c[5m]) > 1.5)",
        text));
  }
  Condition c;
  if (m[5].matched) {
    c.series = m[5];
  } else {
    bool known = false;
    for (const FunctionEntry& e : kFunctions) {
      if (m[1] == e.name && e.function != Function::kValue) {
        c.function = e.function;
        known = true;
      }
    }
    if (!known) {
      return InvalidArgument(fmt::format("unknown function '{}' (expected increase, rate, slope, drop, sum or ratio)",
                                         m[1].str()));
    }
    c.series = m[2];
    c.per = m[3];
    if (!ParseDuration(m[4], &c.window) || c.window <= 0) {
      return InvalidArgument(fmt::format("window '[{}]' is not a positive duration (e.g. [5m])", m[4].str()));
    }
    if (c.function == Function::kRatio && c.per.empty()) {
      return InvalidArgument("ratio needs two series: ratio(pcie_replays, pcie_packets[5m])");
    }
    if (c.function != Function::kRatio && !c.per.empty()) {
      return InvalidArgument(fmt::format("{} takes one series", FunctionName(c.function)));
    }
  }
  std::optional<Scope> scope = SeriesScope(c.series);
  if (!scope) return InvalidArgument(fmt::format("unknown series '{}'", c.series));
  if (!c.per.empty() && SeriesScope(c.per) != scope) {
    return InvalidArgument(fmt::format("unknown series '{}' or of another scope than '{}'", c.per, c.series));
  }
  for (const ComparisonEntry& e : kComparisons) {
    if (m[6] == e.text) c.comparison = e.comparison;
  }
  std::string number = m[7];
  size_t used = 0;
  try {
    c.threshold = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != number.size() || !std::isfinite(c.threshold)) {
    return InvalidArgument(fmt::format("threshold '{}' is not a number", number));
  }
  return c;
}

Result<std::vector<Rule>> ParseRules(const std::string& yaml_text, const std::string& origin) {
  auto loaded = LoadYaml(yaml_text, origin);
  if (!loaded.ok()) return loaded.status();
  try {
    const YAML::Node doc = *loaded;
    if (!doc.IsMap() || !doc["rules"] || !doc["rules"].IsSequence()) {
      return RuleError(origin + ":1", "expected a top-level 'rules:' list");
    }
    const YamlReader reader(origin);
    GPUHERD_RETURN_IF_ERROR(reader.CheckKeys(doc, {"", {"rules"}, "top-level key"}));
    std::vector<Rule> rules;
    std::set<std::string> names;
    for (const YAML::Node& node : doc["rules"]) {
      Result<Rule> rule = ParseRule(node, reader);
      if (!rule.ok()) return rule.status();
      if (!names.insert(rule->name).second) {
        return RuleError(rule->origin, fmt::format("a second rule named '{}'", rule->name));
      }
      rules.push_back(std::move(rule).value());
    }
    return rules;
  } catch (const YAML::Exception& e) {
    return RuleError(fmt::format("{}:{}", origin, e.mark.line + 1), e.msg);
  }
}

Result<std::vector<Rule>> LoadRulesFile(const std::string& path) {
  auto text = ReadTextFile(path, YamlLimits().max_bytes);
  if (!text.ok()) return text.status().Annotate("alert rules file");
  return ParseRules(*text, path);
}

const char* DefaultRulesYaml() { return reinterpret_cast<const char*>(gpuherd_default_rules_yaml); }

std::vector<Rule> DefaultRules() {
  Result<std::vector<Rule>> rules = ParseRules(DefaultRulesYaml(), "default-rules.yaml");
  return rules.ok() ? std::move(rules).value() : std::vector<Rule>{};
}

}  // namespace gpuherd::alerts
