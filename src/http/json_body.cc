#include "http/json_body.h"

#include <fmt/format.h>

namespace gpuherd::http {

int JsonDepth(std::string_view text, int stop_above) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (++depth > deepest) deepest = depth;
        if (deepest > stop_above) return deepest;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return deepest;
}

std::string Excerpt(std::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (out.size() >= max_bytes) {
      out += "...";
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c >= 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

std::string DumpCapped(const nlohmann::json& value, size_t max_bytes) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > max_bytes) text = text.substr(0, max_bytes) + "...";
  return text;
}

Result<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return InvalidArgument(fmt::format("the JSON is {} bytes, more than the limit of {}",
                                       text.size(), limits.max_bytes));
  }
  if (JsonDepth(text, limits.max_depth) > limits.max_depth) {
    return InvalidArgument(fmt::format(
        "the JSON nests arrays and objects more than {} deep", limits.max_depth));
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() quotes the last token read, which may be the whole input.
    size_t at = e.byte == 0 ? 0 : e.byte - 1;
    size_t from = at > 20 ? at - 20 : 0;
    return InvalidArgument(fmt::format("invalid JSON at byte {} (near '{}')", e.byte,
                                       Excerpt(text.substr(std::min(from, text.size())), 40)));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(fmt::format("invalid JSON: {}", Excerpt(e.what(), 200)));
  }
}

}  // namespace gpuherd::http
