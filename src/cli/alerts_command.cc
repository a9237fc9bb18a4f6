// gpuherd alerts: pending and firing alerts (and, with --all, those resolved
// in the last day), from the daemon or, when none runs, from the state
// database opened read-only.
#include <cstdio>

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

// The same window as the daemon's GET /v1/alerts?all=1.
constexpr DurationMs kRecentlyResolved = 24 * kHourMs;

struct AlertList {
  std::vector<api::Alert> alerts;
  TimeMs now = 0;
};

Result<AlertList> ReadFromStore(const StateDir& dir, bool all, TimeMs now) {
  auto db = OpenStoreWithoutDaemon(dir);
  if (!db.ok()) return db.status();
  AlertList list{{}, now};
  auto active = (*db)->ListActiveAlerts();
  if (!active.ok()) return active.status();
  for (const auto& a : *active) list.alerts.push_back(api::AlertOf(a));
  if (all) {
    auto resolved = (*db)->ListResolvedAlerts(now - kRecentlyResolved, 500);
    if (!resolved.ok()) return resolved.status();
    for (const auto& a : *resolved) list.alerts.push_back(api::AlertOf(a));
  }
  return list;
}

Result<AlertList> ReadFromDaemon(DaemonClient& client, bool all) {
  auto reply = client.Get(all ? "/v1/alerts?all=1" : "/v1/alerts");
  if (!reply.ok()) return reply.status();
  auto alerts = api::Decode<std::vector<api::Alert>>(reply->value("alerts", nlohmann::json::array()),
                                                     "the daemon's alerts");
  if (!alerts.ok()) return alerts.status();
  return AlertList{std::move(*alerts), reply->value("now", TimeMs{0})};
}

void Print(const std::vector<api::Alert>& alerts, TimeMs now, bool color) {
  if (alerts.empty()) {
    std::printf("no alerts\n");
    return;
  }
  Table table({"STATE", "RULE", "GPU", "SINCE", "VALUE", "SEVERITY", "ACTION", "SUMMARY"});
  for (const api::Alert& a : alerts) {
    const char* tint = a.state == "resolved" ? kGreen : a.severity == "critical" ? kRed : kYellow;
    std::string gpu = a.gpu ? std::to_string(*a.gpu) : Printable(a.subject);
    TimeMs since = a.Since();
    std::string ago = since > 0 && now >= since ? FormatDuration(now - since) + " ago" : "-";
    // A summary may quote a job's name or its process's; a rule file is text too.
    // "0.7 °C/min", "95%": a value without its unit reads as any number.
    std::string value = fmt::format("{:g}", a.value);
    if (!a.unit.empty()) value += (a.unit == "%" ? "" : " ") + Printable(a.unit);
    table.AddRow({Colored(Printable(a.state), tint, color), Printable(a.rule), gpu, ago, value,
                  Printable(a.severity), Printable(a.action), Printable(a.summary)});
  }
  std::fputs(table.Render({4}).c_str(), stdout);
}

}  // namespace

void AddAlertsCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    bool all = false;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("alerts", "Show pending and firing alerts (with --all, recently resolved ones)");
  cmd->add_flag("--all", flags->all, "Also alerts resolved in the last 24 hours");
  cmd->add_flag("--json", flags->json, "Print JSON");
  cmd->callback([ctx, flags] {
    DaemonClient client(ctx->dir());
    Result<AlertList> list = client.Reachable() ? ReadFromDaemon(client, flags->all)
                                                : ReadFromStore(ctx->dir(), flags->all, host::NewRealClock()->Now());
    if (!list.ok()) return ctx->Fail(list.status());
    if (flags->json) {
      std::printf("%s\n", nlohmann::json(list->alerts).dump(2).c_str());
      return;
    }
    Print(list->alerts, list->now, ctx->color());
  });
}

}  // namespace gpuherd::cli
