#include "core/time.h"

#include <cctype>
#include <ctime>

#include <fmt/format.h>

namespace gpuherd {

std::string FormatTimeUtc(TimeMs t) {
  std::time_t secs = static_cast<std::time_t>(FloorTo(t, kSecondMs) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, t - FloorTo(t, kSecondMs));
}

std::string FormatDuration(DurationMs d) {
  if (d < 0) return "-" + FormatDuration(-d);
  if (d < kSecondMs) return fmt::format("{}ms", d);
  int64_t s = d / 1000;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

bool ParseDuration(const std::string& text, DurationMs* out) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return false;
  double value = 0;
  try {
    value = std::stod(text.substr(0, i));
  } catch (...) {
    return false;
  }
  std::string unit = text.substr(i);
  double scale;
  if (unit.empty() || unit == "s") scale = kSecondMs;
  else if (unit == "ms") scale = 1;
  else if (unit == "m" || unit == "min") scale = kMinuteMs;
  else if (unit == "h") scale = kHourMs;
  else if (unit == "d") scale = 24.0 * kHourMs;
  else return false;
  // Checked before the conversion: a double beyond int64 is undefined there.
  double ms = value * scale + 0.5;
  if (!(ms <= static_cast<double>(kMaxDurationMs))) return false;
  *out = static_cast<DurationMs>(ms);
  return true;
}

}  // namespace gpuherd
