#include "daemon/routes/job_listing.h"

#include <nlohmann/json.hpp>

#include "daemon/routes/access.h"

namespace gpuherd::daemon::routes {

JobListingWriter::Text JobListingWriter::Split(const api::JobView& view, bool hide) {
  // Keys are sorted, so "now" follows "name" and is found after a comma; a
  // quote inside a string value is escaped and cannot fake the match.
  static constexpr char kNowKey[] = ",\"now\":";
  nlohmann::json j = view;
  j["now"] = 0;
  if (hide) HideJobInternals(j);
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const size_t at = text.find(kNowKey);
  if (at == std::string::npos) return {text, ""};  // not reached: to_json always writes "now"
  const size_t value = at + sizeof(kNowKey) - 1;
  return {text.substr(0, value), text.substr(value + 1)};  // past the "0"
}

std::string JobListingWriter::Body(const JobService::JobListing& listing, const Caller& caller) {
  const std::string now = std::to_string(listing.now);
  std::string out = "{\"jobs\":[";
  bool first = true;
  auto add = [&](const Text& t) {
    if (!first) out += ',';
    first = false;
    out += t.head;
    out += now;
    out += t.tail;
  };
  for (const JobService::ListedJob& job : listing.jobs) {
    const bool hide = !MaySeeJobInternals(caller, job.view->user);
    if (!job.live) {  // a finished job, read from the store for this answer only
      add(Split(*job.view, hide));
      continue;
    }
    Cached& c = cache_[job.view->id];
    if (c.view != job.view) {
      c.view = job.view;
      c.full = Split(*job.view, false);
      c.hidden.reset();
    }
    if (hide && !c.hidden) c.hidden = Split(*job.view, true);
    add(hide ? *c.hidden : c.full);
  }
  out += "],\"now\":" + now + "}";
  // A view only this cache still holds is of a job that changed or left the
  // queue: its texts go too.
  std::erase_if(cache_, [](const auto& entry) { return entry.second.view.use_count() == 1; });
  return out;
}

}  // namespace gpuherd::daemon::routes
