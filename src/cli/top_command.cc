// gpuherd top: the fleet table refreshed in place, with the latest events.
#include <csignal>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/fleet_source.h"
#include "cli/no_driver.h"
#include "cli/fleet_table.h"
#include "cli/table.h"
#include "core/time.h"

namespace gpuherd::cli {
namespace {

volatile std::sig_atomic_t g_interrupted = 0;  // set by SIGINT; read by the refresh loop
void OnInterrupt(int) { g_interrupted = 1; }

std::string RenderEvents(const std::vector<api::Event>& events, bool color) {
  std::string out;
  for (const api::Event& e : events) {
    const std::string& severity = e.severity;
    std::string line = fmt::format("{}  {:<8} {:<16} {}", FormatTimeUtc(e.time).substr(11, 8), severity, e.kind,
                                   e.message);
    if (severity == "critical") line = Colored(line, kRed, color);
    else if (severity == "warning") line = Colored(line, kYellow, color);
    out += line + "\n";
  }
  return out;
}

}  // namespace

void AddTopCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    DriverFlags driver;
    std::string interval = "1s";
    int iterations = 0;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("top", "Live view of the fleet (Ctrl-C to quit)");
  flags->driver.AddTo(cmd);
  cmd->add_option("--interval", flags->interval, "Refresh period, e.g. 500ms, 2s");
  cmd->add_option("--iterations", flags->iterations, "Stop after N refreshes (0: until Ctrl-C)")
      ->check(NonNegativeWhole());
  cmd->callback([ctx, flags] {
    DurationMs interval = 0;
    if (!ParseDuration(flags->interval, &interval) || interval < 100) {
      return ctx->Fail(InvalidArgument("--interval must be a duration of at least 100ms, like 1s; got '" +
                                       flags->interval + "'"));
    }
    auto clock = host::NewRealClock();
    auto source = FleetSource::Open(*ctx, flags->driver, clock.get());
    if (!source.ok()) return FailMaybeNoDriver(ctx, source.status());
    bool tty = ::isatty(STDOUT_FILENO);
    std::signal(SIGINT, OnInterrupt);
    TimeMs next = clock->Now();
    for (int i = 0; !g_interrupted && (flags->iterations == 0 || i < flags->iterations); ++i) {
      auto fleet = (*source)->Fleet();
      if (!fleet.ok()) return ctx->Fail(fleet.status());
      auto events = (*source)->RecentEvents(8);
      std::string frame = fmt::format("gpuherd top — {} — {}{}\n\n", fleet->hostname,
                                      FormatTimeUtc(clock->Now()).substr(0, 19),
                                      (*source)->direct_reason().empty() ? "" : " (direct: no daemon)");
      frame += RenderFleetTable(*fleet, ctx->color());
      if (events.ok() && !events->empty()) frame += "\nRecent events\n" + RenderEvents(*events, ctx->color());
      // On a terminal, redraw in place; in a pipe or log, print frames one after another.
      std::fputs(tty ? ("\x1b[H\x1b[2J" + frame).c_str() : (frame + "\n").c_str(), stdout);
      std::fflush(stdout);
      next += interval;
      while (!g_interrupted && clock->Now() < next) ::usleep(50'000);
    }
    std::signal(SIGINT, SIG_DFL);
  });
}

}  // namespace gpuherd::cli
