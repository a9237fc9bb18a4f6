// The body of GET /v1/jobs from the queue's typed listing: the full listing
// ({"jobs": [...], "now": N}) or the compact one `ps` reads ({"columns",
// "rows", "now"}, api::kJobTableColumns). A deep queue is polled often and
// changes little: each unfinished job's JSON and row are written once per
// change (the queue hands out a new view object when a job changes) and kept
// here; the JSON is split around the value of "now", which every answer sets.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "api/jobs.h"
#include "daemon/caller.h"
#include "daemon/job_service.h"

namespace gpuherd::daemon::routes {

class JobListingWriter {
 public:
  enum class Form { kJobs, kTable };
  // The listing in `form`, less the internals of jobs `caller` may not see
  // (access.h; the table has none). On the loop thread, as the routes are.
  std::string Body(const JobService::JobListing& listing, const Caller& caller, Form form = Form::kJobs);
  // A job's row of the compact listing, in api::kJobTableColumns' order.
  static std::string TableRow(const api::JobView& view);

 private:
  // A job's JSON as head + now + tail.
  struct Text {
    std::string head, tail;
  };
  struct Cached {
    std::shared_ptr<const api::JobView> view;  // the view the texts were written from
    // Each made when first asked for: the whole job, the job without its
    // internals, the compact listing's row.
    std::optional<Text> full, hidden;
    std::optional<std::string> row;
  };
  static Text Split(const api::JobView& view, bool hide);
  // The cache entry for a live view, emptied when the view is new.
  Cached& For(const std::shared_ptr<const api::JobView>& view);

  std::unordered_map<int64_t, Cached> cache_;
};

}  // namespace gpuherd::daemon::routes
