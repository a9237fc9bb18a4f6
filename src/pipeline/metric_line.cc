#include "pipeline/metric_line.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

namespace gpuherd::pipeline {
namespace {

bool StartsWith(std::string_view s, size_t pos, std::string_view token) {
  return s.substr(pos, token.size()) == token;
}

}  // namespace

Result<nlohmann::json> ParseMetricLine(std::string_view line) {
  if (line.size() > kMaxMetricLineBytes) {
    return InvalidArgument("a metrics line is " + std::to_string(line.size()) +
                           " bytes; at most " + std::to_string(kMaxMetricLineBytes) + " are read");
  }
  // nlohmann::json rejects the non-finite tokens, so each is rewritten to 0
  // and remembered by its position among the line's numbers; the parser
  // callback, which sees the numbers in the same order, puts the real value
  // back.
  std::string text;
  text.reserve(line.size());
  std::map<size_t, double> non_finite;  // number index → value
  size_t numbers = 0;
  int depth = 0;  // of objects and arrays, outside strings
  size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == '"') {
      size_t end = i + 1;
      while (end < line.size() && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
      end = std::min(end + 1, line.size());
      text.append(line.substr(i, end - i));
      i = end;
      continue;
    }
    std::optional<double> special;
    size_t length = 0;
    for (const auto& [token, value] :
         {std::pair<std::string_view, double>{"NaN", std::numeric_limits<double>::quiet_NaN()},
          {"Infinity", std::numeric_limits<double>::infinity()},
          {"-Infinity", -std::numeric_limits<double>::infinity()}}) {
      if (StartsWith(line, i, token)) {
        special = value;
        length = token.size();
      }
    }
    if (special) {
      non_finite[numbers++] = *special;
      text += '0';
      i += length;
    } else if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) {
      ++numbers;
      while (i < line.size() &&
             (std::isdigit(static_cast<unsigned char>(line[i])) ||
              std::string_view("+-.eE").find(line[i]) != std::string_view::npos)) {
        text += line[i++];
      }
    } else {
      if (c == '{' || c == '[') {
        // Checked before parsing: the parser, and anything that walks or
        // prints the value later, must never see a line nested this deep.
        if (++depth > kMaxMetricDepth) {
          return InvalidArgument("a metrics line nests objects and arrays deeper than " +
                                 std::to_string(kMaxMetricDepth) + " levels");
        }
      } else if (c == '}' || c == ']') {
        --depth;
      }
      text += c;
      ++i;
    }
  }

  size_t seen = 0;
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(
        text, [&](int, nlohmann::json::parse_event_t event, nlohmann::json& value) {
          if (event == nlohmann::json::parse_event_t::value && value.is_number()) {
            auto it = non_finite.find(seen++);
            if (it != non_finite.end()) value = it->second;
          }
          return true;
        });
  } catch (const nlohmann::json::exception& e) {
    // e.what() quotes at most a few bytes of the line around the error.
    return InvalidArgument("a metrics line must be one JSON object such as {\"step\": 1, "
                           "\"loss\": 0.5}: " + std::string(e.what()).substr(0, 200));
  }
  if (!parsed.is_object()) {
    return InvalidArgument(std::string("a metrics line must be a JSON object such as {\"step\": 1, "
                           "\"loss\": 0.5}, got a JSON ") + parsed.type_name());
  }
  return parsed;
}

std::optional<double> MetricValue(const nlohmann::json& line, const std::string& path) {
  const nlohmann::json* at = &line;
  size_t begin = 0;
  while (true) {
    const size_t dot = path.find('.', begin);
    const std::string part = path.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (!at->is_object()) return std::nullopt;
    auto it = at->find(part);
    if (it == at->end()) {
      // A metric named with a dot at the top level ("eval.loss": 0.3).
      if (begin == 0 && line.contains(path) && line[path].is_number()) return line[path].get<double>();
      return std::nullopt;
    }
    at = &*it;
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  if (!at->is_number()) return std::nullopt;
  return at->get<double>();
}

}  // namespace gpuherd::pipeline
