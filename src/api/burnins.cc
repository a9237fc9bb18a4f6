#include "api/burnins.h"

#include <charconv>
#include <set>

#include "api/events.h"
#include "core/time.h"

namespace gpuherd::api {

namespace {

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument("burn-in request: \"" + field + "\" " + what);
}

// A value echoed in an error, cut short: the body is the caller's.
std::string Shown(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

}  // namespace

Result<BurnInRequest> ParseBurnInRequest(const nlohmann::json& body) {
  if (!body.is_object()) return InvalidArgument("burn-in request: the body must be a JSON object like {\"level\": 1}");
  for (const auto& [key, value] : body.items()) {
    static const std::set<std::string> kKnown = {"gpus", "level", "duration", "memtest_fraction", "reset_first"};
    if (!kKnown.count(key)) {
      return FieldError(key, "is not a burn-in option (known: gpus, level, duration, memtest_fraction, reset_first)");
    }
  }
  BurnInRequest r;
  const nlohmann::json level = body.value("level", nlohmann::json());
  if (!level.is_number_integer() || level.get<int64_t>() < 1 || level.get<int64_t>() > 3) {
    return FieldError("level", "must be 1, 2 or 3, got " + Shown(level));
  }
  r.level = level.get<int>();
  if (body.contains("duration")) {
    DurationMs ms = 0;
    if (!body["duration"].is_string() || !ParseDuration(body["duration"].get<std::string>(), &ms) || ms <= 0) {
      return FieldError("duration", "must be a positive duration like \"30s\", \"15m\" or \"72h\", got " +
                                        Shown(body["duration"]));
    }
    r.duration = body["duration"].get<std::string>();
  }
  if (body.contains("memtest_fraction")) {
    const nlohmann::json& f = body["memtest_fraction"];
    if (!f.is_number() || f.get<double>() <= 0 || f.get<double>() > 1) {
      return FieldError("memtest_fraction", "must be a number above 0 and at most 1, got " + Shown(f));
    }
    r.memtest_fraction = f.get<double>();
  }
  if (body.contains("reset_first")) {
    if (!body["reset_first"].is_boolean()) return FieldError("reset_first", "must be true or false, got " + Shown(body["reset_first"]));
    r.reset_first = body["reset_first"].get<bool>();
  }
  const nlohmann::json gpus = body.value("gpus", nlohmann::json());
  if (gpus.is_null() || (gpus.is_string() && gpus.get<std::string>() == "all")) return r;
  if (!gpus.is_array() || gpus.empty()) {
    return FieldError("gpus", "must be \"all\" or a non-empty list of GPU indices or UUIDs, got " + Shown(gpus));
  }
  for (const nlohmann::json& g : gpus) {
    if (g.is_number_integer()) {
      r.gpus.push_back(std::to_string(g.get<int64_t>()));
    } else if (g.is_string()) {
      r.gpus.push_back(g.get<std::string>());
    } else {
      return FieldError("gpus", "names " + Shown(g) + ", which is not a GPU of this machine (`gpuherd gpus` lists them)");
    }
  }
  return r;
}
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
