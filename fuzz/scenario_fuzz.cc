// libFuzzer target: a simulated fleet's scenario YAML (--simulate FILE).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gpu/sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto scenario = gpuherd::gpu::sim::ParseScenario(text, "fuzz.yaml");
  if (scenario.ok()) (void)gpuherd::gpu::sim::ScenarioGpuCount(*scenario);
  return 0;
}
