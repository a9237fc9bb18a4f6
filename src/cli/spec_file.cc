#include "cli/spec_file.h"

#include "core/yaml.h"
#include "sched/job_spec.h"

namespace gpuherd::cli {

Result<nlohmann::json> LoadSpecFile(const std::string& path) {
  const YamlLimits limits;  // a job spec is far smaller than any of these
  auto text = ReadTextFile(path, limits.max_bytes);
  if (!text.ok()) return text.status().Annotate("job spec");
  // JSON is read as YAML too (YAML's flow style is a superset of it), so
  // both kinds of file get the line of a wrong field.
  auto root = LoadYaml(*text, path, limits);
  if (!root.ok()) {
    nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return Status(root.status().code(), root.status().message() + " (the file is neither valid JSON nor valid YAML)");
    }
    if (!j.is_object()) return InvalidArgument(path + ": a job spec must be an object with a \"command\"");
    return j;
  }
  YamlReader reader(path);
  if (!root->IsMap()) return reader.Error(*root, "a job spec must be a mapping with a command, e.g. command: python3 train.py");
  // Each field is checked here, where its line is known, by the parser the
  // daemon uses; flags may still override it, and the daemon checks the
  // whole spec again.
  nlohmann::json spec = nlohmann::json::object();
  sched::JobSpec scratch;
  auto entries = reader.Entries(*root, {"the job spec", {}, "field"});
  if (!entries.ok()) return entries.status();
  for (const YamlReader::Entry& entry : *entries) {
    const YAML::Node& value = entry.value;
    nlohmann::json field = YamlToJson(value);
    // A command's arguments are text as written: [sleep, 5] is "sleep" "5",
    // and [true] runs true, not a boolean.
    if (entry.key == "command" && value.IsSequence()) {
      for (size_t i = 0; i < value.size(); ++i) {
        if (value[i].IsScalar()) field[i] = value[i].Scalar();
      }
    }
    // hold is how the job is submitted (like --hold), not part of its spec.
    if (entry.key == "hold") {
      if (!field.is_boolean()) return reader.Error(value, "job spec field 'hold': must be true or false");
      spec[entry.key] = std::move(field);
      continue;
    }
    if (Status s = sched::ParseJobSpecField(entry.key, field, &scratch); !s.ok()) {
      return reader.Error(value.IsNull() ? entry.key_node : value, s.message());
    }
    spec[entry.key] = std::move(field);
  }
  return spec;
}

}  // namespace gpuherd::cli
