#include "cli/spec_file.h"

#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

namespace gpuherd::cli {
namespace {

// YAML scalars carry no type; numbers and booleans are recognised the way a
// YAML 1.2 reader would, everything else stays a string.
nlohmann::json ScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted: always a string
  if (text == "true" || text == "false") return text == "true";
  if (text == "null" || text == "~") return nullptr;
  try {
    size_t used = 0;
    long long i = std::stoll(text, &used);
    if (used == text.size()) return i;
    double d = std::stod(text, &used);
    if (used == text.size()) return d;
  } catch (...) {
  }
  return text;
}

nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: return ScalarToJson(node);
    default: return nullptr;
  }
}

}  // namespace

Result<nlohmann::json> LoadSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read job spec " + path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    if (!j.is_object()) return InvalidArgument(path + ": a job spec must be an object with a \"command\"");
    return j;
  }
  try {
    YAML::Node root = YAML::Load(text.str());
    if (!root.IsMap()) return InvalidArgument(path + ": a job spec must be a mapping with a command");
    return YamlToJson(root);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg +
                           " (the file is neither valid JSON nor valid YAML)");
  }
}

}  // namespace gpuherd::cli
