// The record of one burn-in of one GPU: every check with its outcome and
// reason code, the errors found, the rates achieved, the temperature curve and
// the health score. Stored as JSON (schema below, versioned by
// kBurnInRecordVersion) and shown by `gpuherd burnin` and `gpuherd health`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd::burnin {

// Bumped when a field changes meaning; readers accept older versions.
inline constexpr int kBurnInRecordVersion = 1;

// How a run as a whole ended. "Could not run", "ran and found faults" and
// "aborted" stay distinct: only a finished run says anything about the card.
enum class RunOutcome {
  kPassed,        // every check ran; nothing failed (warnings allowed)
  kFaultsFound,   // it ran and at least one check failed
  kCouldNotRun,   // no driver, no CUDA, no context: nothing is known
  kAborted,       // stopped on request (Ctrl-C, cancel) before the end
};
const char* RunOutcomeName(RunOutcome outcome);  // "passed", "faults_found", ...
Result<RunOutcome> ParseRunOutcome(std::string_view name);

enum class CheckOutcome {
  kPass,
  kWarn,     // works, but below what the card should do (lowers the score)
  kFail,     // a fault: the card should not run work as it is
  kSkipped,  // not applicable here (no ECC on a GeForce card), with the reason
  kError,    // the check could not run (a CUDA call failed), with the reason
};
const char* CheckOutcomeName(CheckOutcome outcome);  // "pass", "warn", ...
Result<CheckOutcome> ParseCheckOutcome(std::string_view name);

enum class Verdict { kHealthy, kDegraded, kUnhealthy, kUnknown };
const char* VerdictName(Verdict verdict);  // "healthy", "degraded", "unhealthy", "unknown"
Result<Verdict> ParseVerdict(std::string_view name);

struct Check {
  std::string name;     // "pcie_link", "memtest.walking_ones", "stress.fp32", ...
  int level = 1;
  CheckOutcome outcome = CheckOutcome::kPass;
  // Machine-readable reason for anything but a plain pass: "pcie_downtrained",
  // "memory_mismatch", "compute_mismatch", "nan", "cuda_unavailable", ...
  std::string reason;
  std::string message;  // for people: what was seen and what to do
  std::map<std::string, double> values;  // measurements, SI-ish units in the key
};

struct MemErrorRecord {
  std::string pattern;  // gpu::MemPatternName
  uint64_t address = 0;
  uint64_t offset = 0;
  uint32_t expected = 0, read = 0, xor_bits = 0;
};

struct TempPoint {
  DurationMs t = 0;  // since the start of the run
  std::optional<double> temp_c, power_w;
  std::optional<int> sm_clock_mhz;
  uint64_t throttle_reasons = 0;
};

// Achieved rates; absent when the level did not measure them.
struct Rates {
  std::optional<double> fp32_tflops, fp16_tflops, bf16_tflops, fp64_tflops;
  std::optional<double> mem_bandwidth_gbs;   // device read-write kernel
  std::optional<double> memtest_gbs;         // memory test, all patterns
  std::optional<double> h2d_gbs, d2h_gbs, d2d_gbs;
};

struct ThermalSummary {
  std::optional<double> idle_temp_c, max_temp_c;
  std::optional<double> time_to_steady_s;     // until within 1 °C of the final plateau
  std::optional<double> max_slope_c_per_min;
  double throttled_fraction = 0;              // share of samples with a thermal/power throttle
  std::optional<double> max_power_w;
};

struct HealthFactor {
  std::string name;     // "throughput", "thermal_headroom", "pcie", "ecc", ...
  double penalty = 0;   // points taken off 100
  std::string detail;   // the figure behind it
};

struct Health {
  int score = 0;                    // 0-100
  Verdict verdict = Verdict::kUnknown;
  bool disqualified = false;        // a memory or compute error: score 0
  std::vector<HealthFactor> factors;
  // Achieved FP32 (or memory bandwidth where no stress ran) against the
  // median of the same model in the fleet's history, and against the
  // catalogue's nominal figure.
  std::optional<double> ratio_to_fleet, ratio_to_nominal;
  int fleet_reference_runs = 0;     // runs behind the fleet median
};

struct BurnInRun {
  int64_t id = 0;                   // assigned by the store; 0 before
  std::string gpu_uuid, gpu_name, pci_bus_id, serial;
  int gpu_index = 0;
  int level = 1;
  bool simulated = false;
  TimeMs started = 0, finished = 0;
  DurationMs stress_duration = 0;   // level 3's requested duration
  RunOutcome outcome = RunOutcome::kCouldNotRun;
  std::string outcome_reason;       // for kCouldNotRun/kAborted: why
  std::vector<Check> checks;
  uint64_t memory_errors = 0;       // every mismatching word, all patterns
  std::vector<MemErrorRecord> memory_error_samples;  // the first ones
  uint64_t compute_errors = 0;      // mismatching elements in checked work
  uint64_t nan_count = 0;           // NaN/Inf elements, counted apart
  Rates rates;
  ThermalSummary thermal;
  std::vector<TempPoint> curve;     // about one point per second, thinned for long runs
  Health health;
  int64_t job_id = 0;               // the queue job that ran it; 0 when run directly
};

nlohmann::json ToJson(const BurnInRun& run);
// Fails with kDataLoss naming the field when the record is malformed.
Result<BurnInRun> BurnInRunFromJson(const nlohmann::json& j);

}  // namespace gpuherd::burnin
