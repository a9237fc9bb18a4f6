#include "api/burnins.h"

#include <charconv>

#include "api/events.h"

namespace gpuherd::api {
namespace {

// How far back an index is looked up: enough for any fleet's recent runs,
// bounded so a long history is not parsed in full.
constexpr int kIndexLookupRuns = 1000;

}  // namespace

store::BurnInRecord ToBurnInRecord(const burnin::BurnInRun& run) {
  store::BurnInRecord r;
  r.id = run.id;
  r.gpu_uuid = run.gpu_uuid;
  r.gpu_name = run.gpu_name;
  r.level = run.level;
  r.started = run.started;
  r.finished = run.finished;
  r.outcome = burnin::RunOutcomeName(run.outcome);
  r.verdict = burnin::VerdictName(run.health.verdict);
  r.score = run.health.score;
  r.job_id = run.job_id;
  r.json = burnin::ToJson(run).dump();
  return r;
}

store::EventRecord BurnInEvent(const burnin::BurnInRun& run) {
  using burnin::RunOutcome;
  using burnin::Verdict;
  store::Severity severity = store::Severity::kInfo;
  if (run.outcome == RunOutcome::kFaultsFound || run.health.verdict == Verdict::kUnhealthy) {
    severity = store::Severity::kCritical;
  } else if (run.outcome == RunOutcome::kCouldNotRun || run.health.verdict == Verdict::kDegraded) {
    severity = store::Severity::kWarning;
  }
  std::string message = "burn-in level " + std::to_string(run.level) + " of GPU " + std::to_string(run.gpu_index) +
                        " (" + run.gpu_name + "): " + burnin::RunOutcomeName(run.outcome);
  if (run.outcome == RunOutcome::kPassed || run.outcome == RunOutcome::kFaultsFound) {
    message += ", " + std::string(burnin::VerdictName(run.health.verdict)) + " (score " +
               std::to_string(run.health.score) + ")";
  } else if (!run.outcome_reason.empty()) {
    message += ": " + run.outcome_reason;
  }
  if (run.simulated) message += " [simulated]";
  return NewEvent(run.finished, "burnin.result", severity, std::move(message), run.gpu_uuid,
                  {{"level", run.level},
                   {"outcome", burnin::RunOutcomeName(run.outcome)},
                   {"verdict", burnin::VerdictName(run.health.verdict)},
                   {"score", run.health.score},
                   {"simulated", run.simulated}});
}

Status ValidateForStore(const burnin::BurnInRun& run) {
  if (run.gpu_uuid.empty()) return InvalidArgument("the run names no GPU (gpu_uuid is empty)");
  if (run.level < 1 || run.level > 3) {
    return InvalidArgument("level " + std::to_string(run.level) + " is not a burn-in level (1, 2 or 3)");
  }
  if (run.health.score < 0 || run.health.score > 100) {
    return InvalidArgument("score " + std::to_string(run.health.score) + " is outside 0-100");
  }
  return Status::Ok();
}

Result<burnin::BurnInRun> BurnInRunFromRecord(const store::BurnInRecord& record) {
  const std::string which = "stored burn-in run " + std::to_string(record.id);
  nlohmann::json j = nlohmann::json::parse(record.json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(Code::kDataLoss, which + " is not valid JSON");
  Result<burnin::BurnInRun> run = burnin::BurnInRunFromJson(j);
  if (!run.ok()) return run.status().Annotate(which);
  run->id = record.id;
  return run;
}

Result<std::string> FindBurnInGpu(store::Store& store, const std::string& id) {
  store::BurnInFilter by_uuid;
  by_uuid.gpu_uuid = id;
  by_uuid.limit = 1;
  auto runs = store.ListBurnInRuns(by_uuid);
  if (!runs.ok()) return runs.status();
  if (!runs->empty()) return id;

  int index = -1;
  auto [ptr, ec] = std::from_chars(id.data(), id.data() + id.size(), index);
  if (ec == std::errc() && ptr == id.data() + id.size() && index >= 0) {
    store::BurnInFilter recent;
    recent.limit = kIndexLookupRuns;
    auto all = store.ListBurnInRuns(recent);
    if (!all.ok()) return all.status();
    for (const store::BurnInRecord& record : *all) {
      Result<burnin::BurnInRun> run = BurnInRunFromRecord(record);
      if (run.ok() && run->gpu_index == index) return record.gpu_uuid;
    }
  }
  return NotFound("no burn-in of a GPU '" + id +
                  "' is stored; give an index or a UUID that `gpuherd health` lists");
}

}  // namespace gpuherd::api
