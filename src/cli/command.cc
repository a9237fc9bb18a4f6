#include "cli/command.h"

#include <unistd.h>

#include <cstdio>
#include <charconv>
#include <climits>
#include <cstdlib>

#include <fmt/format.h>

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
  exit_code = status.code() == Code::kInvalidArgument ? 2 : 1;
}

CLI::Validator WholeNumber(int64_t lo, int64_t hi) {
  std::string range = hi == INT64_MAX ? fmt::format("{} or more", lo) : fmt::format("from {} to {}", lo, hi);
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        int64_t value = 0;
        auto [end, ec] = std::from_chars(input.data(), input.data() + input.size(), value);
        if (ec != std::errc() || end != input.data() + input.size() || value < lo || value > hi) {
          return fmt::format("must be a whole number {}, got '{}'", range, input);
        }
        return std::string();
      },
      range == "0 or more" ? "NUMBER>=0" : "NUMBER");
}

CLI::Validator NonNegativeWhole() { return WholeNumber(0, INT64_MAX); }
CLI::Validator PositiveWhole() { return WholeNumber(1, INT64_MAX); }

CLI::Validator JobRef() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        const size_t underscore = input.find('_');
        // A plain id is refused in the words every id has (WholeNumber).
        if (underscore == std::string::npos) {
          std::string plain = PositiveWhole()(input);
          return plain.empty() ? plain : plain + " (or a task of an array such as 12_3)";
        }
        auto whole = [](const std::string& text, int64_t lo) {
          int64_t value = 0;
          auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
          return ec == std::errc() && end == text.data() + text.size() && value >= lo;
        };
        const bool ok = whole(input.substr(0, underscore), 1) && whole(input.substr(underscore + 1), 0);
        return ok ? std::string()
                  : "must be a job id such as 12, or a task of an array such as 12_3; got '" + Printable(input) + "'";
      },
      "ID|ARRAY_INDEX");
}

gpu::DriverChoice DriverFlags::choice() const {
  gpu::DriverChoice choice;
  choice.sim_count = sim;
  choice.scenario_path = scenario;
  choice.seed = seed;
  return choice;
}

void DriverFlags::AddTo(CLI::App* command) {
  // A bare --sim is a machine of 8 (DESIGN.md's contract: `daemon --sim` means 8).
  auto* sim_opt = command->add_option("--sim", sim, "Use N simulated GPUs instead of NVML (--sim alone: 8)")
                      ->expected(0, 1)
                      ->default_str("8")
                      ->check(CLI::Range(1, 4096));
  auto* scenario_opt = command->add_option("--scenario", scenario, "Simulated fleet and faults from a YAML file")
                           ->check(CLI::ExistingFile);
  sim_opt->excludes(scenario_opt);
  command->add_option("--seed", seed, "Seed of the simulated fleet (same seed, same readings)");
}

}  // namespace gpuherd::cli
