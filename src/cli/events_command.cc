// gpuherd events: the event log, from the daemon or, when none runs, from the
// state database opened read-only.
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "api/decode.h"
#include "api/events.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/store_without_daemon.h"
#include "cli/table.h"
#include "core/time.h"
#include "host/clock.h"
#include "store/store.h"

namespace gpuherd::cli {
namespace {

struct EventsFlags {
  std::string gpu, kind, since;
  int limit = 50;
  bool json = false;
  bool follow = false;
};

std::string Query(const EventsFlags& f, TimeMs since, int64_t after) {
  std::string q = "/v1/events?limit=" + std::to_string(f.limit);
  if (!f.gpu.empty()) q += "&gpu=" + f.gpu;
  if (!f.kind.empty()) q += "&kind=" + f.kind;
  if (since > 0) q += "&since=" + std::to_string(since);
  if (after > 0) q += "&after=" + std::to_string(after);
  return q;
}

// --json: one array; --json with --follow: one line per event (JSON lines),
// flushed at once, so a pipe (`| jq`, a script's read loop) gets each event
// as it comes instead of a block buffer that fills after hours.
void Print(const std::vector<api::Event>& events, bool json, bool follow, bool color, bool header) {
  if (json && follow) {
    std::string out;
    for (const api::Event& e : events) out += nlohmann::json(e).dump() + "\n";
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  if (json) {
    std::printf("%s\n", nlohmann::json(events).dump(2).c_str());
    return;
  }
  Table table({"ID", "TIME (UTC)", "SEVERITY", "KIND", "GPU", "MESSAGE"});
  for (const api::Event& e : events) {
    const std::string severity = Printable(e.severity);
    std::string cell = severity == "critical" ? Colored(severity, kRed, color)
                       : severity == "warning" ? Colored(severity, kYellow, color)
                                               : severity;
    // A message may quote what a user wrote (a cwd, a job's name): escaped.
    table.AddRow({std::to_string(e.id), FormatTimeUtc(e.time).substr(0, 19), cell, Printable(e.kind),
                  Printable(e.gpu_uuid.substr(0, 12)), Printable(e.message)});
  }
  std::string text = table.Render({0});
  if (!header) text = text.substr(text.find('\n') + 1);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Without a daemon: the same filter over the database, read-only.
Result<std::vector<api::Event>> ReadFromStore(const StateDir& dir, const EventsFlags& f, TimeMs since) {
  auto db = OpenStoreWithoutDaemon(dir);
  if (!db.ok()) return db.status();
  store::EventFilter filter;
  filter.since = since;
  filter.kind_prefix = f.kind;
  filter.limit = f.limit;
  if (!f.gpu.empty()) {
    auto gpus = (*db)->ListGpus();
    if (!gpus.ok()) return gpus.status();
    for (const auto& g : *gpus) {
      if (gpu::NamesGpu(f.gpu, g.index, g.uuid)) filter.gpu_uuid = g.uuid;
    }
    if (filter.gpu_uuid.empty()) return NotFound("no GPU '" + f.gpu + "' in " + dir.db_path());
  }
  auto events = (*db)->ListEvents(filter);
  if (!events.ok()) return events.status();
  std::vector<api::Event> out;
  for (const auto& e : *events) out.push_back(api::EventOf(e));
  return out;
}

}  // namespace

void AddEventsCommand(CLI::App& app, CommandContext* ctx) {
  auto flags = std::make_shared<EventsFlags>();
  CLI::App* cmd = app.add_subcommand("events", "Show the event log (GPU lost/found, faults, daemon start/stop)");
  cmd->add_option("--gpu", flags->gpu, "Only events of this GPU (index or UUID)");
  cmd->add_option("--kind", flags->kind, "Only kinds starting with this, e.g. gpu. or gpu.xid");
  cmd->add_option("--since", flags->since, "Only events in this past period, e.g. 10m, 24h");
  cmd->add_option("--limit", flags->limit, "At most this many (the newest)")->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", flags->json, "Print JSON (an array; with --follow one object per line)");
  cmd->add_flag("-f,--follow", flags->follow, "Keep printing new events (needs the daemon)");
  cmd->callback([ctx, flags] {
    TimeMs since = 0;
    if (!flags->since.empty()) {
      DurationMs d = 0;
      if (!ParseDuration(flags->since, &d)) {
        return ctx->Fail(InvalidArgument("--since takes a duration like 10m or 24h; got '" + flags->since + "'"));
      }
      since = host::NewRealClock()->Now() - d;
    }
    DaemonClient client(ctx->dir());
    if (!client.Reachable()) {
      if (flags->follow) return ctx->Fail(Unavailable("--follow needs a running daemon; start `gpuherd daemon`"));
      auto events = ReadFromStore(ctx->dir(), *flags, since);
      if (!events.ok()) return ctx->Fail(events.status());
      return Print(*events, flags->json, false, ctx->color(), true);
    }
    auto fetch = [&](int64_t after) -> Result<std::vector<api::Event>> {
      auto reply = client.Get(Query(*flags, since, after));
      if (!reply.ok()) return reply.status();
      return api::Decode<std::vector<api::Event>>(reply->value("events", nlohmann::json::array()),
                                                  "the daemon's events");
    };
    auto events = fetch(0);
    if (!events.ok()) return ctx->Fail(events.status());
    Print(*events, flags->json, flags->follow, ctx->color(), true);
    int64_t last = events->empty() ? 0 : events->back().id;
    while (flags->follow) {
      ::usleep(500'000);
      auto more = fetch(last);
      if (!more.ok()) return ctx->Fail(more.status());
      if (more->empty()) continue;
      Print(*more, flags->json, true, ctx->color(), false);
      last = more->back().id;
    }
  });
}

}  // namespace gpuherd::cli
