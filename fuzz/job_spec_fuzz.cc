// libFuzzer target: a job spec as the API receives it (JSON body of
// POST /v1/jobs) through sched::ParseJobSpec.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sched/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  auto spec = gpuherd::sched::ParseJobSpec(j);
  if (spec.ok()) (void)gpuherd::sched::ValidateJobSpec(*spec);
  return 0;
}
