// gpuherd top: the fleet table with bars, refreshed in place, and what needs
// attention. On a terminal: q quits, s changes the sort key.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/fleet_source.h"
#include "cli/fleet_table.h"
#include "cli/no_driver.h"
#include "cli/table.h"
#include "cli/top_frame.h"
#include "core/time.h"

namespace gpuherd::cli {
namespace {

// The columns `top` may use: the terminal's, else $COLUMNS (a pipe with the
// variable set, as a test or `watch` sets it), else no limit.
size_t TerminalColumns() {
  winsize size{};
  if (::isatty(STDOUT_FILENO) && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) {
    return size.ws_col;
  }
  const char* columns = std::getenv("COLUMNS");
  if (columns == nullptr) return 0;
  char* end = nullptr;
  const long n = std::strtol(columns, &end, 10);
  return end != columns && *end == '\0' && n > 0 && n < 10000 ? static_cast<size_t>(n) : 0;
}

volatile std::sig_atomic_t g_interrupted = 0;  // set by SIGINT or SIGTERM; read by the refresh loop
void OnInterrupt(int) { g_interrupted = 1; }

// Keys without Enter and without echo while top runs on a terminal; the
// terminal's settings come back when it ends, however it ends.
class RawKeys {
 public:
  RawKeys() {
    if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawKeys() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  RawKeys(const RawKeys&) = delete;
  RawKeys& operator=(const RawKeys&) = delete;

  // A key pressed within `ms`, or 0.
  char Wait(int ms) const {
    if (!active_) {
      ::usleep(static_cast<useconds_t>(ms) * 1000);
      return 0;
    }
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    if (::poll(&fd, 1, ms) <= 0) return 0;
    char c = 0;
    return ::read(STDIN_FILENO, &c, 1) == 1 ? c : 0;
  }

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

void AddTopCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    DriverFlags driver;
    std::string interval = "1s";
    int iterations = 0;
    std::string gpus;
    std::string sort = "index";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("top", "Live view of the fleet (q or Ctrl-C quits, s changes the sort)");
  flags->driver.AddTo(cmd);
  cmd->add_option("--interval", flags->interval, "Refresh period, e.g. 500ms, 2s");
  cmd->add_option("--iterations", flags->iterations, "Stop after N refreshes (0: until q or Ctrl-C)")
      ->check(NonNegativeWhole());
  cmd->add_option("-i,--gpu", flags->gpus, "Only these GPUs: indexes or UUIDs, comma-separated (0,2)");
  cmd->add_option("--sort", flags->sort, "Sort by index, util, mem, temp, power or jobs")->check(CLI::IsMember(kSortKeys));
  cmd->callback([ctx, flags] {
    DurationMs interval = 0;
    if (!ParseDuration(flags->interval, &interval) || interval < 100) {
      ctx->Fail(InvalidArgument("--interval must be a duration of at least 100ms, like 1s; got '" +
                                Printable(flags->interval) + "'"));
      ctx->exit_code = 2;  // a usage error
      return;
    }
    auto clock = host::NewRealClock();
    auto source = FleetSource::Open(*ctx, flags->driver, clock.get());
    if (!source.ok()) return FailMaybeNoDriver(ctx, source.status());
    const bool tty = ::isatty(STDOUT_FILENO);
    std::string sort = flags->sort;
    g_interrupted = 0;
    std::signal(SIGINT, OnInterrupt);
    std::signal(SIGTERM, OnInterrupt);
    {
      RawKeys keys;
      bool quit = false;
      TimeMs next = clock->Now();
      for (int i = 0; !quit && !g_interrupted && (flags->iterations == 0 || i < flags->iterations); ++i) {
        auto fleet = (*source)->Fleet();
        if (!fleet.ok()) {
          ctx->Fail(fleet.status());
          break;
        }
        if (!flags->gpus.empty()) {
          if (Status s = SelectGpus(flags->gpus, &*fleet); !s.ok()) {
            ctx->Fail(s);
            ctx->exit_code = 2;
            break;
          }
        }
        SortGpus(sort, &*fleet);
        // Enough of the log to find the few events that matter among routine ones.
        auto events = (*source)->RecentEvents(200);
        auto alerts = (*source)->ActiveAlerts();
        std::string frame = fmt::format("gpuherd top — {} — {} UTC{} — sorted by {}{}\n\n", Printable(fleet->hostname),
                                        FormatTimeUtc(clock->Now()).substr(0, 19),
                                        (*source)->direct_reason().empty() ? "" : " (direct: no daemon)", Printable(sort),
                                        tty ? " — q quits, s sorts" : "");
        frame += RenderFleetTable(*fleet, ctx->color(), /*bars=*/true, TerminalColumns());
        std::string pane = RenderAttentionPane(alerts.ok() ? *alerts : std::vector<api::Alert>{},
                                               events.ok() ? *events : std::vector<api::Event>{}, 8, ctx->color());
        frame += "\n" + (pane.empty() ? std::string("No firing alerts or faults.\n") : pane);
        // On a terminal, redraw in place; in a pipe or log, print frames one after another.
        std::fputs(tty ? ("\x1b[H\x1b[2J" + frame).c_str() : (frame + "\n").c_str(), stdout);
        std::fflush(stdout);
        next += interval;
        while (!quit && !g_interrupted && clock->Now() < next) {
          char key = keys.Wait(static_cast<int>(std::clamp<DurationMs>(next - clock->Now(), 1, 50)));
          if (key == 'q' || key == 'Q') quit = true;
          if (key == 's' || key == 'S') {
            auto at = std::find(kSortKeys.begin(), kSortKeys.end(), sort);
            sort = (at == kSortKeys.end() || at + 1 == kSortKeys.end()) ? kSortKeys.front() : *(at + 1);
            next = clock->Now();  // redraw now
          }
        }
      }
    }
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  });
}

}  // namespace gpuherd::cli
