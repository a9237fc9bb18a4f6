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
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "core/status.h"

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
  // A scalar or a list of scalars.
  Result<std::vector<std::string>> List(const YAML::Node& node, const std::string& what) const;

 private:
  std::string source_;
};

}  // namespace gpuherd
