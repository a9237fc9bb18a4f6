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

// The longest duration anything accepts: 10^9 seconds (11574 days, about 31
// years). Every parsed duration is at most this, so that a time plus a
// duration stays far inside int64 (see SaturatingAdd for stored values).
constexpr DurationMs kMaxDurationMs = 1'000'000'000 * kSecondMs;
// "11574d": kMaxDurationMs for error messages.
inline constexpr char kMaxDurationText[] = "11574d";

// t + d, clamped to the int64 range instead of overflowing.
constexpr TimeMs SaturatingAdd(TimeMs t, DurationMs d) {
  TimeMs sum = 0;
  if (!__builtin_add_overflow(t, d, &sum)) return sum;
  return d > 0 ? INT64_MAX : INT64_MIN;
}

// "2026-12-02T12:33:26.123Z"
std::string FormatTimeUtc(TimeMs t);
// "5s", "3m20s", "2h05m", "3d04h"
std::string FormatDuration(DurationMs d);
// Parses "250ms", "5s", "10m", "2h", "3d" or a bare number of seconds; false
// for anything else and for more than kMaxDurationMs.
bool ParseDuration(const std::string& text, DurationMs* out);

// Floors t to a multiple of `step` (e.g. the start of its minute).
constexpr TimeMs FloorTo(TimeMs t, DurationMs step) {
  return t >= 0 ? t - t % step : t - ((t % step) + step) % step;
}

}  // namespace gpuherd
