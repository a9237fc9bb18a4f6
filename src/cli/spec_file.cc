#include "cli/spec_file.h"

#include "core/yaml.h"

namespace gpuherd::cli {

Result<nlohmann::json> LoadSpecFile(const std::string& path) {
  const YamlLimits limits;  // a job spec is far smaller than any of these
  auto text = ReadTextFile(path, limits.max_bytes);
  if (!text.ok()) return text.status().Annotate("job spec");
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    if (!j.is_object()) return InvalidArgument(path + ": a job spec must be an object with a \"command\"");
    return j;
  }
  auto root = LoadYaml(*text, path, limits);
  if (!root.ok()) {
    return Status(root.status().code(), root.status().message() + " (the file is neither valid JSON nor valid YAML)");
  }
  if (!root->IsMap()) return InvalidArgument(path + ": a job spec must be a mapping with a command");
  return YamlToJson(*root);
}

}  // namespace gpuherd::cli
