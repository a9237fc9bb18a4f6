// gpuherd acct [--user U] [--since D] [--users] [--json | --format csv]:
// accounting like Slurm's sacct, per job and per user (api/acct.h).
#include <cctype>
#include <cstdio>
#include <ctime>

#include <fmt/format.h>

#include "api/acct.h"
#include "api/decode.h"
#include "cli/acct_format.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/table.h"

namespace gpuherd::cli {

std::optional<TimeMs> ParseSince(const std::string& text, TimeMs now) {
  DurationMs ago = 0;
  if (ParseDuration(text, &ago)) return now - ago;
  // A date or a time of day in UTC: 2026-12-01, 2026-12-01T08:00, 2026-12-01T08:00:30 (a trailing Z is allowed).
  std::string t = text;
  if (!t.empty() && (t.back() == 'Z' || t.back() == 'z')) t.pop_back();
  if (t.size() != 10 && t.size() != 16 && t.size() != 19) return std::nullopt;
  std::tm tm{};
  int consumed = 0;
  if (t.size() == 10 && std::sscanf(t.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &consumed) != 3) {
    return std::nullopt;
  }
  if (t.size() == 16 && std::sscanf(t.c_str(), "%4d-%2d-%2d%*1[T ]%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                                    &tm.tm_hour, &tm.tm_min, &consumed) != 5) {
    return std::nullopt;
  }
  if (t.size() == 19 && std::sscanf(t.c_str(), "%4d-%2d-%2d%*1[T ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                                    &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6) {
    return std::nullopt;
  }
  if (consumed != static_cast<int>(t.size())) return std::nullopt;
  if (tm.tm_year < 1970 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  const int day = tm.tm_mday;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  time_t seconds = timegm(&tm);
  if (tm.tm_mday != day) return std::nullopt;  // 2026-02-31 rolled over
  return static_cast<TimeMs>(seconds) * 1000;
}

void AddAcctCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    std::string user, since = "7d", format = "table";
    bool json = false, users = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "acct", "GPU-hours, GPU utilization, peak GPU memory, wait and efficiency per job and per user (like sacct)");
  cmd->add_option("--user,-u", f->user, "Only this user's jobs");
  cmd->add_option("--since,-S", f->since,
                  "Jobs submitted, running or ended since: a period (24h, 7d) or a UTC date or time "
                  "(2026-12-01, 2026-12-01T08:00); default 7d");
  cmd->add_flag("--users", f->users, "Only the per-user summary");
  cmd->add_flag("--json", f->json, "Print JSON (jobs, users and the total)");
  cmd->add_option("--format", f->format, "table or csv")->check(CLI::IsMember({"table", "csv"}));
  cmd->callback([ctx, f] {
    const TimeMs now = static_cast<TimeMs>(std::time(nullptr)) * 1000;
    auto since = ParseSince(f->since, now);
    if (!since) {
      throw CLI::ValidationError("--since", "takes a period like 24h or 7d, or a UTC date like 2026-12-01 or "
                                            "2026-12-01T08:00; got '" + Printable(f->since) + "'");
    }
    if (f->json && f->format == "csv") throw CLI::ValidationError("--json", "choose --json or --format csv, not both");
    std::string target = "/v1/acct?since=" + std::to_string(std::max<TimeMs>(0, *since));
    if (!f->user.empty()) target += "&user=" + QueryEscape(f->user);
    auto reply = DaemonClient(ctx->dir()).Get(target);
    if (!reply.ok()) return ctx->Fail(reply.status());
    if (f->json) {
      std::printf("%s\n", reply->dump(2).c_str());
      return;
    }
    auto report = api::Decode<api::AcctReport>(*reply, "the accounting");
    if (!report.ok()) return ctx->Fail(report.status());
    if (f->format == "csv") {
      std::fputs((f->users ? AcctUsersCsv(*report) : AcctJobsCsv(*report)).c_str(), stdout);
      return;
    }
    if (report->jobs.empty()) {
      std::printf("no jobs since %s%s\n", FormatTimeUtc(report->since).c_str(),
                  f->user.empty() ? "" : (" of " + Printable(f->user)).c_str());
      return;
    }
    if (!f->users) std::printf("%s\n", AcctJobsTable(*report).c_str());
    std::printf("%s", AcctUsersTable(*report).c_str());
  });
}

}  // namespace gpuherd::cli
