// The body of GET /v1/jobs from the queue's typed listing. A deep queue is
// polled often and changes little: each unfinished job's JSON is written once
// per change (the queue hands out a new view object when a job changes) and
// kept here, split around the value of "now", which every answer sets anew.
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
  // {"jobs": [...], "now": N}, less the internals of jobs `caller` may not
  // see (access.h). On the loop thread, as the routes are.
  std::string Body(const JobService::JobListing& listing, const Caller& caller);

 private:
  // A job's JSON as head + now + tail.
  struct Text {
    std::string head, tail;
  };
  struct Cached {
    std::shared_ptr<const api::JobView> view;  // the view the texts were written from
    Text full;
    std::optional<Text> hidden;  // without the internals, made when first asked for
  };
  static Text Split(const api::JobView& view, bool hide);

  std::unordered_map<int64_t, Cached> cache_;
};

}  // namespace gpuherd::daemon::routes
