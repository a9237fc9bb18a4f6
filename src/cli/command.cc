#include "cli/command.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/table.h"

namespace gpuherd::cli {

bool CommandContext::color() const { return ::isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr; }

const DaemonLocation& CommandContext::location() const {
  if (!located) located = LocateDaemon(home, SystemPaths());
  return *located;
}

void CommandContext::Fail(const Status& status) {
  // Messages quote what users and jobs wrote: printed escaped.
  std::fprintf(stderr, "gpuherd: %s\n", PrintableLines(status.message()).c_str());
  exit_code = 1;
}

gpu::DriverChoice DriverFlags::choice() const {
  gpu::DriverChoice choice;
  choice.sim_count = sim;
  choice.scenario_path = scenario;
  choice.seed = seed;
  return choice;
}

void DriverFlags::AddTo(CLI::App* command) {
  auto* sim_opt = command->add_option("--sim", sim, "Use N simulated GPUs instead of NVML")
                      ->check(CLI::Range(1, 4096));
  auto* scenario_opt = command->add_option("--scenario", scenario, "Simulated fleet and faults from a YAML file")
                           ->check(CLI::ExistingFile);
  sim_opt->excludes(scenario_opt);
  command->add_option("--seed", seed, "Seed of the simulated fleet (same seed, same readings)");
}

}  // namespace gpuherd::cli
