// One line of a job's metrics file (GPUHERD_METRICS_FILE): a JSON object
// such as {"step": 120, "loss": 0.41}.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace gpuherd::pipeline {

// What one line may be: longer or deeper lines are refused before they are
// parsed (a job writes these files; the daemon reads them as root).
inline constexpr size_t kMaxMetricLineBytes = 64 << 10;
inline constexpr int kMaxMetricDepth = 16;

// Parses one metrics line. JSON has no literal for NaN or infinity, but
// Python's json.dumps writes NaN, Infinity and -Infinity, which is exactly
// what a diverging loss produces; those tokens (outside strings) become the
// double values NaN, +inf and -inf. The line must be a JSON object.
Result<nlohmann::json> ParseMetricLine(std::string_view line);

// A metric line's value at `path` ("loss", or "eval.loss" for a nested
// field), when it is a number.
std::optional<double> MetricValue(const nlohmann::json& line, const std::string& path);

}  // namespace gpuherd::pipeline
