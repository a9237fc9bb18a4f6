// gpuherd events: the event log, from the daemon or, when none runs, from the
// state database opened read-only.
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"
#include "core/time.h"
#include "host/clock.h"
#include "daemon/record_json.h"
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

void Print(const nlohmann::json& events, bool json, bool color, bool header) {
  if (json) {
    std::printf("%s\n", events.dump(2).c_str());
    return;
  }
  Table table({"ID", "TIME (UTC)", "SEVERITY", "KIND", "GPU", "MESSAGE"});
  for (const auto& e : events) {
    std::string severity = e.value("severity", std::string());
    std::string cell = severity == "critical" ? Colored(severity, kRed, color)
                       : severity == "warning" ? Colored(severity, kYellow, color)
                                               : severity;
    std::string gpu = e.value("gpu_uuid", std::string());
    table.AddRow({std::to_string(e.value("id", 0)), FormatTimeUtc(e.value("time", int64_t{0})).substr(0, 19), cell,
                  e.value("kind", std::string()), gpu.substr(0, 12), e.value("message", std::string())});
  }
  std::string text = table.Render({0});
  if (!header) text = text.substr(text.find('\n') + 1);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

// Without a daemon: the same filter over the database, read-only.
Result<nlohmann::json> ReadFromStore(const StateDir& dir, const EventsFlags& f, TimeMs since) {
  store::StoreOptions options;
  options.read_only = true;
  auto db = store::Store::Open(dir.db_path(), options);
  if (!db.ok()) {
    return Unavailable("no daemon answers on " + dir.socket_path() + " and its database cannot be read (" +
                       db.status().message() + "); start one with `gpuherd daemon`");
  }
  store::EventFilter filter;
  filter.since = since;
  filter.kind_prefix = f.kind;
  filter.limit = f.limit;
  if (!f.gpu.empty()) {
    auto gpus = (*db)->ListGpus();
    if (!gpus.ok()) return gpus.status();
    for (const auto& g : *gpus) {
      if (g.uuid == f.gpu || std::to_string(g.index) == f.gpu) filter.gpu_uuid = g.uuid;
    }
    if (filter.gpu_uuid.empty()) return NotFound("no GPU '" + f.gpu + "' in " + dir.db_path());
  }
  auto events = (*db)->ListEvents(filter);
  if (!events.ok()) return events.status();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : *events) out.push_back(daemon::EventJson(e));
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
  cmd->add_flag("--json", flags->json, "Print JSON");
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
      return Print(*events, flags->json, ctx->color(), true);
    }
    auto reply = client.Get(Query(*flags, since, 0));
    if (!reply.ok()) return ctx->Fail(reply.status());
    nlohmann::json events = (*reply)["events"];
    Print(events, flags->json, ctx->color(), true);
    int64_t last = events.empty() ? 0 : events.back().value("id", int64_t{0});
    while (flags->follow) {
      ::usleep(500'000);
      auto more = client.Get(Query(*flags, since, last));
      if (!more.ok()) return ctx->Fail(more.status());
      if ((*more)["events"].empty()) continue;
      Print((*more)["events"], flags->json, ctx->color(), false);
      last = (*more)["events"].back().value("id", last);
    }
  });
}

}  // namespace gpuherd::cli
