#include "cli/no_driver.h"

namespace gpuherd::cli {
namespace {
constexpr char kPrefix[] = "no NVIDIA driver: ";
}

gpu::DriverChoice StrictChoice(const DriverFlags& flags) {
  gpu::DriverChoice choice = flags.choice();
  choice.fallback_sim_count = 0;
  return choice;
}

Status NoDriver(const Status& why) {
  if (IsNoDriver(why)) return why;
  return Unavailable(kPrefix + why.message() +
                     "; pass --sim N or --scenario FILE for a simulated fleet");
}

bool IsNoDriver(const Status& s) { return s.message().rfind(kPrefix, 0) == 0; }

void FailMaybeNoDriver(CommandContext* ctx, const Status& s) {
  ctx->Fail(s);
  if (IsNoDriver(s)) ctx->exit_code = kExitNoDriver;
}

}  // namespace gpuherd::cli
