#include "gpu/open.h"

#include <spdlog/spdlog.h>

#include "gpu/nvml/nvml_driver.h"
#include "gpu/nvml/nvml_library.h"
#include "gpu/sim/sim_driver.h"

namespace gpuherd::gpu {

Result<OpenedDriver> OpenDriver(const DriverChoice& choice) {
  sim::SimOptions options;
  options.seed = choice.seed;
  std::string reason;
  if (!choice.scenario_path.empty()) {
    options.scenario_path = choice.scenario_path;
    options.count = choice.sim_count;  // 0: as many as the scenario names
    reason = "scenario " + choice.scenario_path;
  } else if (choice.sim_count > 0) {
    options.count = choice.sim_count;
    reason = "asked for with --sim " + std::to_string(choice.sim_count);
  } else {
    auto nvml = nvml::OpenNvmlDriver(choice.nvml_library);
    if (nvml.ok()) return OpenedDriver{std::move(nvml).value(), ""};
    if (choice.fallback_sim_count <= 0) return nvml.status();
    options.count = choice.fallback_sim_count;
    // The full reason goes to the log; views show the short one.
    spdlog::info("NVML unavailable: {}", nvml.status().message());
    reason = "no NVIDIA driver found: " + nvml::ResolveNvmlLibraryPath(choice.nvml_library) + " cannot be loaded";
  }
  auto sim = sim::OpenSimDriver(options);
  if (!sim.ok()) return sim.status();
  return OpenedDriver{std::move(sim).value(), reason};
}

}  // namespace gpuherd::gpu
