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

std::string JobListingWriter::TableRow(const api::JobView& v) {
  return nlohmann::json::array({v.id, v.name, v.user, v.state, v.gpu_twentieths, v.assigned_gpus, v.priority,
                                v.submitted, v.started, v.ended, v.reason, v.array_id, v.array_index})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

JobListingWriter::Cached& JobListingWriter::For(const std::shared_ptr<const api::JobView>& view) {
  Cached& c = cache_[view->id];
  if (c.view != view) c = Cached{view, std::nullopt, std::nullopt, std::nullopt};
  return c;
}

std::string JobListingWriter::Body(const JobService::JobListing& listing, const Caller& caller, Form form) {
  const std::string now = std::to_string(listing.now);
  std::string out;
  if (form == Form::kTable) {
    static const std::string kHead =
        "{\"columns\":" + nlohmann::json(api::kJobTableColumns).dump() + ",\"rows\":[";
    out = kHead;
  } else {
    out = "{\"jobs\":[";
  }
  bool first = true;
  auto add = [&](const std::string& head, const std::string& tail, bool with_now) {
    if (!first) out += ',';
    first = false;
    out += head;
    if (!with_now) return;
    out += now;
    out += tail;
  };
  for (const JobService::ListedJob& job : listing.jobs) {
    if (form == Form::kTable) {
      if (!job.live) {  // a finished job, read from the store for this answer only
        add(TableRow(*job.view), "", false);
        continue;
      }
      Cached& c = For(job.view);
      if (!c.row) c.row = TableRow(*job.view);
      add(*c.row, "", false);
      continue;
    }
    const bool hide = !MaySeeJobInternals(caller, job.view->user);
    if (!job.live) {
      const Text t = Split(*job.view, hide);
      add(t.head, t.tail, true);
      continue;
    }
    Cached& c = For(job.view);
    std::optional<Text>& text = hide ? c.hidden : c.full;
    if (!text) text = Split(*job.view, hide);
    const Text& t = *text;
    add(t.head, t.tail, true);
  }
  out += "],\"now\":" + now + "}";
  // A view only this cache still holds is of a job that changed or left the
  // queue: its texts go too.
  std::erase_if(cache_, [](const auto& entry) { return entry.second.view.use_count() == 1; });
  return out;
}

}  // namespace gpuherd::daemon::routes
