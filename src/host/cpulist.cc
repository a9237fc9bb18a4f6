#include "host/cpulist.h"

#include <algorithm>
#include <charconv>
#include <optional>

namespace gpuherd::host {
namespace {

std::string_view Trim(std::string_view text) {
  const char* kSpace = " \t\r\n";
  size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

}  // namespace

std::optional<int> ParseCpuNumber(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0 || value > kMaxCpu) return std::nullopt;
  return value;
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  const std::string_view trimmed = Trim(text);
  std::string_view rest = trimmed;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view part = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t dash = part.find('-');
    auto first = ParseCpuNumber(part.substr(0, dash));
    auto last = dash == std::string_view::npos ? first : ParseCpuNumber(part.substr(dash + 1));
    if (!first || !last || *last < *first) {
      return InvalidArgument("bad CPU list \"" + std::string(trimmed.substr(0, 200)) +
                             "\": expected numbers (0 to " + std::to_string(kMaxCpu) +
                             ") and ranges like 0-31,64-95");
    }
    for (int cpu = *first; cpu <= *last; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(std::vector<int> cpus) {
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

}  // namespace gpuherd::host
