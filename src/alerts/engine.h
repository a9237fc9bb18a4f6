// The alert engine: evaluates the rules over the recent series of every GPU
// and InfiniBand port and moves each (rule, subject) through
// inactive -> pending -> firing -> resolved, honouring `for:`.
//
// Pure: no clock, no I/O; time comes as `now`. Not thread-safe: the daemon's
// loop owns it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "alerts/rules.h"
#include "core/time.h"
#include "gpu/types.h"
#include "store/records.h"

namespace gpuherd::alerts {

// One burn-in's score.
struct HealthPoint {
  TimeMs time = 0;
  int score = 0;
};

struct GpuInput {
  const gpu::GpuInfo* info = nullptr;      // not owned; required
  std::vector<gpu::GpuSample> recent;      // oldest first; at least the longest window
  bool lost = false;                       // the newest reading failed
  bool job_running = false;                // a job holds the GPU
  std::vector<HealthPoint> health;         // oldest first
};

// One reading of a port's counters (/sys/class/infiniband/.../counters).
struct IbReading {
  TimeMs time = 0;
  std::map<std::string, uint64_t> counters;
};

struct IbPortInput {
  std::string device;                      // "mlx5_0"
  std::string port;                        // "1"
  std::vector<IbReading> recent;           // oldest first
};

struct EvalInput {
  std::vector<GpuInput> gpus;
  std::vector<IbPortInput> ib_ports;
};

enum class AlertState { kInactive = 0, kPending, kFiring, kResolved };
const char* AlertStateName(AlertState state);  // "inactive", "pending", "firing", "resolved"
std::optional<AlertState> ParseAlertState(const std::string& text);

// An alert of one rule on one subject.
struct Alert {
  std::string rule;
  std::string subject;          // the GPU's UUID, or "mlx5_0/1" for a port
  int gpu_index = -1;           // -1 for a port
  AlertState state = AlertState::kInactive;
  TimeMs pending_since = 0;     // when the condition started to hold
  TimeMs fired_at = 0;          // 0 until firing
  TimeMs resolved_at = 0;       // 0 until resolved
  double value = 0;             // the reduced series at the last evaluation
  store::Severity severity = store::Severity::kWarning;
  Action action = Action::kNone;
  std::string summary;
};

// A change of state. The daemon carries out `alert.action` once for every
// transition with to == kFiring, notifies (action != kNone) on kFiring and
// kResolved, and stores every transition.
struct AlertTransition {
  AlertState from = AlertState::kInactive;
  AlertState to = AlertState::kInactive;
  TimeMs time = 0;
  Alert alert;                  // after the transition
};

class AlertEngine {
 public:
  explicit AlertEngine(std::vector<Rule> rules);

  // Evaluates every rule on every subject of `in` at `now`. A condition whose
  // series has no reading in its window is false (a GPU that does not report
  // a reading, or a lost one, neither fires nor stays firing). Subjects
  // absent from `in` are treated the same.
  std::vector<AlertTransition> Evaluate(const EvalInput& in, TimeMs now);

  // Pending and firing alerts, by rule then subject.
  std::vector<Alert> Active() const;

  // Takes back pending and firing alerts kept across a restart, so that a
  // firing alert does not fire (and act) again. Others are ignored.
  void Restore(const std::vector<Alert>& active);

  const std::vector<Rule>& rules() const { return rules_; }
  // The longest window of any rule: how much history Evaluate needs.
  DurationMs LongestWindow() const;

 private:
  using Key = std::pair<std::string, std::string>;  // (rule, subject)

  // Moves one (rule, subject) given whether its condition holds now.
  void Step(const Rule& rule, const std::string& subject, int gpu_index, std::optional<double> value, TimeMs now,
            std::vector<AlertTransition>& out);

  std::vector<Rule> rules_;
  std::map<Key, Alert> active_;
  std::map<std::string, TimeMs> job_since_;  // GPU UUID -> when a job was first seen on it
};

// The reduced series of `c` over a GPU's input at `now`; nullopt when there is
// not enough data. Exposed so that a view can show why an alert fires.
std::optional<double> EvaluateGpu(const Condition& c, const GpuInput& gpu, TimeMs now);
std::optional<double> EvaluateIbPort(const Condition& c, const IbPortInput& port, TimeMs now);

}  // namespace gpuherd::alerts
