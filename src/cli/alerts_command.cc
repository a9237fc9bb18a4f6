// gpuherd alerts: pending and firing alerts (and, with --all, those resolved
// in the last day), from the daemon or, when none runs, from the state
// database opened read-only.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"
#include "core/time.h"
#include "daemon/record_json.h"
#include "host/clock.h"
#include "store/store.h"

namespace gpuherd::cli {
namespace {

// The same window as the daemon's GET /v1/alerts?all=1.
constexpr DurationMs kRecentlyResolved = 24 * kHourMs;

Result<nlohmann::json> ReadFromStore(const StateDir& dir, bool all, TimeMs now) {
  store::StoreOptions options;
  options.read_only = true;
  auto db = store::Store::Open(dir.db_path(), options);
  if (!db.ok()) {
    return Unavailable("no daemon answers on " + dir.socket_path() + " and its database cannot be read (" +
                       db.status().message() + "); start one with `gpuherd daemon`");
  }
  nlohmann::json list = nlohmann::json::array();
  auto active = (*db)->ListActiveAlerts();
  if (!active.ok()) return active.status();
  for (const auto& a : *active) list.push_back(daemon::AlertJson(a));
  if (all) {
    auto resolved = (*db)->ListResolvedAlerts(now - kRecentlyResolved, 500);
    if (!resolved.ok()) return resolved.status();
    for (const auto& a : *resolved) list.push_back(daemon::AlertJson(a));
  }
  return nlohmann::json{{"alerts", list}, {"now", now}};
}

// When the alert entered its current state.
TimeMs Since(const nlohmann::json& a) {
  std::string state = a.value("state", "");
  if (state == "firing") return a.value("fired_at", TimeMs{0});
  if (state == "resolved") return a.value("resolved_at", TimeMs{0});
  return a.value("pending_since", TimeMs{0});
}

void Print(const nlohmann::json& alerts, TimeMs now, bool color) {
  if (alerts.empty()) {
    std::printf("no alerts\n");
    return;
  }
  Table table({"STATE", "RULE", "GPU", "SINCE", "VALUE", "SEVERITY", "ACTION", "SUMMARY"});
  for (const auto& a : alerts) {
    std::string state = a.value("state", "");
    std::string severity = a.value("severity", "");
    const char* tint = state == "resolved" ? kGreen : severity == "critical" ? kRed : kYellow;
    std::string gpu = a["gpu"].is_number() ? std::to_string(a["gpu"].get<int>()) : a.value("subject", "");
    TimeMs since = Since(a);
    std::string ago = since > 0 && now >= since ? FormatDuration(now - since) + " ago" : "-";
    table.AddRow({Colored(state, tint, color), a.value("rule", ""), gpu, ago,
                  fmt::format("{:g}", a.value("value", 0.0)), severity, a.value("action", ""), a.value("summary", "")});
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
    Result<nlohmann::json> reply = client.Reachable()
                                       ? client.Get(flags->all ? "/v1/alerts?all=1" : "/v1/alerts")
                                       : ReadFromStore(ctx->dir(), flags->all, host::NewRealClock()->Now());
    if (!reply.ok()) return ctx->Fail(reply.status());
    if (flags->json) {
      std::printf("%s\n", (*reply)["alerts"].dump(2).c_str());
      return;
    }
    Print((*reply)["alerts"], reply->value("now", TimeMs{0}), ctx->color());
  });
}

}  // namespace gpuherd::cli
