// The one YAML reader: job spec files, pipelines, scenarios and alert rules
// are all read through it. It bounds what a document may cost before anyone
// walks it (yaml-cpp shares an aliased node instead of copying it, so a
// 600-byte "billion laughs" loads cheaply and explodes only when walked),
// names file and line in every error, and has the one YAML→JSON conversion.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "core/status.h"
#include "core/time.h"

namespace gpuherd {

// What one document may cost. Nodes and bytes count every use of an alias,
// i.e. what a walk over the document (or its JSON) would visit.
struct YamlLimits {
  size_t max_bytes = 1 << 20;               // the document's text
  int max_depth = 32;                       // nesting of lists and mappings
  size_t max_nodes = 100000;                // values, keys included, aliases expanded
  size_t max_expanded_bytes = 8 << 20;      // scalar text, aliases expanded
};

// Parses `text` and checks it against `limits`; `source` (a file name)
// starts every error message: "pipeline.yaml:12: ...".
Result<YAML::Node> LoadYaml(std::string_view text, const std::string& source,
                            const YamlLimits& limits = {});
// Reads at most limits.max_bytes of `path` (a longer file is refused) and
// parses it as LoadYaml does.
Result<std::string> ReadTextFile(const std::string& path, size_t max_bytes);
Result<YAML::Node> LoadYamlFile(const std::string& path, const YamlLimits& limits = {});

// YAML → JSON with the types a job spec expects: a plain true/false (or
// True/False) is a boolean, a plain whole number an integer, a plain finite
// decimal a double, null/~ null, anything quoted a string. The node must
// have passed LoadYaml's limits (the walk is recursive).
nlohmann::json YamlToJson(const YAML::Node& node);

// How a mapping's keys are checked (YamlReader::Entries). Either a fixed set
// of keys (`allowed`), or names the user chooses (steps, parameters, env
// names), each checked by `name_ok`. Keys are single values and each appears
// once, whichever it is.
struct YamlKeys {
  // A mapping of the keys in `allowed` (empty: any key).
  YamlKeys(std::string where_, std::vector<std::string> allowed_ = {}, std::string noun_ = "key")
      : where(std::move(where_)), allowed(std::move(allowed_)), noun(std::move(noun_)) {}
  // A mapping whose keys are names the user chooses, each checked by `ok`.
  static YamlKeys Names(std::string where, std::string noun, bool (*ok)(const std::string& name),
                        std::string rule) {
    YamlKeys keys(std::move(where), {}, std::move(noun));
    keys.name_ok = ok;
    keys.name_rule = std::move(rule);
    return keys;
  }

  // Where the mapping is, for messages: "unknown key 'x' in step 'train'".
  // Empty: the noun says enough ("unknown top-level key 'x'").
  std::string where;
  // The keys a reader takes; an unknown one is refused with the closest
  // allowed key suggested. Empty: any key.
  std::vector<std::string> allowed;
  // What a key is called: "key", "field", "step", "parameter".
  std::string noun;
  // For names the user chooses: whether one is acceptable, and what the
  // message says it must be ("step name 'a b' may use only letters, ...").
  bool (*name_ok)(const std::string& name) = nullptr;
  std::string name_rule;
};

// Line-aware reading of one document: every error names the source and the
// node's line. Nodes are taken by value (a YAML::Node is a handle): never
// bind a reference to `it->first` / `it->second` of a yaml-cpp iterator,
// whose proxy dies at the end of the expression.
class YamlReader {
 public:
  explicit YamlReader(std::string source) : source_(std::move(source)) {}
  const std::string& source() const { return source_; }

  // 1-based; 0 for a node that has no position (missing or built in code).
  static int Line(const YAML::Node& node);
  Status Error(int line, std::string_view what) const;
  Status Error(const YAML::Node& node, std::string_view what) const;

  Result<std::string> Scalar(const YAML::Node& node, const std::string& what) const;
  // A whole number in [lo, hi]; the error states the range.
  Result<int64_t> Int(const YAML::Node& node, const std::string& what, int64_t lo, int64_t hi) const;
  // A finite number in [lo, hi]; the error states the range.
  Result<double> Double(const YAML::Node& node, const std::string& what, double lo, double hi) const;
  // A whole number, any; the caller states its own range.
  Result<int64_t> Int(const YAML::Node& node, const std::string& what) const;
  // A finite number, any.
  Result<double> Double(const YAML::Node& node, const std::string& what) const;
  // true or false, as written.
  Result<bool> Bool(const YAML::Node& node, const std::string& what) const;
  // A duration as ParseDuration reads it (90s, 15m, 1h, 500ms).
  Result<DurationMs> Duration(const YAML::Node& node, const std::string& what) const;
  // A scalar or a list of scalars.
  Result<std::vector<std::string>> List(const YAML::Node& node, const std::string& what) const;

  // One entry of a mapping, in file order.
  struct Entry {
    std::string key;
    YAML::Node key_node;  // where errors about the key point
    YAML::Node value;
  };
  // The entries of `map` (which must be a mapping), its keys checked as
  // `keys` says. The one walk over a mapping every reader uses.
  Result<std::vector<Entry>> Entries(const YAML::Node& map, const YamlKeys& keys) const;
  // Entries' checks alone, for a reader that then looks keys up by name.
  Status CheckKeys(const YAML::Node& map, const YamlKeys& keys) const;

 private:
  template <typename T, typename Parse>
  Result<T> Typed(const YAML::Node& node, const std::string& what, const std::string& expected,
                  Parse parse) const;

  std::string source_;
};

}  // namespace gpuherd
