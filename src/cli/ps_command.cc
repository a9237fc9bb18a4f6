// gpuherd ps [ID...]: the queue (unfinished jobs; --all adds recently finished
// ones), or the jobs named (an array's id: its tasks).
#include <cctype>
#include <cstdio>
#include <set>
#include <string_view>

#include <fmt/format.h>

#include "api/decode.h"
#include "api/jobs.h"
#include "cli/command.h"
#include "cli/daemon_client.h"
#include "cli/job_format.h"
#include "cli/table.h"
#include "host/clock.h"
#include "http/client.h"
#include "http/json_body.h"

namespace gpuherd::cli {
namespace {

// The jobs array of a listing as the daemon writes it, {"jobs":[...],"now":N},
// found without parsing: `ps --all --json` may be polled often over thousands
// of jobs. Empty when the body has any other shape (the caller parses it).
std::string_view JobsArrayText(std::string_view body) {
  constexpr std::string_view kHead = "{\"jobs\":";
  constexpr std::string_view kNow = ",\"now\":";
  if (!body.starts_with(kHead) || !body.ends_with('}')) return {};
  // The last "now" is the listing's own: a job's is followed by more fields.
  size_t now = body.rfind(kNow);
  if (now == std::string_view::npos || now < kHead.size()) return {};
  std::string_view digits = body.substr(now + kNow.size(), body.size() - 1 - now - kNow.size());
  if (digits.empty()) return {};
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return {};
  }
  std::string_view jobs = body.substr(kHead.size(), now - kHead.size());
  if (!jobs.starts_with('[') || !jobs.ends_with(']')) return {};
  return jobs;
}

}  // namespace

void AddPsCommand(CLI::App& app, CommandContext* ctx) {
  struct Flags {
    bool all = false, json = false;
    std::string user, state;
    std::vector<std::string> ids;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("ps", "List jobs: running and pending (--all: finished too)");
  cmd->add_flag("-a,--all", f->all, "Include finished jobs (completed, failed, cancelled)");
  cmd->add_option("--user", f->user, "Only this user's jobs");
  cmd->add_option("--state", f->state, "Only jobs in this state (completed, failed or cancelled need no --all)");
  cmd->add_flag("--json", f->json, "Print JSON (an array of jobs)");
  cmd->add_option("ids", f->ids, "Only these jobs, finished or not: ids, array ids (their tasks) or tasks such as 12_3")
      ->check(JobRef());
  cmd->callback([ctx, f] {
    // Named jobs: each looked up once (an array's id stands for its tasks,
    // whose ids are consecutive from it), then picked from the listing.
    std::set<int64_t> named;
    if (!f->ids.empty()) {
      DaemonClient client(ctx->dir());
      for (const std::string& ref : f->ids) {
        auto job = client.Get("/v1/jobs/" + ref);
        if (!job.ok()) return ctx->Fail(job.status());
        const int64_t id = job->value("id", int64_t{0});
        if (auto array = job->find("array"); array != job->end() && array->is_object()) {
          for (int t = 0; t < array->value("size", 0); ++t) named.insert(id + t);
        } else {
          named.insert(id);
        }
      }
      f->all = true;
    }
    // Asking for a final state asks for finished jobs: no --all needed.
    const bool finished_state = f->state == "completed" || f->state == "failed" || f->state == "cancelled";
    std::string target = std::string("/v1/jobs?all=") + (f->all || finished_state ? "1" : "0");
    if (!f->user.empty()) target += "&user=" + QueryEscape(f->user);
    if (!f->state.empty()) target += "&state=" + QueryEscape(f->state);
    // A table needs its columns only: the compact listing, read without a DOM.
    if (!f->json) target += "&view=table";
    auto response = http::Client(http::Endpoint{ctx->dir().socket_path()}).Request("GET", target);
    if (!response.ok()) return ctx->Fail(SaidAsNoDaemon(ctx->dir(), response.status()));
    if (response->status < 200 || response->status >= 300) return ctx->Fail(http::StatusFromResponse(*response));
    if (f->json && named.empty()) {
      if (std::string_view jobs = JobsArrayText(response->body); !jobs.empty()) {
        std::fwrite(jobs.data(), 1, jobs.size(), stdout);
        std::fputc('\n', stdout);
        return;
      }
    }
    if (f->json) {
      auto reply = http::ParseJson(response->body, {.max_bytes = response->body.size(), .max_depth = 64});
      if (!reply.ok() || !reply->is_object()) {
        return ctx->Fail(Internal("the daemon sent a reply that is not a JSON object for " + target));
      }
      nlohmann::json jobs = std::move((*reply)["jobs"]);
      if (!named.empty() && jobs.is_array()) {
        nlohmann::json picked = nlohmann::json::array();
        for (auto& j : jobs) {
          if (named.count(j.value("id", int64_t{0}))) picked.push_back(std::move(j));
        }
        jobs = std::move(picked);
      }
      std::printf("%s\n", jobs.dump().c_str());  // compact, as the daemon sends it
      return;
    }
    auto listing = api::ParseJobTable(response->body);
    if (!listing.ok()) {
      // A daemon older than the compact listing ignores view=table.
      auto reply = http::ParseJson(response->body, {.max_bytes = response->body.size(), .max_depth = 64});
      auto full = reply.ok() ? api::JobTableFromFullListing(*reply, host::NewRealClock()->Now()) : Result<api::JobTable>(reply.status());
      if (!full.ok()) return ctx->Fail(listing.status().Annotate("the daemon's answer to " + target));
      listing = std::move(full);
    }
    response->body.clear();
    response->body.shrink_to_fit();  // freed before the table is built, not after
    if (!named.empty()) {
      std::erase_if(listing->jobs, [&](const api::JobRow& j) { return named.count(j.id) == 0; });
    }
    const TimeMs now = listing->now;
    const bool color = ctx->color();  // asks the terminal: once, not per row
    std::vector<std::string> cells;
    auto row_at = [&](size_t i) -> const std::vector<std::string>& {
      const api::JobRow& j = listing->jobs[i];
      cells = {api::JobIdText(j), Printable(j.name), Printable(j.user), StateCell(j.state, color),
               Printable(api::GpusRequested(j)), Printable(api::GpusAssigned(j)), std::to_string(j.priority),
               api::JobTime(j, now), Printable(j.reason)};
      return cells;
    };
    WriteRows(stdout, {"ID", "NAME", "USER", "STATE", "GPUS", "ON", "PRIO", "TIME", "REASON"}, listing->jobs.size(),
              row_at, {0, 6});
  });
}

}  // namespace gpuherd::cli
