// Alert rules: a condition over the sampled series of one GPU (or one
// InfiniBand port), how long it must hold, how bad it is and what to do.
// Written in YAML (deploy/alerts/default-rules.yaml documents the format);
// the defaults are embedded in the binary.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/time.h"
#include "store/records.h"

namespace gpuherd::alerts {

// What the daemon does when an alert starts firing, once per firing. Every
// action but kNone also notifies, on firing and on resolving.
enum class Action {
  kNone = 0,
  kNotify,
  kDrain,               // take the GPU out of scheduling
  kCheckpointAndMove,   // drain, then checkpoint its jobs and requeue them elsewhere
};
const char* ActionName(Action action);  // "none", "notify", "drain", "checkpoint_and_move"
std::optional<Action> ParseAction(const std::string& text);

// How the series is reduced to the one number compared with the threshold.
enum class Function {
  kValue = 0,   // the newest reading
  kIncrease,    // how much a counter grew over the window (a reset counts from 0)
  kRate,        // kIncrease per minute
  kSlope,       // least-squares change of a gauge per minute over the window
  kDrop,        // the highest reading in the window minus the newest
  kSum,         // the sum of the readings in the window (per-reading event counts)
  kRatio,       // increase of the series / integral of the `per` series (a per-second rate)
};
const char* FunctionName(Function f);   // "value", "increase", ...

enum class Comparison { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };
const char* ComparisonText(Comparison c);  // "<", "<=", ...
bool Compare(double value, Comparison c, double threshold);

// Whom a rule watches; decided by its series (ib_* series watch ports).
enum class Scope { kGpu, kIbPort };

// The series a condition may name, with their scope. GPU series:
//   gpu_util_pct, mem_util_pct, mem_used_pct, temp_c, temp_over_slowdown_c
//   (temperature minus the card's slowdown threshold), power_w, fan_pct,
//   sm_clock_mhz, pcie_replays (counter), pcie_packets (estimated packets per
//   second: throughput / 256 bytes), ecc_sbe, ecc_dbe (volatile counters),
//   retired_pending (0/1), xids (XIDs reported by each reading), xids_fatal
//   (those NVIDIA's catalogue calls fatal: 48, 79, 95, ...), pcie_downtrained
//   (1 when the link runs narrower than the card's maximum width, or at a lower
//   generation while the GPU is over 50% busy; idle cards lower the generation
//   to save power), health_score
//   (from burn-ins). Port series: ib_packet_loss (port_rcv_errors +
//   port_xmit_discards) and ib_<counter> for each counter file.
std::optional<Scope> SeriesScope(const std::string& series);

// e.g. "slope(temp_c[5m]) > 1.5": function(series[window]) op threshold, or
// "series op threshold" for kValue; "ratio(a, b[5m]) > 0.001" for kRatio.
struct Condition {
  Function function = Function::kValue;
  std::string series;
  std::string per;               // kRatio's denominator series
  DurationMs window = 0;         // every function but kValue
  Comparison comparison = Comparison::kGreater;
  double threshold = 0;
};
// The condition as written: "slope(temp_c[5m]) > 1.5".
std::string ConditionText(const Condition& c);
// The unit of the value the condition compares, for people: "°C/min" for a
// slope of temp_c, "%" for gpu_util_pct, "" for counts and ratios.
std::string ConditionUnit(const Condition& c);
// Parses a condition expression; the error says what is wrong with it.
Result<Condition> ParseCondition(const std::string& text);

struct Rule {
  std::string name;              // [a-z0-9_]+, unique
  Condition condition;
  Scope scope = Scope::kGpu;
  bool while_job = false;        // kGpu: only while a job holds the GPU
  DurationMs for_duration = 0;   // how long the condition holds before firing
  // kGpu: the condition is not evaluated for this long after a job starts on
  // the GPU (a job's start warms the card and leaves it idle while it loads
  // data; neither should make an alert pending).
  DurationMs settle = 0;
  store::Severity severity = store::Severity::kWarning;
  Action action = Action::kNotify;
  std::string summary;           // one line for people
  std::string origin;            // "file:line" where the rule is written
};

// Parses a rules document ({rules: [...]}); `origin` names it in errors,
// which read "<origin>:<line>: <what to fix>".
Result<std::vector<Rule>> ParseRules(const std::string& yaml_text, const std::string& origin);
Result<std::vector<Rule>> LoadRulesFile(const std::string& path);

// deploy/alerts/default-rules.yaml, embedded at build time.
const char* DefaultRulesYaml();
// The embedded defaults, parsed (their validity is checked by the tests).
std::vector<Rule> DefaultRules();

}  // namespace gpuherd::alerts
