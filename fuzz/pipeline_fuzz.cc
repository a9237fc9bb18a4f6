// libFuzzer target: a pipeline YAML file, parsed and expanded into its plan
// (what `gpuherd run` and POST /v1/pipelines do before submitting).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "pipeline/plan.h"
#include "pipeline/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = gpuherd::pipeline::ParsePipeline(text, "fuzz.yaml");
  if (!spec.ok()) return 0;
  (void)gpuherd::pipeline::Expand(*spec, {}, "/nonexistent/fuzz-run");
  return 0;
}
