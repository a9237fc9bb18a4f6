// Time in gpuherd is wall-clock milliseconds since the Unix epoch, passed as a
// value. Only host::Clock reads the real clock; everything else takes `now`.
#pragma once

#include <cstdint>
#include <string>

namespace gpuherd {

using TimeMs = int64_t;     // milliseconds since 1970-01-01T00:00:00Z
using DurationMs = int64_t;

constexpr DurationMs kSecondMs = 1000;
constexpr DurationMs kMinuteMs = 60 * kSecondMs;
constexpr DurationMs kHourMs = 60 * kMinuteMs;

// "2026-12-02T12:33:26.123Z"
std::string FormatTimeUtc(TimeMs t);
// "5s", "3m20s", "2h05m", "3d04h"
std::string FormatDuration(DurationMs d);
// Parses "250ms", "5s", "10m", "2h", "3d" or a bare number of seconds.
bool ParseDuration(const std::string& text, DurationMs* out);

// Floors t to a multiple of `step` (e.g. the start of its minute).
constexpr TimeMs FloorTo(TimeMs t, DurationMs step) {
  return t >= 0 ? t - t % step : t - ((t % step) + step) % step;
}

}  // namespace gpuherd
