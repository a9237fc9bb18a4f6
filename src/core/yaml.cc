#include "core/yaml.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "core/suggest.h"
#include "core/utf8.h"

namespace gpuherd {
namespace {

// Walks the document iteratively (a deep one must not overflow the stack)
// and stops at the first limit it passes, so the walk itself costs at most
// max_nodes steps however many times the aliases multiply the tree.
Status CheckLimits(const YAML::Node& root, const YamlReader& reader, const YamlLimits& limits) {
  struct Frame {
    YAML::Node node;
    int depth;
  };
  std::vector<Frame> todo;
  todo.push_back({root, 0});
  size_t nodes = 0, bytes = 0;
  while (!todo.empty()) {
    Frame f = std::move(todo.back());
    todo.pop_back();
    if (++nodes > limits.max_nodes) {
      return reader.Error(f.node, fmt::format("the document has more than {} values (each use of "
                                              "an alias counts again); it is refused to bound the "
                                              "memory it would take",
                                              limits.max_nodes));
    }
    if (f.depth > limits.max_depth) {
      return reader.Error(f.node, fmt::format("lists and mappings nest deeper than {} levels",
                                              limits.max_depth));
    }
    switch (f.node.Type()) {
      case YAML::NodeType::Scalar:
        bytes += f.node.Scalar().size();
        if (bytes > limits.max_expanded_bytes) {
          return reader.Error(f.node, fmt::format("the document's text comes to more than {} bytes "
                                                  "(each use of an alias counts again)",
                                                  limits.max_expanded_bytes));
        }
        // Everything read from YAML may end up in JSON (a plan, a job spec,
        // an API reply), whose writer throws on bytes that are not UTF-8;
        // yaml-cpp passes such bytes through as they are.
        if (!IsUtf8(f.node.Scalar())) {
          return reader.Error(f.node, "text that is not valid UTF-8 (YAML is read as UTF-8)");
        }
        break;
      case YAML::NodeType::Sequence:
        for (auto it = f.node.begin(); it != f.node.end(); ++it) {
          todo.push_back({YAML::Node(*it), f.depth + 1});
        }
        break;
      case YAML::NodeType::Map:
        for (auto it = f.node.begin(); it != f.node.end(); ++it) {
          YAML::Node key = it->first;
          YAML::Node value = it->second;
          todo.push_back({std::move(key), f.depth + 1});
          todo.push_back({std::move(value), f.depth + 1});
        }
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

// The whole of `s` as a number (a finite one for double), or nothing.
template <typename T>
std::optional<T> NumberOf(const std::string& s) {
  T value{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return std::nullopt;
  }
  return value;
}

template <typename T>
std::optional<T> InRange(std::optional<T> value, T lo, T hi) {
  if (value && (*value < lo || *value > hi)) return std::nullopt;
  return value;
}

std::string Limited(std::string_view text, size_t max) {
  return std::string(text.substr(0, max)) + (text.size() > max ? "..." : "");
}

}  // namespace

Result<YAML::Node> LoadYaml(std::string_view text, const std::string& source, const YamlLimits& limits) {
  YamlReader reader(source);
  if (text.size() > limits.max_bytes) {
    return InvalidArgument(fmt::format("{}: the document is {} bytes; at most {} are read", source,
                                       text.size(), limits.max_bytes));
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return reader.Error(e.mark.line + 1, "not valid YAML: " + e.msg);
  } catch (const std::exception& e) {
    return reader.Error(0, std::string("cannot be read as YAML: ") + e.what());
  }
  GPUHERD_RETURN_IF_ERROR(CheckLimits(root, reader, limits));
  return root;
}

Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    Status s(err == ENOENT ? Code::kNotFound : Code::kIoError,
             fmt::format("cannot read {}: {}", path, std::strerror(err)));
    return s;
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return IoError(fmt::format("cannot read {}: {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      return InvalidArgument(fmt::format("{}: the file is larger than {} bytes, the most that is read",
                                         path, max_bytes));
    }
  }
  ::close(fd);
  return text;
}

Result<YAML::Node> LoadYamlFile(const std::string& path, const YamlLimits& limits) {
  auto text = ReadTextFile(path, limits.max_bytes);
  if (!text.ok()) return text.status();
  return LoadYaml(*text, path, limits);
}

nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (auto it = node.begin(); it != node.end(); ++it) out.push_back(YamlToJson(YAML::Node(*it)));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (auto it = node.begin(); it != node.end(); ++it) {
        YAML::Node key = it->first;
        YAML::Node value = it->second;
        out[key.IsScalar() ? key.Scalar() : std::string()] = YamlToJson(value);
      }
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string s = node.Scalar();
      if (node.Tag() == "!") return s;  // quoted: always a string
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      const char* begin = s.data();
      const char* end = s.data() + s.size();
      int64_t n = 0;
      if (auto r = std::from_chars(begin, end, n); r.ec == std::errc() && r.ptr == end) return n;
      double d = 0;
      if (auto r = std::from_chars(begin, end, d); r.ec == std::errc() && r.ptr == end && std::isfinite(d)) {
        return d;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

int YamlReader::Line(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const int line = node.Mark().line;
  return line < 0 ? 0 : line + 1;
}

Status YamlReader::Error(int line, std::string_view what) const {
  if (line <= 0) return InvalidArgument(fmt::format("{}: {}", source_, what));
  return InvalidArgument(fmt::format("{}:{}: {}", source_, line, what));
}

Status YamlReader::Error(const YAML::Node& node, std::string_view what) const {
  return Error(Line(node), what);
}

Result<std::string> YamlReader::Scalar(const YAML::Node& node, const std::string& what) const {
  if (!node.IsScalar()) return Error(node, what + " must be a single value, not a list or map");
  return node.Scalar();
}

// The one conversion of a scalar to a type: `parse` gives nothing for text
// that is not a T (or is out of range), and the error says what was expected.
template <typename T, typename Parse>
Result<T> YamlReader::Typed(const YAML::Node& node, const std::string& what, const std::string& expected,
                            Parse parse) const {
  auto text = Scalar(node, what);
  if (!text.ok()) return text.status();
  const std::optional<T> value = parse(*text);
  if (!value) return Error(node, fmt::format("{} must be {}, not '{}'", what, expected, Limited(*text, 40)));
  return *value;
}

Result<int64_t> YamlReader::Int(const YAML::Node& node, const std::string& what, int64_t lo,
                                int64_t hi) const {
  return Typed<int64_t>(node, what, fmt::format("a whole number from {} to {}", lo, hi),
                        [&](const std::string& s) { return InRange(NumberOf<int64_t>(s), lo, hi); });
}

Result<double> YamlReader::Double(const YAML::Node& node, const std::string& what, double lo,
                                  double hi) const {
  return Typed<double>(node, what, fmt::format("a number from {:g} to {:g}", lo, hi),
                       [&](const std::string& s) { return InRange(NumberOf<double>(s), lo, hi); });
}

Result<int64_t> YamlReader::Int(const YAML::Node& node, const std::string& what) const {
  return Typed<int64_t>(node, what, "a whole number", NumberOf<int64_t>);
}

Result<double> YamlReader::Double(const YAML::Node& node, const std::string& what) const {
  return Typed<double>(node, what, "a number", NumberOf<double>);
}

Result<bool> YamlReader::Bool(const YAML::Node& node, const std::string& what) const {
  return Typed<bool>(node, what, "true or false", [](const std::string& s) -> std::optional<bool> {
    if (s != "true" && s != "false") return std::nullopt;
    return s == "true";
  });
}

Result<DurationMs> YamlReader::Duration(const YAML::Node& node, const std::string& what) const {
  auto text = Scalar(node, what);
  if (!text.ok()) return text.status();
  DurationMs d = 0;
  if (!ParseDuration(*text, &d)) {
    return Error(node, fmt::format("{} '{}' is not a duration; write e.g. 90s, 15m, 1h or 500ms", what,
                                   Limited(*text, 40)));
  }
  return d;
}

Result<std::vector<YamlReader::Entry>> YamlReader::Entries(const YAML::Node& map, const YamlKeys& keys) const {
  const std::string in = keys.where.empty() ? "" : " in " + keys.where;
  if (!map.IsMap()) return Error(map, fmt::format("{} must be a mapping", keys.where.empty() ? "it" : keys.where));
  std::vector<Entry> out;
  out.reserve(map.size());
  std::set<std::string> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    Entry e{"", it->first, it->second};
    if (!e.key_node.IsScalar()) {
      return Error(e.key_node, fmt::format("a {}{} must be a word, not a list or map", keys.noun, in));
    }
    e.key = e.key_node.Scalar();
    if (!keys.allowed.empty() &&
        std::find(keys.allowed.begin(), keys.allowed.end(), e.key) == keys.allowed.end()) {
      return Error(e.key_node, fmt::format("unknown {} '{}'{}{}; allowed {}s: {}", keys.noun, Limited(e.key, 60), in,
                                           DidYouMean(e.key, keys.allowed), keys.noun, JoinNames(keys.allowed)));
    }
    if (keys.name_ok && !keys.name_ok(e.key)) {
      return Error(e.key_node, fmt::format("{} name '{}' {}", keys.noun, Limited(e.key, 60), keys.name_rule));
    }
    if (!seen.insert(e.key).second) {
      return Error(e.key_node, fmt::format("{} '{}' appears twice{}", keys.noun, Limited(e.key, 60), in));
    }
    out.push_back(std::move(e));
  }
  return out;
}

Status YamlReader::CheckKeys(const YAML::Node& map, const YamlKeys& keys) const {
  auto entries = Entries(map, keys);
  return entries.ok() ? Status::Ok() : entries.status();
}

Result<std::vector<std::string>> YamlReader::List(const YAML::Node& node, const std::string& what) const {
  std::vector<std::string> out;
  if (node.IsScalar()) {
    out.push_back(node.Scalar());
    return out;
  }
  if (!node.IsSequence()) return Error(node, what + " must be a list such as [a, b]");
  for (auto it = node.begin(); it != node.end(); ++it) {
    auto s = Scalar(YAML::Node(*it), "each entry of " + what);
    if (!s.ok()) return s.status();
    out.push_back(*s);
  }
  return out;
}

}  // namespace gpuherd
